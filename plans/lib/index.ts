// rankd plan DSL: import { definePlan, E, Pred } from "./lib/index.js" in a <name>.plan.ts.
export { definePlan, planText, Ctx, Node, Output, EP, Key, ITEM_FIELDS, VIEWER_COLUMNS } from "./plan.js";
export type { PlanDef, PlanSpec, CompileOptions, ParamDecl, ParamDecls, ParamRefs, NodeOpts, CacheOpt, Cols, ColRefs, Endpoint, ItemField, ExprArg, PredArg, IntArg, BoolArg } from "./plan.js";
export { E, Expr, Pred, ParamRef, PlanError } from "./expr.js";
export type { ColType, VT, CmpOp } from "./expr.js";
export { parseExpr, parsePred } from "./parse.js";
