// resp_read_bench: reads one recorded RESP2 reply stream (bench/record_replies.py: what
// a redis-server answered `rankd serve` for a few `feed` requests) through two readers,
// in alternating rounds, and prints one JSON line per reader and a line of bounds:
//
//   ours     RespReader (resp_scanner.h under ReplyLimits, the replies kept as their
//            bytes in a RespReplies) and a RespView walk of every element, as the IO
//            tasks read them: the path a data connection's replies take
//   hiredis  hiredis 0.14's redisReader with custom object functions that build nothing
//            (each value is handed over and dropped: the least a client built on it can
//            do), fed the same pieces
//
// Both are fed the stream in pieces of CHUNK bytes (16 KiB: what a connection reads per
// readable event) and touch every value (string lengths, integers, array sizes), so the
// work compared is the reading. Per reader: ns per reply (median of the rounds) and heap
// allocations per reply (counted by this program's malloc, which hiredis calls too).
// Then each reader is given hostile headers and the outcome printed: what bounds it has.
//
//   resp_read_bench FILE [--rounds R] [--passes P] [--chunk BYTES]
#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "redis/resp_reader.h"

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void __libc_free(void* p);
}

namespace {

// Every allocation of the process, hiredis's included (its sds and reader call malloc,
// calloc and realloc; libstdc++'s operator new calls malloc), and the bytes asked for.
// One thread.
unsigned long long g_allocs = 0, g_asked = 0;

}  // namespace

extern "C" {
void* malloc(size_t size) {
  ++g_allocs;
  g_asked += size;
  return __libc_malloc(size);
}
void* calloc(size_t n, size_t size) {
  ++g_allocs;
  g_asked += n * size;
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t size) {
  ++g_allocs;
  g_asked += size;
  return __libc_realloc(p, size);
}
void free(void* p) { __libc_free(p); }
}

using namespace rankd;

