#include "served/record.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string_view>

#include "core/json_escape.h"
#include "core/json_write.h"
#include "core/mix.h"
#include "data/json_cell.h"
#include "tasks/model_input.h"

namespace rankd {

namespace {

// The rows of a row set by id (i64 or str), the first row of each id: an open-addressing
// table of row numbers, one allocation however many rows (a record looks ids up for
// every unserved candidate, so node-per-entry maps cost more than the rest of it).
class IdTable {
 public:
  IdTable() = default;
  IdTable(const Column* id, const RowSet& rows) : id_(id) {
    if (!id || (id->type != ColumnType::kI64 && id->type != ColumnType::kStr)) return;
    size_t cap = 16;
    while (cap < rows.size() * 2) cap <<= 1;
    slots_.assign(cap, 0);
    for (size_t i = 0; i < rows.size(); ++i) {
      uint32_t r = rows.row(i);
      if (!id->valid(r)) continue;
      size_t at = Probe(id, r);
      if (slots_[at] == 0) slots_[at] = r + 1;  // an id seen before keeps its first row
    }
  }
  // The row holding row `row` of `other`'s id, or -1.
  int64_t Find(const Column* other, uint32_t row) const {
    if (slots_.empty() || !other || other->type != id_->type || !other->valid(row)) return -1;
    uint32_t found = slots_[Probe(other, row)];
    return found == 0 ? -1 : int64_t{found} - 1;
  }

 private:
  uint64_t Hash(const Column* c, uint32_t r) const {
    return c->type == ColumnType::kStr ? HashBytes(c->str(r), 0)
                                       : Mix64(static_cast<uint64_t>(c->i64[r]));
  }
  bool Same(const Column* c, uint32_t r, uint32_t mine) const {
    return c->type == ColumnType::kStr ? c->str(r) == id_->str(mine) : c->i64[r] == id_->i64[mine];
  }
  // The slot of row `r` of `c`'s id: the one holding it, or the empty one where it goes.
  size_t Probe(const Column* c, uint32_t r) const {
    size_t mask = slots_.size() - 1;
    for (size_t at = Hash(c, r) & mask;; at = (at + 1) & mask)
      if (slots_[at] == 0 || Same(c, r, slots_[at] - 1)) return at;
  }

  const Column* id_ = nullptr;
  std::vector<uint32_t> slots_;  // row + 1; 0: empty
};

// A kept node's output, and how to find an item's row in it.
struct Kept {
  const PlanNode* node = nullptr;
  const RowSet* rows = nullptr;
  const Column* id = nullptr;
  // A model node's score column: a row set holding this very column object holds the
  // model's rows at the same physical indices (filter, sort and take select; they do not
  // copy), so its rows map without a lookup.
  const Column* anchor = nullptr;
  const std::string* out_key = nullptr;  // the anchor's name
  std::vector<const Column*> features;   // a model node's, in the model's feature order
  // The text that does not change from item to item: `"<node>":{"model":...,"inputs":{`
  // and each feature's `"<name>":`.
  std::string head;
  std::vector<std::string> feature_keys;
  bool indexed = false;  // `by_id` is built (on the first lookup by id)
  IdTable by_id;
};

// A row set items are written from (the output, or the candidates node), its columns
// looked up once per record rather than per item.
struct RowsView {
  RowsView(const RowSet& rows, const std::vector<std::string>& logged,
           const std::vector<Kept>& models)
      : rows(rows), id(rows.column("id")), score(rows.column("score")) {
    for (const auto& c : logged) columns.push_back(rows.column(c));
    for (const Kept& k : models)
      same_rows.push_back(k.anchor != nullptr && rows.column(*k.out_key) == k.anchor);
  }
  const RowSet& rows;
  const Column* id;
  const Column* score;
  std::vector<const Column*> columns;  // the logged columns (null: absent)
  std::vector<bool> same_rows;         // per model: carries its score column, same rows
};

// The physical row of `k` holding the item at physical row `row` of `from` (model
// `m`), or -1: the same row when `from` carries k's score column, else the first row
// with the same id.
int64_t Locate(Kept& k, const RowsView& from, size_t m, uint32_t row) {
  if (from.same_rows[m]) return k.anchor->valid(row) ? int64_t{row} : -1;
  if (!k.indexed) {
    k.by_id = IdTable(k.id, *k.rows);
    k.indexed = true;
  }
  return k.by_id.Find(from.id, row);
}

void AppendValue(const Value& v, std::string& out) {
  switch (v.index()) {
    case 1: AppendJsonInt(std::get<int64_t>(v), out); break;
    case 2: AppendJsonDouble(std::get<double>(v), out); break;
    case 3: AppendJsonString(std::get<std::string>(v), out); break;
    case 4: out += std::get<bool>(v) ? "true" : "false"; break;
    case 5: {
      out += '[';
      const auto& list = std::get<std::vector<std::string>>(v);
      for (size_t i = 0; i < list.size(); ++i) {
        if (i) out += ',';
        AppendJsonString(list[i], out);
      }
      out += ']';
      break;
    }
    case 6: AppendJsonFloats(std::get<std::vector<float>>(v), out); break;
    default: out += "null";
  }
}

// Writes into a std::string through a raw cursor: Room(n) makes sure n more bytes fit
// (one check for a whole item), then the writes below copy without checks. The string's
// size runs ahead of what is written while the cursor is open; Close trims it. A record
// is thousands of short pieces: this is what keeps building it cheap.
class Cursor {
 public:
  explicit Cursor(std::string& out) : out_(out), used_(out.size()) {}
  ~Cursor() { Close(); }
  // Trims the string to what was written; the cursor is done with.
  void Close() {
    if (open_) out_.resize(used_);
    open_ = false;
  }
  Cursor(const Cursor&) = delete;
  Cursor& operator=(const Cursor&) = delete;

