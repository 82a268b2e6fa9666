// io_replies.h: what the Redis-backed tasks make of their replies.
#include "tasks/io_replies.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <optional>

#include "core/parse_f64.h"
#include "core/parse_int.h"
#include "data/column_builder.h"
#include "tasks/schemas.h"

namespace rankd {

namespace {

std::string KeyOf(const ReplySource& src, std::string_view kind, int64_t id) {
  return std::string(src.prefix) + std::string(kind) + std::to_string(id);
}

// backend_error for an error reply or a reply of the wrong shape. The client is told
// the command, the endpoint's name and the kind of reply; the key, the address and the
// raw Redis error text go to the detail (the log).
Error BadReply(const ReplySource& src, std::string_view command, const std::string& key,
               RespView r) {
  std::string what = r.is_error()
                         ? "error reply"
                         : "unexpected " + std::string(RedisReplyKindName(r.kind())) + " reply";
  Error e = Error::Backend(std::string(command) + " at redis endpoint " +
                           std::string(src.endpoint) + ": " + what);
  e.detail = std::string(command) + " " + key + " at redis endpoint " +
             (src.address ? src.address->Label() : "?") + ": " +
             (r.is_error() ? std::string(r.str()) : what);
  return e;
}

// A cell without a value (missing or unparsable) becomes a null of `col`, counted;
// false when it has a value (nothing appended).
bool AppendNoValue(ColumnBuilder& col, CachedField::State state, RedisStats& stats) {
  switch (state) {
    case CachedField::State::kMissing: Bump(stats.fields_missing); break;
    case CachedField::State::kUnparsable: Bump(stats.fields_unparsable); break;
    case CachedField::State::kValue: return false;
  }
  col.AppendNulls(1);
  return true;
}

// Appends one decoded cell to `col` (typed by the column); a missing or unparsable
// value becomes a null and is counted.
void AppendCell(ColumnBuilder& col, const CachedFields& cells, size_t i, RedisStats& stats) {
  if (AppendNoValue(col, cells.state(i), stats)) return;
  switch (col.type()) {
    case ColumnType::kI64: col.AppendI64(cells.i64(i)); break;
    case ColumnType::kF64: col.AppendF64(cells.f64(i)); break;
    case ColumnType::kStr: col.AppendStr(cells.str(i)); break;
    case ColumnType::kBool: col.AppendBool(cells.boolean(i)); break;
  }
}

ColumnPtr Finished(ColumnBuilder& col) { return Share(std::move(col).Finish()); }

constexpr uint32_t kNotAsked = UINT32_MAX;

// Where FeatureRows reads distinct id k's field f: decoded replies, with any cache hits
// copied in (ReplyCells), or the cache's entries themselves when every id hit and no
// batch went out meanwhile (CachedEntries: no copy through cells).
struct ReplyCells {
  const CachedFields& cells;
  size_t nf;
  // Distinct id k's field f: its state, and its value into `into` when it has one
  // (`into` is left alone otherwise). CachedEntries' Read is the same.
  template <class T>
  CachedField::State Read(size_t k, size_t f, T& into) const {
    const size_t i = k * nf + f;
    const CachedField::State state = cells.state(i);
    if (state != CachedField::State::kValue) return state;
    if constexpr (std::is_same_v<T, int64_t>) into = cells.i64(i);
    if constexpr (std::is_same_v<T, double>) into = cells.f64(i);
    if constexpr (std::is_same_v<T, uint8_t>) into = static_cast<uint8_t>(cells.boolean(i) ? 1 : 0);
    return state;
  }
  void Append(ColumnBuilder& col, size_t k, size_t f, RedisStats& stats) const {
    AppendCell(col, cells, k * nf + f, stats);
  }
};

struct CachedEntries {
  std::span<const HashRef> found;       // by distinct id
  std::span<const size_t> field_index;  // the node's field f is the entry's field_index[f]
  template <class T>
  CachedField::State Read(size_t k, size_t f, T& into) const {
    const HashRef::Fixed v = found[k].fixed(field_index[f]);
    if (v.state != CachedField::State::kValue) return v.state;
    if constexpr (std::is_same_v<T, int64_t>) into = static_cast<int64_t>(v.bits);
    if constexpr (std::is_same_v<T, double>) into = std::bit_cast<double>(v.bits);
    if constexpr (std::is_same_v<T, uint8_t>) into = static_cast<uint8_t>(v.bits != 0 ? 1 : 0);
    return v.state;
  }
  // A string field.
  void Append(ColumnBuilder& col, size_t k, size_t f, RedisStats& stats) const {
    const HashRef h = found[k];
    if (!AppendNoValue(col, h.state(field_index[f]), stats)) col.AppendStr(h.str(field_index[f]));
  }
};

// features: one fixed-width column (i64, f64 or bool) of the node's field f.
struct FixedColumn {
  size_t f;
  Column col;
};

// Writes the fixed-width columns in place (a source writes only values, so a null keeps
// the 0 of the resize), row by row with all of a row's fields
// together (so each distinct id's entry or cells are read once, not once per field):
// row r holds distinct id reply_of_row[r]'s field, or null. The same columns as
// ColumnBuilder makes (nulls hold 0), without its per-cell dispatch.
template <class Source>
void FillFixed(std::span<FixedColumn> out, const Source& source,
               std::span<const uint32_t> reply_of_row, RedisStats& stats) {
  const size_t rows = reply_of_row.size();
  for (FixedColumn& c : out) {
    switch (c.col.type) {
      case ColumnType::kI64: c.col.i64.resize(rows); break;
      case ColumnType::kF64: c.col.f64.resize(rows); break;
      case ColumnType::kBool: c.col.b.resize(rows); break;
      case ColumnType::kStr: break;
    }
  }
  uint64_t missing = 0, unparsable = 0;
  for (size_t r = 0; r < rows; ++r) {
    const uint32_t k = reply_of_row[r];
    for (FixedColumn& c : out) {
      if (k != kNotAsked) {
        CachedField::State state = CachedField::State::kMissing;
        switch (c.col.type) {
          case ColumnType::kI64: state = source.Read(k, c.f, c.col.i64[r]); break;
          case ColumnType::kF64: state = source.Read(k, c.f, c.col.f64[r]); break;
          case ColumnType::kBool: state = source.Read(k, c.f, c.col.b[r]); break;
          case ColumnType::kStr: break;
        }
        if (state == CachedField::State::kValue) continue;
        missing += state == CachedField::State::kMissing;
        unparsable += state == CachedField::State::kUnparsable;
      }
      c.col.validity.SetNull(r, rows);
    }
  }
  if (missing) Bump(stats.fields_missing, missing);
  if (unparsable) Bump(stats.fields_unparsable, unparsable);
}

// features: the input plus one typed column per field, read from `source`.
template <class Source>
RowSet FeatureRowsFrom(const ReplySource& src, const RowSet& input, const InputIds& ids,
                       std::span<const uint32_t> reply_of, const std::vector<std::string>& fields,
                       const Source& source) {
  // Columns span the input's physical rows (so its selection vector still applies);
  // rows outside the selection, or with a null id, stay null. Missing and unparsable
  // values are counted per row, as they reach the response.
  const size_t rows = input.physical_rows();
  std::vector<uint32_t> reply_of_row(rows, kNotAsked);
  for (size_t i = 0; i < ids.ids.size(); ++i) reply_of_row[ids.rows[i]] = reply_of[i];
  RedisStats& stats = *src.stats;
  std::vector<ColumnPtr> cols(fields.size());
  std::vector<FixedColumn> fixed;
  for (size_t f = 0; f < fields.size(); ++f) {
    const ColumnType type = *ItemFieldType(fields[f]);
    if (type != ColumnType::kStr) {
      fixed.push_back({f, Column{}});
      fixed.back().col.type = type;
      continue;
    }
    ColumnBuilder col(type, rows);
    for (uint32_t k : reply_of_row) {
      if (k == kNotAsked)
        col.AppendNulls(1);
      else
        source.Append(col, k, f, stats);
    }
    cols[f] = Finished(col);
  }
  FillFixed(fixed, source, reply_of_row, stats);
  for (FixedColumn& c : fixed) cols[c.f] = Share(std::move(c.col));
  RowSet out = input;
  for (size_t f = 0; f < fields.size(); ++f) out.SetColumn(fields[f], std::move(cols[f]));
  return out;
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

void DecodeField(RespView r, ColumnType type, CachedFields& cells, size_t i) {
  if (!r.is_string()) return cells.SetNoValue(i, CachedField::State::kMissing);
  const std::string_view s = r.str();
  switch (type) {
    case ColumnType::kI64:
      if (auto v = ParseStrictInt<int64_t>(s)) return cells.SetI64(i, *v);
      break;
    case ColumnType::kF64:
      if (auto v = ParseStrictF64(s)) return cells.SetF64(i, *v);
      break;
    case ColumnType::kStr: return cells.SetStr(i, s);
    case ColumnType::kBool:
      if (s == "1" || s == "true") return cells.SetBool(i, true);
      if (s == "0" || s == "false") return cells.SetBool(i, false);
      break;
  }
  cells.SetNoValue(i, CachedField::State::kUnparsable);
}

Result<CachedHash> DecodeUser(const ReplySource& src, int64_t user_id, RespView r) {
  if (!r.is_array() || r.size() % 2 != 0)
    return Fail(BadReply(src, "HGETALL", KeyOf(src, "user:", user_id), r));
  const auto& names = UserFields();
  CachedHash out;
  out.exists = r.size() > 0;
  out.fields.resize(names.size());
  out.known = (uint64_t{1} << names.size()) - 1;
  // One pass over the pairs; a field named twice takes its last value. Unnamed: nil.
  std::array<RespView, 64> values{};  // a user hash has at most 64 known fields (`known`)
  for (auto it = r.begin(); it != r.end();) {
    const std::string_view name = it->str();
    ++it;
    for (size_t f = 0; f < names.size(); ++f)
      if (name == names[f]) values[f] = *it;
    ++it;
  }
  for (size_t f = 0; f < names.size(); ++f)
    DecodeField(values[f], *UserFieldType(names[f]), out.fields, f);
  return out;
}

Result<void> DecodeItem(const ReplySource& src, int64_t id, std::span<const ColumnType> types,
                        RespView r, CachedFields& cells, size_t first) {
  if (!r.is_array() || r.size() != types.size())
    return Fail(BadReply(src, "HMGET", KeyOf(src, "item:", id), r));
  size_t f = 0;
  for (RespView e : r) {
    DecodeField(e, types[f], cells, first + f);
    ++f;
  }
  return {};
}

Result<CachedList> DecodeList(const ReplySource& src, std::string_view kind, int64_t id,
                              uint32_t asked, RespView r) {
  if (!r.is_array()) return Fail(BadReply(src, "LRANGE", KeyOf(src, kind, id), r));
  CachedList out;
  out.asked = asked;
  out.members.reserve(r.size());
  for (RespView e : r) {
    auto v = e.is_string() ? ParseStrictInt<int64_t>(e.str()) : std::nullopt;
    if (!v) {
      Bump(src.stats->bad_ids);
      out.bad.push_back(static_cast<uint32_t>(out.members.size()));
    }
    out.members.push_back(v.value_or(0));
  }
  return out;
}

RowSet UserRows(const ReplySource& src, int64_t user_id, const CachedHash& user) {
  const size_t rows = user.exists ? 1 : 0;
  RowSet out;
  out.SetColumn(
      "id", Share(Column::I64(user.exists ? PoolVector<int64_t>{user_id} : PoolVector<int64_t>{})));
  const auto& names = UserFields();
  for (size_t f = 0; f < names.size(); ++f) {
    ColumnBuilder col(*UserFieldType(names[f]), rows);
    if (user.exists) AppendCell(col, user.fields, f, *src.stats);
    out.SetColumn(names[f], Finished(col));
  }
  return out;
}

Result<void> AppendListIds(const ReplySource& src, std::string_view kind, int64_t id,
                           uint32_t asked, RespView r, PoolVector<int64_t>& out) {
  if (!r.is_array()) return Fail(BadReply(src, "LRANGE", KeyOf(src, kind, id), r));
  uint32_t i = 0;
  for (RespView e : r) {
    auto v = e.is_string() ? ParseStrictInt<int64_t>(e.str()) : std::nullopt;
    if (!v)
      Bump(src.stats->bad_ids);
    else if (i < asked)
      out.push_back(*v);
    ++i;
  }
  return {};
}

void AppendListIds(std::span<const int64_t> members, std::span<const uint32_t> bad, uint32_t count,
                   PoolVector<int64_t>& out) {
  const size_t n = std::min<size_t>(count, members.size());
  if (bad.empty()) {
    out.insert(out.end(), members.begin(), members.begin() + static_cast<ptrdiff_t>(n));
    return;
  }
  auto next_bad = bad.begin();
  for (size_t i = 0; i < n; ++i) {
    if (next_bad != bad.end() && *next_bad == i) {
      ++next_bad;
      continue;
    }
    out.push_back(members[i]);
  }
}

RowSet FeatureRows(const ReplySource& src, const RowSet& input, const InputIds& ids,
                   std::span<const uint32_t> reply_of, const std::vector<std::string>& fields,
                   const CachedFields& cells) {
  return FeatureRowsFrom(src, input, ids, reply_of, fields, ReplyCells{cells, fields.size()});
}

RowSet FeatureRows(const ReplySource& src, const RowSet& input, const InputIds& ids,
                   std::span<const uint32_t> reply_of, const std::vector<std::string>& fields,
                   std::span<const HashRef> found, std::span<const size_t> field_index) {
  return FeatureRowsFrom(src, input, ids, reply_of, fields, CachedEntries{found, field_index});
}

Result<RowSet> SeenFilterRows(const ReplySource& src, int64_t user_id, const RowSet& input,
                              const InputIds& ids, RespView r) {
  if (!r.is_array() || r.size() != ids.ids.size())
    return Fail(BadReply(src, "SMISMEMBER", KeyOf(src, "seen:", user_id), r));
  // Keep the logical order: rows with a null id were never asked about and stay.
  std::vector<uint8_t> seen(input.physical_rows(), 0);
  size_t i = 0;
  for (RespView e : r) {
    if (e.is_integer() && e.integer() == 1) seen[ids.rows[i]] = 1;
    ++i;
  }
  Selection keep;
  keep.reserve(input.size());
  for (size_t i = 0; i < input.size(); ++i)
    if (!seen[input.row(i)]) keep.push_back(input.row(i));
  return input.WithSelection(std::move(keep));
}

}  // namespace rankd