namespace {

// What both readers add up, so that neither skips a value and the compiler keeps the
// work: values, string bytes, integers, array sizes.
struct Touch {
  unsigned long long values = 0, bytes = 0, ints = 0, arrays = 0;
  bool operator==(const Touch&) const = default;
};

void Walk(const RespView& v, Touch& t) {
  ++t.values;
  switch (v.kind()) {
    case RespKind::kArray:
      t.arrays += v.size();
      for (RespView e : v) Walk(e, t);
      break;
    case RespKind::kInteger: t.ints += static_cast<unsigned long long>(v.integer()); break;
    case RespKind::kNil: break;
    default: t.bytes += v.str().size(); break;
  }
}

struct Pass {
  size_t replies = 0;
  Touch touch;
  bool ok = true;
  std::string error;
};

Pass ReadOurs(std::string_view stream, size_t chunk, const ReplyLimits& limits) {
  Pass p;
  RespReader reader(limits);
  for (size_t off = 0; off < stream.size(); off += chunk) {
    if (auto s = reader.Feed(stream.substr(off, chunk)); !s) {
      p.ok = false;
      p.error = s.error().message;
      return p;
    }
    const RespReplies& r = reader.replies();
    for (size_t i = 0; i < r.size(); ++i) Walk(r[i], p.touch);
    p.replies += r.size();
    reader.DropComplete();
  }
  return p;
}

// hiredis's side: the task's parent array gets no object; each value only counts.
Touch* g_touch = nullptr;
int g_dummy = 0;
void* CreateString(const redisReadTask* task, char*, size_t len) {
  ++g_touch->values;
  if (task->type == REDIS_REPLY_STRING || task->type == REDIS_REPLY_STATUS ||
      task->type == REDIS_REPLY_ERROR)
    g_touch->bytes += len;
  return &g_dummy;
}
void* CreateArray(const redisReadTask*, int elements) {
  ++g_touch->values;
  g_touch->arrays += static_cast<unsigned long long>(elements);
  return &g_dummy;
}
void* CreateInteger(const redisReadTask*, long long v) {
  ++g_touch->values;
  g_touch->ints += static_cast<unsigned long long>(v);
  return &g_dummy;
}
void* CreateNil(const redisReadTask*) {
  ++g_touch->values;
  return &g_dummy;
}
void FreeObject(void*) {}

redisReplyObjectFunctions g_functions = {CreateString, CreateArray, CreateInteger, CreateNil,
                                         FreeObject};

// `tree`: hiredis's default functions (a redisReply per value, freed at once) instead.
Pass ReadHiredis(std::string_view stream, size_t chunk, bool tree = false) {
  Pass p;
  g_touch = &p.touch;
  redisReader* reader = tree ? redisReaderCreate() : redisReaderCreateWithFunctions(&g_functions);
  for (size_t off = 0; off < stream.size() && p.ok; off += chunk) {
    size_t n = std::min(chunk, stream.size() - off);
    if (redisReaderFeed(reader, stream.data() + off, n) != REDIS_OK) {
      p.ok = false;
      break;
    }
    for (;;) {
      void* reply = nullptr;
      if (redisReaderGetReply(reader, &reply) != REDIS_OK) {
        p.ok = false;
        break;
      }
      if (reply == nullptr) break;
      if (tree) freeReplyObject(reply);
      ++p.replies;
    }
  }
  if (!p.ok) p.error = reader->errstr;
  redisReaderFree(reader);
  return p;
}

struct Timed {
  double ns = 0;
  unsigned long long allocs = 0;
  Pass pass;
};

template <class F>
Timed Measure(int passes, F read) {
  Timed t;
  unsigned long long a0 = g_allocs;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < passes; ++i) t.pass = read();
  auto t1 = std::chrono::steady_clock::now();
  t.allocs = g_allocs - a0;
  t.ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
  return t;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string Json(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

// A hostile input, fed to each reader alone: what it says (an error, or that it waits
// for more bytes), and the allocations and bytes asked of malloc it cost. hiredis twice:
// with the custom functions above, and with its default ones (a redisReply per value:
// what an array header makes it allocate before any element came). `tree` false skips
// the default functions: for 2^31 elements they calloc 16 GiB, and freeing the partial
// reply walks all of it (a minute of CPU, every page of it faulted in).
void Probe(const char* name, std::string_view bytes, const ReplyLimits& limits, bool last,
           bool tree = true) {
  auto verdict = [](const Pass& p) {
    return p.ok ? (p.replies ? "accepted " + std::to_string(p.replies) + " replies"
                             : std::string("waits for more bytes"))
                : "refused: " + p.error;
  };
  std::printf("    %s: {", Json(name).c_str());
  for (int k = 0; k < (tree ? 3 : 2); ++k) {
    unsigned long long a0 = g_allocs, b0 = g_asked;
    Pass p = k == 0 ? ReadOurs(bytes, bytes.size(), limits)
                    : ReadHiredis(bytes, bytes.size(), /*tree=*/k == 2);
    static const char* const kNames[] = {"ours", "hiredis", "hiredis_default_functions"};
    std::printf("%s\"%s\": {\"outcome\": %s, \"allocations\": %llu, \"bytes_asked\": %llu}",
                k ? ", " : "", kNames[k], Json(verdict(p)).c_str(), g_allocs - a0, g_asked - b0);
  }
  std::printf("}%s\n", last ? "" : ",");
}

std::string Nested(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "*1\r\n";
  return s + ":1\r\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: resp_read_bench FILE [--rounds R] [--passes P] [--chunk BYTES]\n");
    return 2;
  }
  int rounds = 9, passes = 20;
  size_t chunk = 16 * 1024;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string f = argv[i];
    long v = std::strtol(argv[i + 1], nullptr, 10);
    if (v <= 0) {
      std::fprintf(stderr, "resp_read_bench: %s wants a positive number\n", f.c_str());
      return 2;
    }
    if (f == "--rounds")
      rounds = static_cast<int>(v);
    else if (f == "--passes")
      passes = static_cast<int>(v);
    else if (f == "--chunk")
      chunk = static_cast<size_t>(v);
    else {
      std::fprintf(stderr, "resp_read_bench: unknown flag %s\n", f.c_str());
      return 2;
    }
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::string stream((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) {
    std::fprintf(stderr, "resp_read_bench: cannot read %s\n", argv[1]);
    return 2;
  }
  ReplyLimits limits;  // rankd serve's defaults

  // Both must read the same replies and values, or the comparison means nothing.
  Pass a = ReadOurs(stream, chunk, limits), b = ReadHiredis(stream, chunk);
  if (!a.ok || !b.ok || a.replies == 0 || a.replies != b.replies || !(a.touch == b.touch)) {
    std::fprintf(stderr,
                 "resp_read_bench: the readers disagree on %s: ours %zu replies %llu values "
                 "(%s), hiredis %zu replies %llu values (%s)\n",
                 argv[1], a.replies, a.touch.values, a.error.c_str(), b.replies, b.touch.values,
                 b.error.c_str());
    return 1;
  }

  std::vector<double> ns[2];
  unsigned long long allocs[2] = {0, 0};
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < 2; ++k) {
      int side = (r % 2 == 0) ? k : 1 - k;  // the order reverses every other round
      Timed t = side == 0 ? Measure(passes, [&] { return ReadOurs(stream, chunk, limits); })
                          : Measure(passes, [&] { return ReadHiredis(stream, chunk); });
      ns[side].push_back(t.ns / (static_cast<double>(passes) * a.replies));
      allocs[side] += t.allocs;
    }
  }
  const double total = static_cast<double>(rounds) * passes * a.replies;
  double ours = Median(ns[0]), theirs = Median(ns[1]);
  auto rounded = [](double v) {
    return static_cast<double>(static_cast<long long>(v * 100 + 0.5)) / 100;
  };
  std::printf(
      "{\"name\": \"resp_read_ns_per_reply\", \"value\": %.2f, \"unit\": \"ns\", "
      "\"baseline\": %.2f, \"ratio\": %.3f, \"baseline_is\": \"hiredis 0.14 redisReader, custom "
      "object functions building nothing\", \"allocations_per_reply\": %.4f, "
      "\"baseline_allocations_per_reply\": %.4f, \"replies\": %zu, \"values\": %llu, "
      "\"stream_bytes\": %zu, \"chunk\": %zu, \"rounds\": %d, \"passes\": %d, "
      "\"rounds_ns\": [",
      rounded(ours), rounded(theirs), ours / theirs, allocs[0] / total, allocs[1] / total,
      a.replies, a.touch.values, stream.size(), chunk, rounds, passes);
  for (int r = 0; r < rounds; ++r) std::printf("%s%.2f", r ? ", " : "", rounded(ns[0][r]));
  std::printf("], \"baseline_rounds_ns\": [");
  for (int r = 0; r < rounds; ++r) std::printf("%s%.2f", r ? ", " : "", rounded(ns[1][r]));
  std::printf("]}\n");

  // Bounds: each reader fed one hostile header (or nesting) alone.
  std::printf(
      "{\"name\": \"resp_read_bounds\", \"limits\": {\"max_bytes\": %llu, "
      "\"max_depth\": %d, \"max_elements\": %llu}, \"probes\": {\n",
      static_cast<unsigned long long>(limits.max_bytes), limits.max_depth,
      static_cast<unsigned long long>(limits.max_elements));
  Probe("array header of 2000000 elements", "*2000000\r\n", limits, false);
  Probe("array header of 2147483647 elements", "*2147483647\r\n", limits, false,
        /*tree=*/false);
  Probe("array header of 4294967296 elements", "*4294967296\r\n", limits, false);
  Probe("bulk header of 1 GiB", "$1073741824\r\n", limits, false);
  Probe("bulk length -2", "$-2\r\n", limits, false);
  Probe("arrays nested 5 deep", Nested(5), limits, false);
  Probe("arrays nested 8 deep", Nested(8), limits, false);
  Probe("arrays nested 9 deep", Nested(9), limits, false);
  Probe("integer written +1", ":+1\r\n", limits, true);
  std::printf("}}\n");
  return 0;
}
