// rankd plan DSL. A plans folder's <name>.plan.ts imports { definePlan, E, Pred, … } from
// "./schema.gen.js", the module lib/gen-schema.mjs writes from the folder's schema.json (it
// re-exports this module with a definePlan bound to that schema). This module's own
// definePlan is bound to the demo schema.
export { definePlan, withSchema, planText, Ctx, Node, Output, EP, Key } from "./plan.js";
export type { PlanDef, PlanSpec, LogSpec, QualitySpec, ServedStateSpec, ScaledParam, CompileOptions, ParamDecl, ParamDecls, ParamRefs, NodeOpts, CacheOpt, Cols, ColRefs, Endpoint, ExprArg, PredArg, IntArg, BoolArg } from "./plan.js";
export { DEMO_SCHEMA, checkSchema } from "./schema.js";
export type { SchemaDecl, DemoSchema, FamilyDecl, FieldType, IdType, FamilyType, Schema, Family } from "./schema.js";
export { E, Expr, Pred, ParamRef, PlanError } from "./expr.js";
export type { ColType, VecType, VT, CmpOp } from "./expr.js";
export { parseExpr, parsePred } from "./parse.js";
// Experiments: a folder's experiments.ts imports { defineExperiments } from "./plans.gen.js",
// the module lib/gen-schema.mjs writes from the folder's <name>.plan.ts files.
export { withPlans, compileExperiments, BUCKETS } from "./experiments.js";
export type { ExperimentSpec, VariantSpec, ShadowSpec, VariantParams, ExperimentsDef, PlanSet, PlanNameOf } from "./experiments.js";
