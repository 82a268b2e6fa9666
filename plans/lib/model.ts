// The model files that `model` nodes name: NAME.model.json in the plan folder, as XGBoost's
// Booster.save_model writes them, or NAME.onnx as torch.onnx.export writes them
// (docs/models.md). For a tree model the compiler reads only the feature names, to check
// that every model feature reads a numeric column; for an ONNX model (protobuf, which it
// does not parse) that the file is there and that each input's columns are numeric or
// vectors. The server checks the rest (trees, operators, input widths, limits) when it
// loads the plans.

import fs from "node:fs";
import path from "node:path";
import { PlanError, type ColType } from "./expr.js";

export const modelFileName = (name: string): string => `${name}.model.json`;
export const onnxFileName = (name: string): string => `${name}.onnx`;

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

/** The columns an ONNX model's input may read: numeric ones and vectors. */
export function checkNetColumn(cols: ReadonlyMap<string, ColType>, col: string, what: string): void {
  const t = cols.get(col);
  if (t === undefined) fail(`${what} reads column '${col}', which is not known here (columns here: ${[...cols.keys()].join(", ")})`);
  if (t === "str") fail(`${what} reads column '${col}', which is str; model features need an i64, f64 or bool column (or vec, for an ONNX input)`);
}

/** A model of the plan folder: a tree model's features, or "onnx" for NAME.onnx. */
export function readModelKind(planDir: string, name: string): string[] | "onnx" {
  const trees = fs.existsSync(path.join(planDir, modelFileName(name)));
  const onnx = fs.existsSync(path.join(planDir, onnxFileName(name)));
  if (trees && onnx) fail(`the plan folder ${planDir} holds both ${modelFileName(name)} and ${onnxFileName(name)}; keep one`);
  return onnx ? "onnx" : readModelFeatures(planDir, name);
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
      fail(`model file ${file} is missing from the plan folder ${planDir}; export the model there, or an ONNX model as ${onnxFileName(name)} (docs/models.md)`);
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
  name: string, modelFeatures: readonly string[] | "onnx", features: ReadonlyMap<string, string | readonly string[]>,
  cols: ReadonlyMap<string, ColType>,
): void {
  if (modelFeatures === "onnx") {
    // Every column was checked where the node was made; the input names and widths are
    // the server's to check against the file.
    if (features.size === 0) fail(`model '${name}' is an ONNX model: features must map each of its inputs to columns`);
    return;
  }
  for (const [f, col] of features)
    if (typeof col !== "string" && col.length !== 1)
      fail(`features: '${f}' lists ${col.length} columns, but model '${name}' is a tree model: a feature reads one column`);
  for (const f of features.keys())
    if (!modelFeatures.includes(f)) fail(`features: '${f}' is not a feature of model '${name}' (its features: ${modelFeatures.join(", ")})`);
  for (const f of modelFeatures) {
    const col = features.get(f) ?? f;
    checkNumericColumn(cols, typeof col === "string" ? col : col[0], `model '${name}' feature '${f}'`);
  }
}
