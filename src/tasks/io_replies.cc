// io_replies.h: what the Redis-backed tasks make of their replies.
#include "tasks/io_replies.h"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "core/parse_f64.h"
#include "core/parse_int.h"
#include "data/column_builder.h"
#include "redis/stats.h"

namespace rankd {

namespace {

using State = CachedField::State;

std::string KeyText(const ReplySource& src, IdRef id) {
  const KeyFamily& f = *src.family;
  return std::string(src.prefix) +
         f.KeyOf(f.id_type == ColumnType::kStr ? std::string(id.str) : std::to_string(id.num));
}

// backend_error for an error reply or a reply of the wrong shape. The client is told
// the command, the endpoint's name and the kind of reply; the key, the address and the
// raw Redis error text go to the detail (the log).
Error BadReply(const ReplySource& src, std::string_view command, IdRef id, RespView r) {
  std::string what =
      r.is_error() ? "error reply" : "unexpected " + std::string(RespKindName(r.kind())) + " reply";
  Error e = Error::Backend(std::string(command) + " at redis endpoint " +
                           std::string(src.endpoint) + ": " + what);
  e.detail = std::string(command) + " " + KeyText(src, id) + " at redis endpoint " +
             (src.address ? src.address->Label() : "?") + ": " +
             (r.is_error() ? std::string(r.str()) : what);
  return e;
}

// A cell without a value (missing or unparsable) becomes a null of `col`, counted;
// false when it has a value (nothing appended).
bool AppendNoValue(ColumnBuilder& col, State state, FamilyValueStats& stats) {
  switch (state) {
    case State::kMissing: Bump(stats.missing_field); break;
    case State::kUnparsable: Bump(stats.unparsable_field); break;
    case State::kBad: break;  // counted when decoded
    case State::kValue: return false;
  }
  col.AppendNulls(1);
  return true;
}

// Appends one decoded cell to `col` (typed by the column); a missing or unparsable
// value becomes a null and is counted.
void AppendCell(ColumnBuilder& col, const CachedFields& cells, size_t i, FamilyValueStats& stats) {
  if (AppendNoValue(col, cells.state(i), stats)) return;
  switch (col.type()) {
    case ColumnType::kI64: col.AppendI64(cells.i64(i)); break;
    case ColumnType::kF64: col.AppendF64(cells.f64(i)); break;
    case ColumnType::kStr: col.AppendStr(cells.str(i)); break;
    case ColumnType::kBool: col.AppendBool(cells.boolean(i)); break;
    case ColumnType::kVec: col.AppendVecBytes(cells.str(i)); break;
  }
}

ColumnPtr Finished(ColumnBuilder& col) { return Share(std::move(col).Finish()); }

constexpr uint32_t kNotAsked = UINT32_MAX;
// A member without a score (a list's, or a zset's read without WITHSCORES).
constexpr double kNoScore = std::numeric_limits<double>::quiet_NaN();

// Where FeatureRows reads distinct id k's field f: decoded replies, with any cache hits
// copied in (ReplyCells), or the cache's entries themselves when every id hit and no
// batch went out meanwhile (CachedEntries: no copy through cells).
struct ReplyCells {
  const CachedFields& cells;
  size_t nf;
  // Distinct id k's field f: its state, and its value into `into` when it has one
  // (`into` is left alone otherwise). CachedEntries' Read is the same.
  template <class T>
  State Read(size_t k, size_t f, T& into) const {
    const size_t i = k * nf + f;
    const State state = cells.state(i);
    if (state != State::kValue) return state;
    if constexpr (std::is_same_v<T, int64_t>) into = cells.i64(i);
    if constexpr (std::is_same_v<T, double>) into = cells.f64(i);
    if constexpr (std::is_same_v<T, uint8_t>) into = static_cast<uint8_t>(cells.boolean(i) ? 1 : 0);
    return state;
  }
  void Append(ColumnBuilder& col, size_t k, size_t f, FamilyValueStats& stats) const {
    AppendCell(col, cells, k * nf + f, stats);
  }
};

struct CachedEntries {
  std::span<const HashRef> found;       // by distinct id
  std::span<const size_t> field_index;  // the node's field f is the entry's field_index[f]
  template <class T>
  State Read(size_t k, size_t f, T& into) const {
    const HashRef::Fixed v = found[k].fixed(field_index[f]);
    if (v.state != State::kValue) return v.state;
    if constexpr (std::is_same_v<T, int64_t>) into = static_cast<int64_t>(v.bits);
    if constexpr (std::is_same_v<T, double>) into = std::bit_cast<double>(v.bits);
    if constexpr (std::is_same_v<T, uint8_t>) into = static_cast<uint8_t>(v.bits != 0 ? 1 : 0);
    return v.state;
  }
  // A string or vector field (a vector is kept as its bytes, as a string is).
  void Append(ColumnBuilder& col, size_t k, size_t f, FamilyValueStats& stats) const {
    const HashRef h = found[k];
    if (AppendNoValue(col, h.state(field_index[f]), stats)) return;
    if (col.type() == ColumnType::kVec)
      col.AppendVecBytes(h.str(field_index[f]));
    else
      col.AppendStr(h.str(field_index[f]));
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
               std::span<const uint32_t> reply_of_row, FamilyValueStats& stats) {
  const size_t rows = reply_of_row.size();
  for (FixedColumn& c : out) {
    switch (c.col.type) {
      case ColumnType::kI64: c.col.i64.resize(rows); break;
      case ColumnType::kF64: c.col.f64.resize(rows); break;
      case ColumnType::kBool: c.col.b.resize(rows); break;
      case ColumnType::kStr:
      case ColumnType::kVec: break;  // built by ColumnBuilder
    }
  }
  uint64_t missing = 0, unparsable = 0;
  for (size_t r = 0; r < rows; ++r) {
    const uint32_t k = reply_of_row[r];
    for (FixedColumn& c : out) {
      if (k != kNotAsked) {
        State state = State::kMissing;
        switch (c.col.type) {
          case ColumnType::kI64: state = source.Read(k, c.f, c.col.i64[r]); break;
          case ColumnType::kF64: state = source.Read(k, c.f, c.col.f64[r]); break;
          case ColumnType::kBool: state = source.Read(k, c.f, c.col.b[r]); break;
          case ColumnType::kStr:
          case ColumnType::kVec: break;
        }
        if (state == State::kValue) continue;
        missing += state == State::kMissing;
        unparsable += state == State::kUnparsable;
      }
      c.col.validity.SetNull(r, rows);
    }
  }
  if (missing) Bump(stats.missing_field, missing);
  if (unparsable) Bump(stats.unparsable_field, unparsable);
}

// features: the input plus one typed column per field, read from `source`.
template <class Source>
RowSet FeatureRowsFrom(const ReplySource& src, const RowSet& input, const InputIds& ids,
                       std::span<const uint32_t> reply_of, const std::vector<std::string>& fields,
                       std::span<const size_t> field_index, const Source& source) {
  // Columns span the input's physical rows (so its selection vector still applies);
  // rows outside the selection, or with a null id, stay null. Missing and unparsable
  // values are counted per row, as they reach the response.
  const size_t rows = input.physical_rows();
  std::vector<uint32_t> reply_of_row(rows, kNotAsked);
  for (size_t i = 0; i < ids.size(); ++i) reply_of_row[ids.rows[i]] = reply_of[i];
  FamilyValueStats& stats = src.values();
  std::vector<ColumnPtr> cols(fields.size());
  std::vector<FixedColumn> fixed;
  for (size_t f = 0; f < fields.size(); ++f) {
    const SchemaField& field = src.family->fields[field_index[f]];
    const ColumnType type = ColumnTypeOf(field.type);
    if (type != ColumnType::kStr && type != ColumnType::kVec) {
      fixed.push_back({f, Column{}});
      fixed.back().col.type = type;
      continue;
    }
    ColumnBuilder col(type, rows, field.dim);
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

// Whether `bytes` is a vec field's value of dimension `dim`: exactly 4·dim bytes, each
// float32 finite (an exponent of all ones is inf or NaN).
bool VectorBytesOk(std::string_view bytes, uint32_t dim) {
  if (bytes.size() != 4 * size_t{dim}) return false;
  uint32_t all_ones = 0;
  for (size_t k = 0; k < dim; ++k) {
    uint32_t w;
    std::memcpy(&w, bytes.data() + 4 * k, 4);
    all_ones |= static_cast<uint32_t>((w & 0x7f800000u) == 0x7f800000u);
  }
  return all_ones == 0;
}

// A json vec field's value, an array of exactly `dim` numbers each finite as float32,
// into cells' field i as its float32 bytes (a hash field's form); false when it is none.
bool JsonVector(simdjson::dom::element v, uint32_t dim, CachedFields& cells, size_t i) {
  simdjson::dom::array a;
  if (v.get_array().get(a) || a.size() != dim) return false;
  std::string bytes(4 * size_t{dim}, '\0');
  size_t k = 0;
  for (simdjson::dom::element e : a) {
    double d;
    if (e.get_double().get(d)) return false;  // not a number (simdjson converts integers)
    const auto f = static_cast<float>(d);
    if (!std::isfinite(f)) return false;  // beyond float32's range
    std::memcpy(bytes.data() + 4 * k++, &f, 4);
  }
  cells.SetStr(i, bytes);
  return true;
}

// A list member's text as an id of `type`: nullopt when it is none.
bool ValidMember(std::string_view s, ColumnType type, int64_t& num) {
  if (type == ColumnType::kStr) return ValidStrId(s);
  std::optional<int64_t> v = ParseStrictInt<int64_t>(s);
  if (!v) return false;
  num = *v;
  return true;
}

// A zset score as Redis 7 sends it in RESP2: decimal text, "inf" or "-inf".
double ParseScore(std::string_view s) {
  if (auto v = ParseStrictF64(s)) return *v;
  if (s == "inf" || s == "+inf") return HUGE_VAL;
  if (s == "-inf") return -HUGE_VAL;
  return kNoScore;
}

}  // namespace

Result<InputIds> IdsOf(const RowSet& in, const KeyFamily& family) {
  const Column* id = in.column("id");
  if (id == nullptr || (id->type != ColumnType::kI64 && id->type != ColumnType::kStr))
    return Fail(Error::Internal("input has no i64 or str 'id' column"));
  InputIds out;
  out.type = id->type;
  out.rows.reserve(in.size());
  if (id->type == ColumnType::kI64) {
    out.ids.reserve(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      uint32_t r = in.row(i);
      if (!id->valid(r)) continue;
      out.ids.push_back(id->i64[r]);
      out.rows.push_back(r);
    }
    return out;
  }
  out.strs.reserve(in.size());
  uint64_t bad = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    uint32_t r = in.row(i);
    if (!id->valid(r)) continue;
    const std::string_view s = id->str(r);
    if (!ValidStrId(s)) {
      ++bad;
      continue;
    }
    out.strs.push_back(s);
    out.rows.push_back(r);
  }
  if (bad) Bump(family.values->bad_id, bad);
  return out;
}

void DecodeField(RespView r, const SchemaField& field, CachedFields& cells, size_t i,
                 FamilyValueStats& stats) {
  if (!r.is_string()) return cells.SetNoValue(i, State::kMissing);
  const std::string_view s = r.str();
  switch (field.type) {
    case FieldType::kI64:
      if (auto v = ParseStrictInt<int64_t>(s)) return cells.SetI64(i, *v);
      break;
    case FieldType::kF64:
      if (auto v = ParseStrictF64(s)) return cells.SetF64(i, *v);
      break;
    case FieldType::kStr: return cells.SetStr(i, s);
    case FieldType::kBool:
      if (s == "1" || s == "true") return cells.SetI64(i, 1);
      if (s == "0" || s == "false") return cells.SetI64(i, 0);
      break;
    case FieldType::kVec:
      if (VectorBytesOk(s, field.dim)) return cells.SetStr(i, s);
      Bump(stats.bad_vector);
      return cells.SetNoValue(i, State::kBad);
  }
  cells.SetNoValue(i, State::kUnparsable);
}

Result<bool> DecodeHashAll(const ReplySource& src, IdRef id, RespView r, CachedFields& cells,
                           size_t first) {
  if (!r.is_array() || r.size() % 2 != 0) return Fail(BadReply(src, "HGETALL", id, r));
  const auto& fields = src.family->fields;
  for (size_t f = 0; f < fields.size(); ++f) cells.SetNoValue(first + f, State::kMissing);
  // One pass over the pairs; a field named twice takes its last value. Unnamed: missing.
  for (auto it = r.begin(); it != r.end();) {
    const std::string_view name = it->str();
    ++it;
    for (size_t f = 0; f < fields.size(); ++f)
      if (name == fields[f].name) DecodeField(*it, fields[f], cells, first + f, src.values());
    ++it;
  }
  return r.size() > 0;
}

bool DecodeJsonFields(const ReplySource& src, std::string_view text, std::span<const size_t> fields,
                      CachedFields& cells, size_t first) {
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element root;
  simdjson::dom::object obj;
  if (text.size() > kMaxJsonValue || parser.parse(text.data(), text.size()).get(root) ||
      root.get(obj)) {
    Bump(src.values().bad_json);
    for (size_t f = 0; f < fields.size(); ++f) cells.SetNoValue(first + f, State::kBad);
    return false;
  }
  for (size_t f = 0; f < fields.size(); ++f) {
    const SchemaField& field = src.family->fields[fields[f]];
    const size_t i = first + f;
    simdjson::dom::element v;
    // at_key finds the first member of that name: on a duplicate the first wins.
    if (obj.at_key(field.name).get(v) || v.is_null()) {
      cells.SetNoValue(i, State::kMissing);
      continue;
    }
    bool ok = false;
    switch (field.type) {
      case FieldType::kI64:
        if (v.type() == simdjson::dom::element_type::INT64) {
          cells.SetI64(i, int64_t(v.get_int64()));
          ok = true;
        }
        break;
      case FieldType::kF64:
        if (v.is_number()) {
          const double d = double(v.get_double());
          if (std::isfinite(d)) {
            cells.SetF64(i, d);
            ok = true;
          }
        }
        break;
      case FieldType::kStr:
        if (v.is_string()) {
          cells.SetStr(i, std::string_view(v.get_string()));
          ok = true;
        }
        break;
      case FieldType::kBool:
        if (v.is_bool()) {
          cells.SetI64(i, bool(v.get_bool()) ? 1 : 0);
          ok = true;
        }
        break;
      case FieldType::kVec:
        if (JsonVector(v, field.dim, cells, i)) continue;
        Bump(src.values().bad_vector);
        cells.SetNoValue(i, State::kBad);
        continue;
    }
    if (!ok) cells.SetNoValue(i, State::kUnparsable);
  }
  return true;
}

Result<void> DecodeFields(const ReplySource& src, IdRef id, std::span<const size_t> fields,
                          RespView r, CachedFields& cells, size_t first) {
  if (src.family->type == FamilyType::kJson) {
    if (!r.is_array() || r.size() != 1) return Fail(BadReply(src, "MGET", id, r));
    const RespView v = *r.begin();
    if (!v.is_string()) {  // nil: no such key
      for (size_t f = 0; f < fields.size(); ++f) cells.SetNoValue(first + f, State::kMissing);
      return {};
    }
    DecodeJsonFields(src, v.str(), fields, cells, first);
    return {};
  }
  if (!r.is_array() || r.size() != fields.size()) return Fail(BadReply(src, "HMGET", id, r));
  size_t f = 0;
  for (RespView e : r) {
    DecodeField(e, src.family->fields[fields[f]], cells, first + f, src.values());
    ++f;
  }
  return {};
}

Result<void> DecodeCounters(const ReplySource& src, IdRef id, const CounterWindows& windows,
                            RespView r, std::span<RingBlock> blocks) {
  if (!r.is_array() || r.size() != windows.hash_fields().size())
    return Fail(BadReply(src, "HMGET", id, r));
  windows.BlocksOfReply(r, blocks);
  return {};
}

namespace {

// Walks an LRANGE / ZRANGE reply of `src`'s family: member(position, ok, text, num, score)
// for each member (ok: it is a valid id of the members type; text for str members, num
// for i64 ones; score NaN without scores); counts the bad ones. backend_error for a reply
// of the wrong shape.
template <class Member>
Result<void> ForEachMember(const ReplySource& src, IdRef id, bool scores, RespView r,
                           Member&& member) {
  const bool zset = src.family->type == FamilyType::kZset;
  const bool pairs = zset && scores;  // WITHSCORES: member, score, member, score, ...
  if (!r.is_array() || (pairs && r.size() % 2 != 0))
    return Fail(BadReply(src, zset ? "ZRANGE" : "LRANGE", id, r));
  const ColumnType type = src.family->members_type;
  uint64_t bad = 0;
  uint32_t position = 0;
  auto one = [&](RespView e, double score) {
    int64_t num = 0;
    const bool ok = e.is_string() && ValidMember(e.str(), type, num);
    bad += !ok;
    member(position++, ok, ok ? e.str() : std::string_view(), num, score);
  };
  if (!pairs) {
    for (RespView e : r) one(e, kNoScore);
  } else {
    for (auto it = r.begin(); it != r.end(); ++it) {
      const RespView e = *it;
      ++it;
      one(e, it->is_string() ? ParseScore(it->str()) : kNoScore);
    }
  }
  if (bad) Bump(src.values().bad_id, bad);
  return {};
}

void AppendScore(double s, ListRows& out) {
  const bool ok = std::isfinite(s);
  out.scores.push_back(ok ? s : 0.0);
  out.score_valid.push_back(ok ? 1 : 0);
}

}  // namespace

Result<CachedList> DecodeList(const ReplySource& src, IdRef id, uint32_t asked, bool scores,
                              RespView r) {
  CachedList out;
  out.asked = asked;
  out.str_members = src.family->members_type == ColumnType::kStr;
  const bool pairs = src.family->type == FamilyType::kZset && scores;
  if (r.is_array()) {
    out.members.reserve(pairs ? r.size() / 2 : r.size());
    if (pairs) out.scores.reserve(r.size() / 2);
  }
  auto ok = ForEachMember(
      src, id, scores, r,
      [&](uint32_t position, bool valid, std::string_view text, int64_t num, double score) {
        if (!valid) out.bad.push_back(position);
        if (out.str_members)
          out.AddStr(text);
        else
          out.members.push_back(num);
        if (pairs) out.scores.push_back(score);
      });
  if (!ok) return Fail(ok.error());
  return out;
}

Result<void> AppendList(const ReplySource& src, IdRef id, uint32_t count, uint32_t from,
                        bool scores, RespView r, ListRows& out) {
  const bool str = src.family->members_type == ColumnType::kStr;
  auto ok = ForEachMember(
      src, id, scores, r,
      [&](uint32_t position, bool valid, std::string_view text, int64_t num, double score) {
        if (!valid || position >= count) return;
        if (str)
          out.AddStr(text);
        else
          out.ids.push_back(num);
        if (scores) AppendScore(score, out);
      });
  out.FromUpTo(from);
  return ok;
}

RowSet ViewerRows(const ReplySource& src, IdRef id, std::span<const size_t> fields, bool exists,
                  const CachedFields& cells) {
  const size_t rows = exists ? 1 : 0;
  RowSet out;
  if (src.family->id_type == ColumnType::kStr) {
    ColumnBuilder col(ColumnType::kStr, rows);
    if (exists) col.AppendStr(id.str);
    out.SetColumn("id", Finished(col));
  } else {
    out.SetColumn("id",
                  Share(Column::I64(exists ? PoolVector<int64_t>{id.num} : PoolVector<int64_t>{})));
  }
  for (size_t f = 0; f < fields.size(); ++f) {
    const SchemaField& field = src.family->fields[fields[f]];
    ColumnBuilder col(ColumnTypeOf(field.type), rows, field.dim);
    if (exists) AppendCell(col, cells, fields[f], src.values());
    out.SetColumn(field.name, Finished(col));
  }
  return out;
}

namespace {

// AppendList for a CachedList or a ListRef.
template <class List>
void AppendListOf(const List& list, size_t size, bool str_members, std::span<const uint32_t> bad,
                  std::span<const double> list_scores, uint32_t count, uint32_t from, bool scores,
                  ListRows& out) {
  const size_t n = std::min<size_t>(count, size);
  auto next_bad = bad.begin();
  for (size_t i = 0; i < n; ++i) {
    if (next_bad != bad.end() && *next_bad == i) {
      ++next_bad;
      continue;
    }
    if (str_members)
      out.AddStr(list.str(i));
    else
      out.ids.push_back(list.members()[i]);
    if (scores) AppendScore(i < list_scores.size() ? list_scores[i] : kNoScore, out);
  }
  out.FromUpTo(from);
}

// CachedList's members as a span, the way ListRef gives them.
struct CachedListView {
  const CachedList& l;
  std::span<const int64_t> members() const { return {l.members.data(), l.members.size()}; }
  std::string_view str(size_t i) const { return l.str(i); }
};

}  // namespace

void ListRows::AppendRange(const ListRows& o, size_t b, size_t e, uint32_t src) {
  if (!o.strs.empty())
    for (size_t i = b; i < e; ++i) AddStr(o.str(i));
  else
    ids.insert(ids.end(), o.ids.begin() + static_cast<ptrdiff_t>(b),
               o.ids.begin() + static_cast<ptrdiff_t>(e));
  if (!o.scores.empty()) {
    scores.insert(scores.end(), o.scores.begin() + static_cast<ptrdiff_t>(b),
                  o.scores.begin() + static_cast<ptrdiff_t>(e));
    score_valid.insert(score_valid.end(), o.score_valid.begin() + static_cast<ptrdiff_t>(b),
                       o.score_valid.begin() + static_cast<ptrdiff_t>(e));
  }
  FromUpTo(src);
}

void AppendList(const CachedList& list, uint32_t count, uint32_t from, bool scores, ListRows& out) {
  AppendListOf(CachedListView{list}, list.members.size(), list.str_members, list.bad, list.scores,
               count, from, scores, out);
}

void AppendList(ListRef list, uint32_t count, uint32_t from, bool scores, ListRows& out) {
  AppendListOf(list, list.members().size(), list.str_members(), list.bad(),
               list.has_scores() ? list.scores() : std::span<const double>(), count, from, scores,
               out);
}

RowSet FeatureRows(const ReplySource& src, const RowSet& input, const InputIds& ids,
                   std::span<const uint32_t> reply_of, const std::vector<std::string>& fields,
                   std::span<const size_t> field_index, const CachedFields& cells) {
  return FeatureRowsFrom(src, input, ids, reply_of, fields, field_index,
                         ReplyCells{cells, fields.size()});
}

RowSet FeatureRows(const ReplySource& src, const RowSet& input, const InputIds& ids,
                   std::span<const uint32_t> reply_of, const std::vector<std::string>& fields,
                   std::span<const size_t> field_index, std::span<const HashRef> found) {
  return FeatureRowsFrom(src, input, ids, reply_of, fields, field_index,
                         CachedEntries{found, field_index});
}

Result<RowSet> SeenFilterRows(const ReplySource& src, IdRef user_id, const RowSet& input,
                              const InputIds& ids, RespView r, SeenReply how) {
  if (!r.is_array() || r.size() != ids.size())
    return Fail(BadReply(src, how.zset ? "ZMSCORE" : "SMISMEMBER", user_id, r));
  // Keep the logical order: rows with a null id were never asked about and stay.
  std::vector<uint8_t> seen(input.physical_rows(), 0);
  size_t i = 0;
  for (RespView e : r) {
    if (!how.zset)
      seen[ids.rows[i]] = e.is_integer() && e.integer() == 1;
    else if (e.is_string())  // nil: not a member
      seen[ids.rows[i]] = !how.after_ms || ParseScore(e.str()) > *how.after_ms;
    ++i;
  }
  Selection keep;
  keep.reserve(input.size());
  for (size_t i = 0; i < input.size(); ++i)
    if (!seen[input.row(i)]) keep.push_back(input.row(i));
  return input.WithSelection(std::move(keep));
}

}  // namespace rankd
