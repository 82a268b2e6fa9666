// RespScanner, RespReader, RespReplies and RedisCommands: reply limits
// checked on the bytes before anything buffers them (whatever way the stream is split
// into reads), replies read in place (also gathered from parts), commands encoded in
// place.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "redis/command_batch.h"
#include "redis/resp_reader.h"
#include "redis/resp_scanner.h"

using namespace rankd;

namespace {

ReplyLimits Limits(uint64_t bytes, int depth = 4, uint64_t elements = 1 << 20) {
  ReplyLimits l;
  l.max_bytes = bytes;
  l.max_depth = depth;
  l.max_elements = elements;
  return l;
}

// Scans `wire` split at `cut` (two reads); returns the replies ended, or the error.
Result<size_t> ScanSplit(const ReplyLimits& l, const std::string& wire, size_t cut) {
  RespScanner s(l);
  auto a = s.Scan(std::string_view(wire).substr(0, cut));
  if (!a) return a;
  auto b = s.Scan(std::string_view(wire).substr(cut));
  if (!b) return b;
  return *a + *b;
}

// Scans `wire` one byte per read.
Result<size_t> ScanBytewise(const ReplyLimits& l, const std::string& wire) {
  RespScanner s(l);
  size_t ended = 0;
  for (char c : wire) {
    auto r = s.Scan(std::string_view(&c, 1));
    if (!r) return r;
    ended += *r;
  }
  return ended;
}

bool Contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("scanner: valid replies end where they end, at every split of the stream") {
  const std::string wire =
      "+OK\r\n-ERR x\r\n:-42\r\n$5\r\nhe\r\no\r\n$0\r\n\r\n$-1\r\n*-1\r\n*0\r\n"
      "*2\r\n*2\r\n:1\r\n$1\r\na\r\n+s\r\n"
      "*3\r\n$3\r\nfoo\r\n$-1\r\n:7\r\n";
  const size_t replies = 10;
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    auto r = ScanSplit(Limits(1 << 20), wire, cut);
    REQUIRE_MESSAGE(r.has_value(), "cut at ", cut);
    CHECK(*r == replies);
  }
  auto b = ScanBytewise(Limits(1 << 20), wire);
  REQUIRE(b.has_value());
  CHECK(*b == replies);
}

TEST_CASE("scanner: a huge array header fails at once, at every split") {
  const std::string wire = "*2147483647\r\n";
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    auto r = ScanSplit(Limits(64 << 20), wire, cut);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ErrorCode::kBackendError);
  }
  // Over int: a reader counting in int would truncate it.
  CHECK_FALSE(ScanBytewise(Limits(64 << 20), "*4294967297\r\n").has_value());
  CHECK_FALSE(ScanBytewise(Limits(64 << 20), "*99999999999999999999\r\n").has_value());
}

TEST_CASE("scanner: a huge bulk header fails before any payload") {
  const std::string wire = "$1073741824\r\n";
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    auto r = ScanSplit(Limits(16 << 20), wire, cut);
    REQUIRE_FALSE(r.has_value());
    CHECK(Contains(r.error().message, "reply over the size limit"));
    CHECK(Contains(r.error().message, "1073741824"));
  }
}

TEST_CASE("scanner: exact limit boundaries") {
  // "$10\r\n" (5) + 10 + "\r\n" (2) = 17 bytes.
  const std::string bulk = "$10\r\n0123456789\r\n";
  CHECK(ScanBytewise(Limits(17), bulk).value_or(0) == 1);
  CHECK_FALSE(ScanBytewise(Limits(16), bulk).has_value());
  // The budget is per reply: two such replies fit a 17-byte limit.
  CHECK(ScanBytewise(Limits(17), bulk + bulk).value_or(0) == 2);

  // "*3\r\n" (4) + 3 x 3 bytes owed = 13: the header passes at 13, fails at 12.
  const std::string arr = "*3\r\n+\r\n+\r\n+\r\n";
  CHECK(ScanBytewise(Limits(13), arr).value_or(0) == 1);
  CHECK_FALSE(ScanBytewise(Limits(12), arr).has_value());
  // Elements larger than their 3-byte reservation still count in full.
  CHECK_FALSE(ScanBytewise(Limits(13), "*3\r\n+a\r\n+\r\n+\r\n").has_value());

  // A status line is counted as it streams: no CRLF within the limit fails.
  CHECK(ScanBytewise(Limits(6), "+abc\r\n").value_or(0) == 1);
  CHECK_FALSE(ScanBytewise(Limits(5), "+abc\r\n").has_value());
  CHECK_FALSE(ScanBytewise(Limits(100), "+" + std::string(200, 'x')).has_value());
}

