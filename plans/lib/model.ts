// The model files that `model` nodes name: NAME.model.json in the plan folder, as XGBoost's
// Booster.save_model writes them (docs/models.md). The compiler reads only the feature
// names, to check that every model feature reads a numeric column; the server checks the
// rest of the file (trees, objective, limits) when it loads the plans.

import fs from "node:fs";
import path from "node:path";
import { PlanError, type ColType } from "./expr.js";

export const modelFileName = (name: string): string => `${name}.model.json`;

function fail(msg: string): never {
  throw new PlanError(msg);
}

/** The columns a model may read: the numeric ones (a str column is a load error). */
export function checkNumericColumn(cols: ReadonlyMap<string, ColType>, col: string, what: string): void {
  const t = cols.get(col);
  if (t === undefined) fail(`${what} reads column '${col}', which is not known here (columns here: ${[...cols.keys()].join(", ")})`);
  if (t !== "i64" && t !== "f64" && t !== "bool")
    fail(`${what} reads column '${col}', which is ${t}; model features need an i64, f64 or bool column`);
}

/** The model's features: its `feature_names`, or f0..fN-1 when it was saved without names. */
export function readModelFeatures(planDir: string, name: string): string[] {
  const file = modelFileName(name);
  const full = path.join(planDir, file);
  let text: string;
  try {
    text = fs.readFileSync(full, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT")
      fail(`model file ${file} is missing from the plan folder ${planDir}; export the model there (docs/models.md)`);
    fail(`cannot read model file ${full}: ${(e as Error).message}`);
  }
  let learner: { feature_names?: unknown; learner_model_param?: { num_feature?: unknown } } | undefined;
  try {
    learner = JSON.parse(text)?.learner;
  } catch (e) {
    fail(`model file ${file} is not JSON: ${(e as Error).message}`);
  }
  const names = learner?.feature_names;
  if (Array.isArray(names) && names.length > 0) {
    if (!names.every((n) => typeof n === "string")) fail(`model file ${file}: learner.feature_names holds a non-string`);
    return names as string[];
  }
  const n = Number(learner?.learner_model_param?.num_feature);
  if (!Number.isSafeInteger(n) || n < 1) fail(`model file ${file} has neither learner.feature_names nor a positive learner.learner_model_param.num_feature`);
  return Array.from({ length: n }, (_, i) => `f${i}`);
}

/** Checks a model node against its model: every key of `features` is a model feature and
 *  every model feature reads a numeric column of `cols` (its mapped column, or its own name). */
export function checkModelInputs(
  name: string, modelFeatures: readonly string[], features: ReadonlyMap<string, string>, cols: ReadonlyMap<string, ColType>,
): void {
  for (const f of features.keys())
    if (!modelFeatures.includes(f)) fail(`features: '${f}' is not a feature of model '${name}' (its features: ${modelFeatures.join(", ")})`);
  for (const f of modelFeatures) checkNumericColumn(cols, features.get(f) ?? f, `model '${name}' feature '${f}'`);
}