  void Room(size_t n) {
    if (out_.size() - used_ >= n) return;
    out_.resize(used_);
    if (out_.capacity() - used_ < n) out_.reserve(std::max(used_ + n, 2 * out_.capacity()));
    out_.resize_and_overwrite(out_.capacity(), [](char*, size_t n) { return n; });
  }
  size_t used() const { return used_; }
  void Put(std::string_view s) {
    std::memcpy(out_.data() + used_, s.data(), s.size());
    used_ += s.size();
  }
  void Put(char c) { out_[used_++] = c; }
  // Bytes [from, from + n) of what was written, again.
  void Again(size_t from, size_t n) {
    std::memmove(out_.data() + used_, out_.data() + from, n);
    used_ += n;
  }
  void Int(int64_t v) {
    char* p = out_.data() + used_;
    used_ += static_cast<size_t>(std::to_chars(p, p + 24, v).ptr - p);
  }
  void Real(double d) {  // AppendJsonReal's text; at most 32 bytes
    char* p = out_.data() + used_;
    used_ += static_cast<size_t>(WriteJsonReal(p, d) - p);
  }
  // A cell: null, a number, true/false (at most 32 bytes), or a string, which may be any
  // length: it goes through the one JSON string writer and reopens the cursor.
  void Cell(const Column* c, uint32_t row, size_t room_after) {
    if (!c || !c->valid(row)) return Put("null");
    switch (c->type) {
      case ColumnType::kI64: return Int(c->i64[row]);
      case ColumnType::kF64: {
        double d = c->f64[row];
        if (!std::isfinite(d)) return Put("null");
        char* p = out_.data() + used_;  // AppendJsonDouble's text: the shortest form
        used_ += static_cast<size_t>(std::to_chars(p, p + 32, d).ptr - p);
        return;
      }
      case ColumnType::kBool: return Put(c->b[row] ? std::string_view("true") : "false");
      case ColumnType::kStr: {
        out_.resize(used_);
        AppendJsonString(c->str(row), out_);
        used_ = out_.size();
        return Room(room_after);
      }
      case ColumnType::kVec: {  // an array of numbers, of any length: as a string
        out_.resize(used_);
        AppendJsonFloats(c->vec_row(row), out_);
        used_ = out_.size();
        return Room(room_after);
      }
    }
  }