TEST_CASE("scanner: nesting depth and element count") {
  CHECK(ScanBytewise(Limits(1 << 20, 2), "*1\r\n*1\r\n:1\r\n").value_or(0) == 1);
  auto deep = ScanBytewise(Limits(1 << 20, 2), "*1\r\n*1\r\n*1\r\n:1\r\n");
  REQUIRE_FALSE(deep.has_value());
  CHECK(Contains(deep.error().message, "nested too deep"));
  // Beyond 7 even when the limit asks for more: the scanner's own cap.
  std::string eight;
  for (int i = 0; i < 8; ++i) eight += "*1\r\n";
  CHECK_FALSE(ScanBytewise(Limits(1 << 20, 100), eight + ":1\r\n").has_value());

  CHECK(ScanBytewise(Limits(1 << 20, 4, 3), "*3\r\n:1\r\n:2\r\n:3\r\n").value_or(0) == 1);
  // Counted across the reply's nested arrays.
  auto many = ScanBytewise(Limits(1 << 20, 4, 3), "*2\r\n*2\r\n:1\r\n:2\r\n:3\r\n");
  REQUIRE_FALSE(many.has_value());
  CHECK(Contains(many.error().message, "element limit"));
}

TEST_CASE("scanner: protocol errors, quoting no stream bytes") {
  for (std::string bad : {"?x\r\n", "$abc\r\n", "$+5\r\n", "$-2\r\n", "*-5\r\n", ":1x\r\n", "$\r\n",
                          ":\r\n", "$3\r\nabcXY", "$1\r\nab\r\n", "*1\r\n&\r\n", ":1\rX"}) {
    auto r = ScanBytewise(Limits(1 << 20), bad);
    REQUIRE_MESSAGE(!r.has_value(), bad);
    CHECK(r.error().code == ErrorCode::kBackendError);
    CHECK(Contains(r.error().message, "protocol error"));
    CHECK_FALSE(Contains(r.error().message, "abc"));
  }
  // Failed stays failed.
  RespScanner s(Limits(1 << 20));
  CHECK_FALSE(s.Scan("?").has_value());
  CHECK_FALSE(s.Scan("+OK\r\n").has_value());
}

TEST_CASE("reader: a long-lived reader drops what it read, keeps a reply begun, fails for good") {
  const std::string wire = "*2\r\n$3\r\nfoo\r\n:5\r\n+PONG\r\n";
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    RespReader r(Limits(1 << 20));
    std::vector<std::string> seen;  // each reply's bytes, in order, as a push sink sees them
    for (std::string_view piece :
         {std::string_view(wire).substr(0, cut), std::string_view(wire).substr(cut)}) {
      REQUIRE(r.Feed(piece).has_value());
      for (size_t i = 0; i < r.replies().size(); ++i) seen.emplace_back(r.replies().raw(i));
      r.DropComplete();
      CHECK(r.replies().empty());
    }
    CHECK_FALSE(r.mid_reply());
    CHECK(seen == std::vector<std::string>{"*2\r\n$3\r\nfoo\r\n:5\r\n", "+PONG\r\n"});
  }
  RespReader r(Limits(1 << 20));
  REQUIRE(r.Feed("+OK\r\n*2\r\n:1").has_value());
  CHECK(r.mid_reply());
  r.DropComplete();  // "+OK" goes; the array begun stays
  REQUIRE(r.Feed("\r\n:2\r\n").has_value());
  REQUIRE(r.replies().size() == 1);
  CHECK(r.replies()[0].At(1).integer() == 2);
  RespReader small(Limits(16));
  auto s = small.Feed("$1073741824\r\n");
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == ErrorCode::kBackendError);
  CHECK_FALSE(small.Feed("+OK\r\n").has_value());
  CHECK(small.replies().empty());
}

