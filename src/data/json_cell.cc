#include "data/json_cell.h"

namespace rankd {

void AppendJsonUserId(const UserId& id, std::string& out) {
  if (id.is_str)
    AppendJsonString(id.str, out);
  else
    AppendJsonInt(id.num, out);
}

void AppendJsonCell(const Column& c, uint32_t row, std::string& out) {
  if (!c.valid(row)) {
    out += "null";
    return;
  }
  switch (c.type) {
    case ColumnType::kI64: AppendJsonInt(c.i64[row], out); break;
    case ColumnType::kF64: AppendJsonDouble(c.f64[row], out); break;
    case ColumnType::kBool: out += c.b[row] ? "true" : "false"; break;
    case ColumnType::kStr: AppendJsonString(c.str(row), out); break;
    case ColumnType::kVec: AppendJsonFloats(c.vec_row(row), out); break;
  }
}

}  // namespace rankd
