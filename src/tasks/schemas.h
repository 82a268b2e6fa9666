// The helpers the task specs share: output schemas, and the IO ops' common parameters
// and checks (the columns Redis-reading tasks make come from the schema: plan/schema.h).
// Pure functions: any thread.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plan/op_schema.h"

namespace rankd {

// Output = the first input's columns, or just `id` when the op has no input.
Result<ColumnTypes> SchemaSameAsInput(const SchemaArgs& a);
// Output = `id` (i64) only.
Result<ColumnTypes> SchemaIdOnly(const SchemaArgs& a);

// The output the op's catalogue entry states (OpSchema::keeps_input: the input's columns,
// or `id` alone when it has none, as SchemaSameAsInput; then `adds`), after checking
// that each parameter that reads a column (TaskParamSpec::Reads) names one of the first
// input's columns of an allowed type: for ops whose columns depend on their params only
// through names and the expression (not a family), so that the catalogue is the schema.
// REQUIRES: a.op set, no family-typed added column.
Result<ColumnTypes> SchemaAsDeclared(const SchemaArgs& a);

// Adds or replaces column `name` of `t` (dim: a vector's dimension).
void SetColumnType(ColumnTypes& t, std::string_view name, ColumnType type, uint32_t dim = 0);

// ---- the IO ops' parameters and checks -------------------------------------------------

// `endpoint`: the Redis endpoint the node reads (redis_default).
TaskParamSpec Endpoint();
// `family`: the schema family the node reads; `def` is the demo schema's name.
TaskParamSpec FamilyParam(std::string def);
// `cache`: read through the shard's cache (docs/cache.md).
TaskParamSpec Cache();
// An i64 count `name` (def, lo..hi), {"param"} allowed.
TaskParamSpec Count(std::string name, int64_t def, int64_t lo, int64_t hi);
// A column name to write, "" meaning none (score_as).
TaskParamSpec ColumnName(std::string name, std::string def);

// "family 'NAME' (TYPE)", for messages.
std::string Types(const KeyFamily& f);
// The node's family must be one of `types` (`what`: the op's need, for the message).
Result<void> NeedType(const SchemaArgs& a, std::initializer_list<FamilyType> types,
                      std::string_view what);
// The family must be one whose keys hold named values (hash, json, counters): what
// `op` reads its fields from.
Result<void> NeedValuesFamily(const SchemaArgs& a, std::string_view op);
// The input's id column must have the type that fills the family's {id} (`of`: which
// type of the family, for the message).
Result<void> NeedInputIds(const SchemaArgs& a, ColumnType want, std::string_view of);
// A column name a param gives: 1..64 bytes, no quote or backslash.
Result<void> ValidColumnName(std::string_view param, const std::string& name);
// Adds the fields of a hash or json family that `fields` names (all of them when empty)
// to `t`, typed as declared.
Result<void> AddFields(const SchemaArgs& a, const std::vector<std::string>& fields, ColumnTypes& t);

}  // namespace rankd
