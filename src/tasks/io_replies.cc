// io_replies.h: what the Redis-backed tasks make of their replies.
#include "tasks/io_replies.h"

#include <charconv>
#include <cmath>
#include <optional>

#include "core/parse_int.h"
#include "data/column_builder.h"
#include "tasks/schemas.h"

namespace rankd {

namespace {

// ---- strict parsing -----------------------------------------------------------------

std::optional<double> ParseF64(std::string_view s) {
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

std::string KeyOf(const ReplySource& src, std::string_view kind, int64_t id) {
  return src.prefix + std::string(kind) + std::to_string(id);
}

// backend_error for an error reply or a reply of the wrong shape. The client is told
// the command, the endpoint's name and the kind of reply; the key, the address and the
// raw Redis error text go to the detail (the log).
Error BadReply(const ReplySource& src, std::string_view command, const std::string& key,
               const RedisReply& r) {
  std::string what = r.is_error()
                         ? "error reply"
                         : "unexpected " + std::string(RedisReplyKindName(r.kind)) + " reply";
  Error e =
      Error::Backend(std::string(command) + " at redis endpoint " + src.endpoint + ": " + what);
  e.detail = std::string(command) + " " + key + " at redis endpoint " + src.label + ": " +
             (r.is_error() ? r.str : what);
  return e;
}

// Appends one hash field's value as Redis sent it (`r`: a bulk string, or nil when the
// field is missing) to `col`, typed by the column; a missing or unparsable value
// becomes a null and is counted.
void AppendField(ColumnBuilder& col, const RedisReply& r, RedisStats& stats) {
  if (!r.is_string()) {
    Bump(stats.fields_missing);
    col.AppendNulls(1);
    return;
  }
  bool ok = true;
  switch (col.type()) {
    case ColumnType::kI64:
      if (auto v = ParseStrictInt<int64_t>(r.str))
        col.AppendI64(*v);
      else
        ok = false;
      break;
    case ColumnType::kF64:
      if (auto v = ParseF64(r.str))
        col.AppendF64(*v);
      else
        ok = false;
      break;
    case ColumnType::kStr: col.AppendStr(r.str); break;
    case ColumnType::kBool:
      if (r.str == "1" || r.str == "true")
        col.AppendBool(true);
      else if (r.str == "0" || r.str == "false")
        col.AppendBool(false);
      else
        ok = false;
      break;
  }
  if (!ok) {
    Bump(stats.fields_unparsable);
    col.AppendNulls(1);
  }
}

ColumnPtr Finished(ColumnBuilder& col) {
  return std::make_shared<const Column>(std::move(col).Finish());
}

}  // namespace

Result<InputIds> IdsOf(const RowSet& in) {
  const Column* id = in.column("id");
  if (id == nullptr || id->type != ColumnType::kI64)
    return Fail(Error::Internal("input has no i64 'id' column"));
  InputIds out;
  out.ids.reserve(in.size());
  out.rows.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    uint32_t r = in.row(i);
    if (!id->valid(r)) continue;
    out.ids.push_back(id->i64[r]);
    out.rows.push_back(r);
  }
  return out;
}

Result<RowSet> ViewerRows(const ReplySource& src, int64_t user_id, const RedisReply& r) {
  if (!r.is_array() || r.elements.size() % 2 != 0)
    return Fail(BadReply(src, "HGETALL", KeyOf(src, "user:", user_id), r));
  const bool found = !r.elements.empty();
  const size_t rows = found ? 1 : 0;
  RowSet out;
  out.SetColumn("id", std::make_shared<const Column>(Column::I64(
                          found ? std::vector<int64_t>{user_id} : std::vector<int64_t>{})));
  for (const auto& field : UserFields()) {
    ColumnBuilder col(*UserFieldType(field), rows);
    if (found) {
      const RedisReply* value = nullptr;
      for (size_t i = 0; i + 1 < r.elements.size(); i += 2)
        if (r.elements[i].str == field) value = &r.elements[i + 1];
      AppendField(col, value ? *value : RedisReply{}, *src.stats);
    }
    out.SetColumn(field, Finished(col));
  }
  return out;
}

Result<Expanded> ExpandedLists(const ReplySource& src, std::string_view kind,
                               std::span<const int64_t> ids, std::span<const RedisReply> replies) {
  Expanded out;
  for (size_t i = 0; i < replies.size(); ++i) {
    const RedisReply& r = replies[i];
    if (!r.is_array()) return Fail(BadReply(src, "LRANGE", KeyOf(src, kind, ids[i]), r));
    for (const auto& e : r.elements) {
      auto v = e.is_string() ? ParseStrictInt<int64_t>(e.str) : std::nullopt;
      if (!v) {
        Bump(src.stats->bad_ids);
        continue;
      }
      out.ids.push_back(*v);
      out.from.push_back(ids[i]);
    }
  }
  return out;
}

Result<RowSet> FeatureRows(const ReplySource& src, const RowSet& input, const InputIds& ids,
                           std::span<const uint32_t> reply_of, std::span<const int64_t> asked,
                           const std::vector<std::string>& fields,
                           std::span<const RedisReply> replies) {
  for (size_t k = 0; k < replies.size(); ++k) {
    const RedisReply& r = replies[k];
    if (!r.is_array() || r.elements.size() != fields.size())
      return Fail(BadReply(src, "HMGET", KeyOf(src, "item:", asked[k]), r));
  }
  // Columns span the input's physical rows (so its selection vector still applies);
  // rows outside the selection, or with a null id, stay null. Missing and unparsable
  // values are counted per row, as they reach the response.
  const size_t rows = input.physical_rows();
  constexpr uint32_t kNotAsked = UINT32_MAX;
  std::vector<uint32_t> reply_of_row(rows, kNotAsked);
  for (size_t i = 0; i < ids.ids.size(); ++i) reply_of_row[ids.rows[i]] = reply_of[i];
  RowSet out = input;
  for (size_t f = 0; f < fields.size(); ++f) {
    ColumnBuilder col(*ItemFieldType(fields[f]), rows);
    for (uint32_t reply : reply_of_row) {
      if (reply == kNotAsked)
        col.AppendNulls(1);
      else
        AppendField(col, replies[reply].elements[f], *src.stats);
    }
    out.SetColumn(fields[f], Finished(col));
  }
  return out;
}

Result<RowSet> SeenFilterRows(const ReplySource& src, int64_t user_id, const RowSet& input,
                              const InputIds& ids, const RedisReply& r) {
  if (!r.is_array() || r.elements.size() != ids.ids.size())
    return Fail(BadReply(src, "SMISMEMBER", KeyOf(src, "seen:", user_id), r));
  // Keep the logical order: rows with a null id were never asked about and stay.
  std::vector<uint8_t> seen(input.physical_rows(), 0);
  for (size_t i = 0; i < ids.rows.size(); ++i)
    if (r.elements[i].is_integer() && r.elements[i].integer == 1) seen[ids.rows[i]] = 1;
  std::vector<uint32_t> keep;
  keep.reserve(input.size());
  for (size_t i = 0; i < input.size(); ++i)
    if (!seen[input.row(i)]) keep.push_back(input.row(i));
  return input.WithSelection(std::move(keep));
}

}  // namespace rankd
