// concat: the rows of each input in input order; the columns are the union (in order of
// first appearance), cells an input lacks are null. New columns are built: this is the
// one CPU task that copies cells.
#include "data/column_builder.h"
#include "tasks/schemas.h"
#include "tasks/task.h"

namespace rankd {

Result<ColumnTypes> ConcatSchema(const SchemaArgs& a) {
  ColumnTypes out;
  std::vector<size_t> first_input;  // per output column, which input introduced it
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    for (const auto& [name, type] : a.inputs[i].cols) {
      size_t k = 0;
      while (k < out.cols.size() && out.cols[k].first != name) ++k;
      if (k == out.cols.size()) {
        out.cols.emplace_back(name, type);
        first_input.push_back(i);
      } else if (out.cols[k].second != type) {
        return Fail(Error::BadRequest(
            "inputs: column '" + name + "' is " + std::string(ColumnTypeName(out.cols[k].second)) +
            " in input '" + std::string(a.input_ids[first_input[k]]) + "' but " +
            std::string(ColumnTypeName(type)) + " in input '" + std::string(a.input_ids[i]) + "'"));
      }
    }
  }
  return out;
}

Result<RowSet> RunConcat(const TaskContext&, std::vector<RowSet> in) {
  // Union of the columns, checked again at run time: inputs are typed at load, but a
  // column may still surprise us (an IO task's optional field).
  std::vector<std::pair<std::string, ColumnType>> cols;
  size_t rows = 0;
  for (const RowSet& rs : in) {
    rows += rs.size();
    for (size_t c = 0; c < rs.num_columns(); ++c) {
      const std::string& name = rs.column_name(c);
      ColumnType type = rs.column_at(c)->type;
      size_t k = 0;
      while (k < cols.size() && cols[k].first != name) ++k;
      if (k == cols.size())
        cols.emplace_back(name, type);
      else if (cols[k].second != type)
        return Fail(Error::Internal("concat: column '" + name +
                                    "' has types " + std::string(ColumnTypeName(cols[k].second)) +
                                    " and " + std::string(ColumnTypeName(type))));
    }
  }
  RowSet out;
  std::vector<std::vector<uint32_t>> logical;
  logical.reserve(in.size());
  for (const RowSet& rs : in) logical.push_back(rs.LogicalRows());
  for (const auto& [name, type] : cols) {
    ColumnBuilder b(type, rows);
    for (size_t i = 0; i < in.size(); ++i) {
      const Column* c = in[i].column(name);
      if (c)
        b.Append(*c, logical[i]);
      else
        b.AppendNulls(in[i].size());
    }
    out.SetColumn(name, std::make_shared<Column>(std::move(b).Finish()));
  }
  if (cols.empty()) return RowSet::Empty();
  return out;
}

}  // namespace rankd
