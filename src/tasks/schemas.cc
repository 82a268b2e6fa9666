#include "tasks/schemas.h"

namespace rankd {

Result<ColumnTypes> SchemaSameAsInput(const SchemaArgs& a) {
  if (a.inputs.empty()) return SchemaIdOnly(a);
  return a.inputs[0];
}

Result<ColumnTypes> SchemaIdOnly(const SchemaArgs&) {
  ColumnTypes t;
  t.cols.emplace_back("id", ColumnType::kI64);
  return t;
}

void SetColumnType(ColumnTypes& t, std::string_view name, ColumnType type) {
  for (auto& [n, ty] : t.cols) {
    if (n == name) {
      ty = type;
      return;
    }
  }
  t.cols.emplace_back(std::string(name), type);
}

}  // namespace rankd