TEST_CASE("reader: a nested reply keeps every element whatever its announced count") {
  std::string wire = "*3\r\n*2\r\n:1\r\n:2\r\n$-1\r\n*1\r\n*0\r\n";
  std::string big = "*5000\r\n";
  for (int i = 0; i < 5000; ++i) big += ":" + std::to_string(i) + "\r\n";
  RespReader r;
  REQUIRE(r.Feed(wire + big).has_value());
  REQUIRE(r.replies().size() == 2);
  const RespView v = r.replies()[0];
  REQUIRE(v.size() == 3);
  CHECK(v.At(0).size() == 2);
  CHECK(v.At(0).At(1).integer() == 2);
  CHECK(v.At(1).is_nil());
  REQUIRE(v.At(2).size() == 1);
  CHECK(v.At(2).At(0).is_array());
  const RespView b = r.replies()[1];
  REQUIRE(b.size() == 5000);
  int64_t expect = 0;
  for (RespView e : b) CHECK(e.integer() == expect++);
  CHECK(expect == 5000);
  CHECK(b.At(4999).integer() == 4999);
}

TEST_CASE("resp reader: replies kept as bytes, read in place across any split") {
  const std::string wire =
      "*4\r\n$3\r\nfoo\r\n*2\r\n:-7\r\n$-1\r\n*0\r\n+a\rb\nc\r\n-ERR x\r\n:9223372036854775807\r\n"
      "$0\r\n\r\n*-1\r\n";
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    RespReader r(Limits(1 << 20));
    REQUIRE(r.Feed(std::string_view(wire).substr(0, cut)).has_value());
    REQUIRE(r.Feed(std::string_view(wire).substr(cut)).has_value());
    const RespReplies& replies = r.replies();
    REQUIRE(replies.size() == 5);
    RespView a = replies[0];
    REQUIRE(a.is_array());
    REQUIRE(a.size() == 4);
    std::vector<RespView> e(a.begin(), a.end());
    REQUIRE(e.size() == 4);
    CHECK(e[0].str() == "foo");
    REQUIRE(e[1].size() == 2);
    CHECK((*e[1].begin()).integer() == -7);
    CHECK((*++e[1].begin()).is_nil());
    CHECK(e[2].is_array());
    CHECK(e[2].size() == 0);
    CHECK(e[3].kind() == RespView::Kind::kStatus);
    CHECK(e[3].str() == "a\rb\nc");
    CHECK(a.End() == replies.raw(0).data() + replies.raw(0).size());
    CHECK(replies[1].is_error());
    CHECK(replies[1].str() == "ERR x");
    CHECK(replies[2].integer() == INT64_MAX);
    CHECK(replies[3].is_string());
    CHECK(replies[3].str().empty());
    CHECK(replies[4].is_nil());
  }
  RespReader r(Limits(16));
  CHECK_FALSE(r.Feed("*1\r\n$1073741824\r\n").has_value());
  CHECK_FALSE(r.Feed("+OK\r\n").has_value());
  CHECK(r.replies().empty());
}

TEST_CASE("scanner: reports where each reply ends") {
  RespScanner s(Limits(1 << 20));
  std::vector<size_t> ends;
  auto n = s.Scan("+OK\r\n*2\r\n:1\r\n$2\r\nab\r\n$3\r\nx", &ends);
  REQUIRE(n.has_value());
  CHECK(ends == std::vector<size_t>{5, 21});
  n = s.Scan("yz\r\n:1\r", &ends);
  REQUIRE(n.has_value());
  CHECK(ends == std::vector<size_t>{4});
  n = s.Scan("\n", &ends);
  CHECK(ends == std::vector<size_t>{1});
}

TEST_CASE("commands: one buffer, each command's bytes and key in place") {
  RedisCommands c;
  c.Add(4).Arg("LRANGE").Key("p:", "follow:", 42).Arg(int64_t{0}).Arg(int64_t{-1});
  c.Add(2).Arg("PTTL").Key("p:", "user:7");
  RedisCommand one{"GET", "plain"};
  c.Append(one);
  REQUIRE(c.size() == 3);
  CHECK(c.wire(0) == "*4\r\n$6\r\nLRANGE\r\n$11\r\np:follow:42\r\n$1\r\n0\r\n$2\r\n-1\r\n");
  CHECK(c.wire(1) == "*2\r\n$4\r\nPTTL\r\n$8\r\np:user:7\r\n");
  CHECK(c.wire(2) == "*2\r\n$3\r\nGET\r\n$5\r\nplain\r\n");
  CHECK(c.wire() == std::string(c.wire(0)) + std::string(c.wire(1)) + std::string(c.wire(2)));
  CHECK(c.key(0) == "p:follow:42");
  CHECK(c.key(1) == "p:user:7");
  CHECK(c.key(2) == "plain");
  CHECK(c.Argument(0, 3) == "-1");
  CHECK(c.Argument(0, 4).empty());
  CHECK(c.Describe(0) == "LRANGE p:follow:42");
  RedisCommands share;
  share.Add(1).Arg("ASKING");
  share.Append(c, 1);
  CHECK(share.key(1) == "p:user:7");
  CHECK(share.wire(1) == c.wire(1));
}