 private:
  std::string& out_;
  size_t used_;
  bool open_ = true;
};

// The most an item writes outside its str cells (which make their own room).
size_t ItemRoom(const std::vector<std::string>& keys, const std::vector<Kept>& models) {
  size_t n = 160 + 40 * keys.size();
  for (const auto& k : keys) n += k.size();
  for (const Kept& k : models) {
    n += k.head.size() + 64 + 40 * k.feature_keys.size();
    for (const auto& f : k.feature_keys) n += f.size();
  }
  return n;
}

// One item: {"id","position","served","score","columns":{...},"models":{...}}, with per
// model node that scored it {"model","sha256","output","inputs":{...},"score"}. `keys`
// holds the logged columns' `"name":` prefixes.
void AppendItem(const RowsView& from, uint32_t row, size_t position, bool served,
                const std::vector<std::string>& keys, std::vector<Kept>& models, size_t room,
                Cursor& out) {
  out.Room(room);
  out.Put("{\"id\":");
  out.Cell(from.id, row, room);
  out.Put(",\"position\":");
  out.Int(static_cast<int64_t>(position));
  out.Put(served ? std::string_view(",\"served\":true,\"score\":")
                 : std::string_view(",\"served\":false,\"score\":"));
  // Its text is written once: the logged `score` column and the model's score are
  // mostly the same cell.
  size_t score_at = out.used();
  bool numeric_score = !from.score || from.score->type != ColumnType::kStr;
  out.Cell(from.score, row, room);
  size_t score_len = out.used() - score_at;
  out.Put(",\"columns\":{");
  for (size_t c = 0; c < keys.size(); ++c) {
    if (c) out.Put(',');
    out.Put(keys[c]);
    if (numeric_score && from.columns[c] && from.columns[c] == from.score)
      out.Again(score_at, score_len);
    else
      out.Cell(from.columns[c], row, room);
  }
  out.Put("},\"models\":{");
  bool first = true;
  for (size_t m = 0; m < models.size(); ++m) {
    Kept& k = models[m];
    int64_t at = Locate(k, from, m, row);
    if (at < 0) continue;
    auto r = static_cast<uint32_t>(at);
    if (!first) out.Put(',');
    first = false;
    out.Put(k.head);
    for (size_t f = 0; f < k.feature_keys.size(); ++f) {
      if (f) out.Put(',');
      out.Put(k.feature_keys[f]);
      out.Real(static_cast<double>(
          ModelInput(k.features[f], r, k.node->model.elements[f], k.node->model.fills[f])));
    }
    out.Put("},\"score\":");
    double score = k.anchor && k.anchor->valid(r) ? k.anchor->f64[r] : NAN;
    // The same value as the item's score, written alike (the shortest form), below 1e15.
    if (numeric_score && from.score == k.anchor && static_cast<uint32_t>(at) == row &&
        std::isfinite(score) && std::fabs(score) < 1e15 && score != std::trunc(score))
      out.Again(score_at, score_len);
    else
      out.Real(score);
    out.Put('}');
  }
  out.Put("}}");
}

// The kept rows a record reads (PlanLog::kept): the viewer's, the candidates', and each
// model node's with the text of its model head.
struct KeptRows {
  std::vector<Kept> models;
  const RowSet* viewer = nullptr;
  const RowSet* candidates = nullptr;
};

// A model node's kept rows, their columns and the text of its head.
void BindModelNode(const PlanNode& node, const RowSet& rows, Kept& k) {
  k.node = &node;
  k.rows = &rows;
  k.id = rows.column("id");
  k.out_key = &node.args.Str("out_key");
  k.anchor = rows.column(*k.out_key);
  if (k.anchor && k.anchor->type != ColumnType::kF64) k.anchor = nullptr;
  for (size_t f = 0; f < node.model.columns.size(); ++f) {
    const Column* col = rows.column(node.model.columns[f]);
    const bool usable = col && col->type != ColumnType::kStr &&
                        (col->type != ColumnType::kVec || node.model.elements[f] < col->dim);
    k.features.push_back(usable ? col : nullptr);
  }
  const NodeModel& bound = node.model;
  AppendJsonString(node.id, k.head);
  k.head += ":{\"model\":";
  AppendJsonString(bound.model->name(), k.head);
  k.head += ",\"sha256\":\"" + bound.model->sha256() + "\",\"output\":\"";
  k.head += bound.output == ModelOutput::kMargin ? "margin" : "default";
  if (bound.model->is_network()) {
    k.head += "\",\"dispatch\":\"";
    k.head += bound.model->dispatch();
  }
  k.head += "\",\"inputs\":{";
  for (const std::string& name : bound.model->features()) {
    std::string& key = k.feature_keys.emplace_back();
    AppendJsonString(name, key);
    key += ':';
  }
}

KeptRows FindKeptRows(const RunResult& r) {
  const Plan& plan = *r.plan;
  const PlanLog& log = plan.log;
  KeptRows kept;
  for (size_t i = 0; i < log.kept.size() && i < r.kept.size(); ++i) {
    uint32_t idx = log.kept[i];
    const PlanNode& node = plan.nodes[idx];
    if (static_cast<int32_t>(idx) == log.viewer) kept.viewer = &r.kept[i];
    if (static_cast<int32_t>(idx) == log.candidates) kept.candidates = &r.kept[i];
    if (node.model.model) BindModelNode(node, r.kept[i], kept.models.emplace_back());
  }
  return kept;
}

// `"served_id":...` up to `"shadow":...,` (the record's fields before the viewer).
void AppendRecordHead(const RunResult& r, const RecordHeader& h, std::string& out) {
  const Plan& plan = *r.plan;
  out += "{\"served_id\":\"";
  out += h.served_id;
  out += "\",\"ts_ms\":";
  AppendJsonInt(h.ts_ms, out);
  out += ",\"plan\":";
  AppendJsonString(plan.name, out);
  out += ",\"plan_sha256\":\"";
  out += plan.sha256;
  out += "\",\"user_id\":";
  AppendJsonUserId(r.user_id, out);
  out += ",\"params\":{";
  for (size_t i = 0; i < plan.params.decls.size(); ++i) {
    if (i) out += ',';
    AppendJsonString(plan.params.decls[i].name, out);
    out += ':';
    AppendValue(i < r.params.size() ? r.params[i] : Value{}, out);
  }
  out += "},\"request_id\":";
  AppendJsonString(h.request_id, out);
  out += ",\"degraded\":[";
  for (size_t i = 0; i < r.degraded.size(); ++i) {
    if (i) out += ',';
    AppendJsonString(plan.nodes[r.degraded[i]].id, out);
  }
  out += "],\"experiment\":";
  if (h.experiment.empty()) {
    out += "null,\"variant\":null";
  } else {
    AppendJsonString(h.experiment, out);
    out += ",\"variant\":";
    AppendJsonString(h.variant, out);
  }
  out += h.forced ? ",\"forced\":true" : ",\"forced\":false";
  out += h.forced_log ? ",\"forced_log\":true" : ",\"forced_log\":false";
  if (r.quality >= 0) {  // the plan's quality factor for this request
    out += ",\"quality\":";
    AppendJsonReal(r.quality, out);
  }
  out += h.shadow ? ",\"shadow\":true," : ",\"shadow\":false,";
}

// `"viewer":{...}` (its first row) or `"viewer":null`.
void AppendViewerRow(const RowSet* viewer, std::string& out) {
  out += "\"viewer\":";
  if (!viewer || viewer->size() == 0) {
    out += "null";
    return;
  }
  uint32_t vr = viewer->row(0);
  out += '{';
  for (size_t c = 0; c < viewer->num_columns(); ++c) {
    if (c) out += ',';
    AppendJsonString(viewer->column_name(c), out);
    out += ':';
    AppendJsonCell(*viewer->column_at(c), vr, out);
  }
  out += '}';
}

// `"items":[...]`: the served rows, then up to candidates_top candidates not served.
void AppendRecordItems(const RunResult& r, const RecordHeader& h, KeptRows& kept,
                       std::string& out) {
  const PlanLog& log = r.plan->log;
  const RowSet& rows = r.output;
  out += ",\"items\":[";
  std::vector<std::string> keys;
  keys.reserve(log.columns.size());
  for (const auto& c : log.columns) {
    std::string& k = keys.emplace_back();
    AppendJsonString(c, k);
    k += ':';
  }
  RowsView served_view(rows, log.columns, kept.models);
  const size_t room = ItemRoom(keys, kept.models);
  Cursor cursor(out);
  for (size_t i = 0; i < rows.size(); ++i) {
    uint32_t row = rows.row(i);
    if (i) cursor.Room(1), cursor.Put(',');
    AppendItem(served_view, row, i, !h.shadow, keys, kept.models, room, cursor);
  }
  if (kept.candidates) {
    const RowSet& candidates = *kept.candidates;
    RowsView view(candidates, log.columns, kept.models);
    IdTable served(rows.column("id"), rows);  // which candidates were served
    size_t written = 0;
    for (size_t i = 0; i < candidates.size() && written < log.candidates_top; ++i) {
      uint32_t row = candidates.row(i);
      if (served.Find(view.id, row) >= 0) continue;
      if (rows.size() > 0 || written > 0) cursor.Room(1), cursor.Put(',');
      AppendItem(view, row, i, false, keys, kept.models, room, cursor);
      ++written;
    }
  }
  cursor.Close();
  out += "]";
}

}  // namespace

void AppendServedRecord(const RunResult& r, const RecordHeader& h, std::string& out) {
  KeptRows kept = FindKeptRows(r);
  out.reserve(out.size() + 512 + r.output.size() * (96 + 16 * r.plan->log.columns.size()));
  AppendRecordHead(r, h, out);
  AppendViewerRow(kept.viewer, out);
  AppendRecordItems(r, h, kept, out);
  out += "}";
}

}  // namespace rankd
