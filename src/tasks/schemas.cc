#include "tasks/schemas.h"

namespace rankd {

namespace {
struct Field {
  std::string_view name;
  ColumnType type;
};
constexpr Field kItemFields[] = {
    {"author", ColumnType::kI64},   {"likes", ColumnType::kI64},   {"age_s", ColumnType::kI64},
    {"category", ColumnType::kStr}, {"country", ColumnType::kStr}, {"quality", ColumnType::kF64},
    {"nsfw", ColumnType::kI64},
};
constexpr Field kUserFields[] = {
    {"country", ColumnType::kStr},
    {"lang", ColumnType::kStr},
    {"age", ColumnType::kI64},
    {"premium", ColumnType::kI64},
};

template <size_t N>
std::optional<ColumnType> Lookup(const Field (&fields)[N], std::string_view name) {
  for (const auto& f : fields)
    if (f.name == name) return f.type;
  return std::nullopt;
}
template <size_t N>
std::vector<std::string> Names(const Field (&fields)[N]) {
  std::vector<std::string> out;
  for (const auto& f : fields) out.emplace_back(f.name);
  return out;
}
}  // namespace

std::optional<ColumnType> ItemFieldType(std::string_view f) { return Lookup(kItemFields, f); }
std::optional<ColumnType> UserFieldType(std::string_view f) { return Lookup(kUserFields, f); }

const std::vector<std::string>& ItemFields() {
  static const std::vector<std::string> names = Names(kItemFields);
  return names;
}
std::optional<size_t> ItemFieldIndex(std::string_view field) {
  for (size_t i = 0; i < std::size(kItemFields); ++i)
    if (kItemFields[i].name == field) return i;
  return std::nullopt;
}
const std::vector<std::string>& UserFields() {
  static const std::vector<std::string> names = Names(kUserFields);
  return names;
}

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