TEST_CASE("commands: a shape encoded once gives the same bytes and key as Add/Arg/Key") {
  const std::vector<std::string> fields = {"likes", "quality", "a-field-name-of-12+"};
  const RedisCommands::Shape hmget = RedisCommands::MakeShape("HMGET", fields);
  const RedisCommands::Shape pttl = RedisCommands::MakeShape("PTTL", {});
  for (int64_t id : {int64_t{0}, int64_t{7}, int64_t{-12345678901}, INT64_MAX}) {
    for (std::string prefix : {"", "tenant-a:"}) {
      RedisCommands want, got;
      want.Add(5).Arg("HMGET").Key(prefix, "item:", id);
      for (const auto& f : fields) want.Arg(f);
      want.Add(2).Arg("PTTL").Key(prefix, "item:", id);
      got.Keyed(hmget, prefix, "item:", id).Keyed(pttl, prefix, "item:", id);
      REQUIRE(got.size() == 2);
      CHECK(got.wire() == want.wire());
      CHECK(got.key(0) == want.key(0));
      CHECK(got.key(1) == want.key(1));
      CHECK(got.Describe(0) == want.Describe(0));
    }
  }
}

TEST_CASE("commands: Args writes each value as Arg does") {
  const std::vector<int64_t> ids = {0, 7, -1, 1234567890, INT64_MIN, INT64_MAX};
  RedisCommands want, got;
  want.Add(2 + static_cast<int>(ids.size())).Arg("SMISMEMBER").Key("p:", "seen:", 3);
  for (int64_t id : ids) want.Arg(id);
  got.Add(2 + static_cast<int>(ids.size())).Arg("SMISMEMBER").Key("p:", "seen:", 3).Args(ids);
  got.Add(2).Arg("GET").Key("p:", "x").Args(std::span<const int64_t>{});  // none: nothing written
  want.Add(2).Arg("GET").Key("p:", "x");
  CHECK(got.wire() == want.wire());
  CHECK(got.key(0) == "p:seen:3");
}

TEST_CASE("resp replies: gathered from parts, placed by reference, read in place") {
  // Two node batches' replies, one short enough to live in its string object (SSO).
  RespReplies a, b;
  a.Append("$3\r\nfoo\r\n");
  a.Append("*2\r\n:1\r\n:2\r\n");
  b.Append(":7\r\n");
  const std::string a0(a.raw(0)), a1(a.raw(1)), b0(b.raw(0));
  RespReplies g;
  g.Gathered(3);
  CHECK(g.size() == 3);
  REQUIRE(g.AddPart(std::move(a)) == 0);
  REQUIRE(g.AddPart(std::move(b)) == 1);
  g.Place(0, 0, 1);
  g.Place(1, 1, 0);
  g.Place(2, 0, 0);
  CHECK(g.part_count() == 2);
  CHECK(g.part_of(1) == 1);
  CHECK(g.raw(0) == a1);
  CHECK(g.raw(1) == b0);
  CHECK(g.raw(2) == a0);
  CHECK(g[0].size() == 2);
  CHECK(g[1].integer() == 7);
  CHECK(g[2].str() == "foo");
  // A later part replaces a reply (a redirected command's new answer).
  RespReplies c;
  c.AppendError("MOVED 1 x:1");
  c.Append("+OK\r\n");
  g.Place(1, g.AddPart(std::move(c)), 1);
  CHECK(g[1].kind() == RespView::Kind::kStatus);
  // Moved as a whole, the parts stay where they are.
  RespReplies moved = std::move(g).Simplified();
  CHECK(moved[2].str() == "foo");
  CHECK(moved.raw(1) == "+OK\r\n");
  CHECK(moved[0].At(1).integer() == 2);
  // One part in its own order: the part itself.
  RespReplies one;
  one.Append(":1\r\n");
  one.Append(":2\r\n");
  RespReplies h;
  h.Gathered(2);
  h.Place(0, h.AddPart(std::move(one)), 0);
  h.Place(1, 0, 1);
  RespReplies plain = std::move(h).Simplified();
  CHECK(plain.part_count() == 0);
  CHECK(plain[1].integer() == 2);
}
