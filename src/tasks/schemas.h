// Column types that tasks produce (docs/plan.md task table, docs/data.md field types)
// and the output-schema helpers the task specs share. Pure functions: any thread.
#pragma once

#include <optional>
#include <string_view>

#include "plan/op_schema.h"

namespace rankd {

// Type of an item:{id} hash field as a column (docs/data.md), or nullopt if not a field.
std::optional<ColumnType> ItemFieldType(std::string_view field);
// Type of a user:{uid} hash field as a column (docs/data.md), or nullopt.
std::optional<ColumnType> UserFieldType(std::string_view field);
// The item fields, in docs/data.md's table order (the allowed values of features.fields).
const std::vector<std::string>& ItemFields();
// The position of `field` in ItemFields(), if it is one.
std::optional<size_t> ItemFieldIndex(std::string_view field);
// The user fields, in docs/data.md's table order (viewer's columns after id).
const std::vector<std::string>& UserFields();

// Output = the first input's columns, or just `id` when the op has no input.
Result<ColumnTypes> SchemaSameAsInput(const SchemaArgs& a);
// Output = `id` (i64) only.
Result<ColumnTypes> SchemaIdOnly(const SchemaArgs& a);

// Adds or replaces column `name` of `t`.
void SetColumnType(ColumnTypes& t, std::string_view name, ColumnType type);

}  // namespace rankd
