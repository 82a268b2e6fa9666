// Fuzz target `redis_reply`: bytes as they would arrive from Redis -> the reply reader
// every connection uses (RespScanner's limits, then each reply's bytes kept in one
// RespReplies: src/redis/resp_reader.h RespReader; also as a long-lived handshake or
// push reader that drops what it read) -> the replies, read in place through RespView
// (every element walked) -> every IO task's conversion of replies into rows
// (src/tasks/io_replies.h), as if they answered its batch.
// Corpus: tests/fuzz/corpus/redis_reply (RESP of every type, and headers that announce
// more than any limit allows); dictionary redis_reply.dict.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "redis/resp_reader.h"
#include "redis/stats.h"
#include "tasks/io_replies.h"
#include "tasks/schemas.h"

using namespace rankd;

namespace {

// Every complete reply in `bytes`, fed in two pieces (so the reader also resumes a
// reply cut in the middle), up to the first error (a limit, broken RESP) or the end.
// Small limits, so that the fuzzer reaches them often.
RespReplies ReadReplies(std::string_view bytes) {
  RespReader reader(ReplyLimits{.max_bytes = 1 << 20});
  RespReader dropping(ReplyLimits{.max_bytes = 1 << 20});  // a handshake's or push's
  std::string kept;                                        // the replies it yielded
  size_t half = bytes.size() / 2;
  for (std::string_view piece : {bytes.substr(0, half), bytes.substr(half)}) {
    const bool ok = reader.Feed(piece).has_value();
    if (ok != dropping.Feed(piece).has_value()) __builtin_trap();
    for (size_t i = 0; i < dropping.replies().size(); ++i) kept += dropping.replies().raw(i);
    dropping.DropComplete();
    if (!ok) break;
  }
  RespReplies out;
  std::string all;
  for (size_t i = 0; i < reader.replies().size(); ++i) {
    out.Append(reader.replies().raw(i));
    all += reader.replies().raw(i);
  }
  if (all != kept) __builtin_trap();
  return out;
}

// Walks every element of `v` (nested arrays too) by iteration; returns where the last
// one ends, which must be where `v` ends.
const char* WalkEnd(RespView v) {
  if (RespKindName(v.kind()).empty()) __builtin_trap();
  if (v.size() == 0) return v.End();
  const char* end = nullptr;
  size_t n = 0;
  RespKind last = RespKind::kNil;
  for (RespView e : v) {
    end = WalkEnd(e);
    last = e.kind();
    ++n;
  }
  // At agrees with the iteration on the last element (At walks the same way).
  if (n != v.size() || v.At(n - 1).kind() != last) __builtin_trap();
  return end;
}

// `n` input rows with ids 1..n, then one more with id 1 again and one with a null id,
// under a selection that reverses them.
RowSet InputRows(size_t n) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < n; ++i) ids.push_back(static_cast<int64_t>(i + 1));
  ids.push_back(1);
  ids.push_back(0);
  Column c = Column::I64(ids);
  c.validity.SetNull(ids.size() - 1, ids.size());
  RowSet rows;
  rows.SetColumn("id", std::make_shared<const Column>(std::move(c)));
  Selection sel;
  for (size_t i = ids.size(); i-- > 0;) sel.push_back(static_cast<uint32_t>(i));
  return rows.WithSelection(std::move(sel));
}

