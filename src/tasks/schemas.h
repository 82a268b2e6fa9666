// The output-schema helpers the task specs share (the columns Redis-reading tasks make
// come from the schema: plan/schema.h). Pure functions: any thread.
#pragma once

#include <optional>
#include <string_view>

#include "plan/op_schema.h"

namespace rankd {

// Output = the first input's columns, or just `id` when the op has no input.
Result<ColumnTypes> SchemaSameAsInput(const SchemaArgs& a);
// Output = `id` (i64) only.
Result<ColumnTypes> SchemaIdOnly(const SchemaArgs& a);

// Adds or replaces column `name` of `t`.
void SetColumnType(ColumnTypes& t, std::string_view name, ColumnType type);

}  // namespace rankd
