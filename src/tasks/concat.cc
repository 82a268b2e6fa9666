// concat: the rows of each input in input order; the columns are the union (in order of
// first appearance), cells an input lacks are null. New columns are built: this is the
// one CPU task that copies cells.
#include <expected>
#include <span>

#include "data/column_builder.h"
#include "tasks/schemas.h"
#include "tasks/task.h"

namespace rankd {

namespace {

// A column that two inputs give different types (or vectors of different dimensions).
struct TypeClash {
  std::string name;
  size_t first_input, input;  // the input that introduced it, and the one that differs
  TypedColumn first, other;
};

// The union of the inputs' columns, in order of first appearance, or the first clash.
std::expected<ColumnTypes, TypeClash> UnionOfColumns(std::span<const ColumnTypes> inputs) {
  ColumnTypes out;
  std::vector<size_t> first_input;  // per output column, which input introduced it
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (const TypedColumn& c : inputs[i].cols) {
      size_t k = 0;
      while (k < out.cols.size() && out.cols[k].name != c.name) ++k;
      if (k == out.cols.size()) {
        out.cols.push_back(c);
        first_input.push_back(i);
      } else if (out.cols[k] != c) {
        return std::unexpected(TypeClash{c.name, first_input[k], i, out.cols[k], c});
      }
    }
  }
  return out;
}

std::string TypeName(const TypedColumn& c) { return TypeText(c.type, c.dim); }

}  // namespace

Result<ColumnTypes> ConcatSchema(const SchemaArgs& a) {
  auto cols = UnionOfColumns(a.inputs);
  if (!cols) {
    const TypeClash& c = cols.error();
    return Fail(Error::BadRequest("inputs: column '" + c.name + "' is " + TypeName(c.first) +
                                  " in input '" + std::string(a.input_ids[c.first_input]) +
                                  "' but " + TypeName(c.other) + " in input '" +
                                  std::string(a.input_ids[c.input]) + "'"));
  }
  return *cols;
}

Result<RowSet> RunConcat(const TaskContext&, RowSets in) {
  // Union of the columns, checked again at run time: inputs are typed at load, but a
  // column may still surprise us (an IO task's optional field).
  std::vector<ColumnTypes> types(in.size());
  size_t rows = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    rows += in[i].size();
    for (size_t c = 0; c < in[i].num_columns(); ++c)
      types[i].cols.push_back(
          {in[i].column_name(c), in[i].column_at(c)->type, in[i].column_at(c)->dim});
  }
  auto cols = UnionOfColumns(types);
  if (!cols) {
    const TypeClash& c = cols.error();
    return Fail(Error::Internal("concat: column '" + c.name + "' has types " + TypeName(c.first) +
                                " and " + TypeName(c.other)));
  }
  RowSet out;
  std::vector<Selection> logical;
  logical.reserve(in.size());
  for (const RowSet& rs : in) logical.push_back(rs.LogicalRows());
  for (const auto& [name, type, dim] : cols->cols) {
    ColumnBuilder b(type, rows, dim);
    for (size_t i = 0; i < in.size(); ++i) {
      const Column* c = in[i].column(name);
      if (c)
        b.Append(*c, logical[i]);
      else
        b.AppendNulls(in[i].size());
    }
    out.SetColumn(name, Share(std::move(b).Finish()));
  }
  if (cols->cols.empty()) return RowSet::Empty();
  return out;
}

}  // namespace rankd