// The families the replies are decoded as: the demo's hashes and lists, and a json
// family, a zset and lists of str members.
const Schema& FuzzSchema() {
  static const SchemaPtr schema = [] {
    auto s = ParseSchema(R"({"schema_version": 1, "families": {
      "user": {"type": "hash", "key": "user:{id}", "fields": {"country": "str", "age": "i64", "vip": "bool"}},
      "item": {"type": "hash", "key": "item:{id}", "fields": {"likes": "i64", "quality": "f64", "category": "str", "nsfw": "bool"}},
      "doc": {"type": "json", "key": "doc:{id}:v1", "fields": {"likes": "i64", "quality": "f64", "category": "str", "nsfw": "bool"}},
      "follow": {"type": "list", "key": "follow:{id}"},
      "watch": {"type": "zset", "key": "w:{id}", "id": "str", "members": "str"},
      "seen": {"type": "set", "key": "seen:{id}"}}})",
                         "fuzz schema");
    if (!s) __builtin_trap();
    return *s;
  }();
  return *schema;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  RespReplies replies = ReadReplies(std::string_view(reinterpret_cast<const char*>(data), size));
  if (replies.empty()) return 0;
  const Schema& schema = FuzzSchema();
  auto source = [&](const char* family) {
    return ReplySource{"fuzz", "pre:", nullptr, schema.Find(family)};
  };
  const ReplySource user = source("user"), item = source("item"), doc = source("doc"),
                    follow = source("follow"), watch = source("watch"), seen = source("seen");
  const std::vector<size_t> user_fields = {0, 1, 2};

  for (size_t i = 0; i < replies.size(); ++i) {
    RespView r = replies[i];
    // The view spans exactly the reply's bytes, element by element.
    const char* end = replies.raw(i).data() + replies.raw(i).size();
    if (r.End() != end || WalkEnd(r) != end) __builtin_trap();
    CachedFields cells;
    cells.resize(user_fields.size());
    if (auto exists = DecodeHashAll(user, {7, {}}, r, cells, 0))
      (void)ViewerRows(user, {7, {}}, user_fields, *exists, cells);
    // Each reply as a json value too, when it is a string.
    if (r.is_string()) {
      CachedFields cells;
      cells.resize(4);
      const std::vector<size_t> all = {0, 1, 2, 3};
      DecodeJsonFields(doc, r.str(), all, cells, 0);
    }
  }

  // One LRANGE reply per input id, decoded and expanded as a 3-member head; the same as a
  // zset of str members with scores.
  std::vector<int64_t> ids;
  ListRows members;
  for (size_t i = 0; i < replies.size(); ++i) {
    ids.push_back(static_cast<int64_t>(i + 1));
    if (auto list = DecodeList(follow, {ids.back(), {}}, 3, false, replies[i]))
      if (list->Covers(3)) AppendList(*list, 3, static_cast<uint32_t>(i), false, members);
    if (auto list = DecodeList(watch, {0, "a"}, 3, true, replies[i]))
      AppendList(*list, 3, static_cast<uint32_t>(i), true, members);
  }

  // The rows asked about: the distinct non-null ids 1..n, one HMGET (and one MGET) reply
  // each (the duplicate id 1 shares the first), as RunFeatures batches them.
  RowSet input = InputRows(replies.size());
  Result<InputIds> in_ids = IdsOf(input, *item.family);
  if (!in_ids) __builtin_trap();
  Selection reply_of;
  for (int64_t id : in_ids->ids) reply_of.push_back(static_cast<uint32_t>(id - 1));
  // The fields: those of the item fields a first reply's length picks, so that an HMGET
  // reply of any length can match.
  const size_t want = replies[0].size();
  std::vector<std::string> fields;
  std::vector<size_t> field_index;
  for (size_t i = 0; i < want && i < item.family->fields.size(); ++i) {
    fields.push_back(item.family->fields[i].name);
    field_index.push_back(i);
  }
  if (fields.empty()) fields.push_back(item.family->fields[0].name), field_index.push_back(0);
  for (const ReplySource* src : {&item, &doc}) {
    CachedFields cells;
    cells.resize(replies.size() * fields.size());
    bool decoded = true;
    for (size_t k = 0; k < replies.size() && decoded; ++k)
      decoded = DecodeFields(*src, {ids[k], {}}, field_index, replies[k], cells, k * fields.size())
                    .has_value();
    if (decoded) (void)FeatureRows(*src, input, *in_ids, reply_of, fields, field_index, cells);
  }

  // SMISMEMBER over every id asked about: the first reply answers it.
  (void)SeenFilterRows(seen, {7, {}}, input, *in_ids, replies[0]);
  return 0;
}
