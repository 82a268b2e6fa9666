// The plan compiler's command line.
//   node dist/lib/cli.js build   writes <name>.plan.json for every <name>.plan.ts, and
//                                experiments.json when the folder has an experiments.ts
//   node dist/lib/cli.js check   fails when a committed <name>.plan.json or experiments.json
//                                differs from its source (or has none)
//   names: plans to build or check (`feed`, `feed.plan.ts`); `experiments.ts` names the
//   experiments. Without names: every plan, and the experiments.
//   options:
//     --json-dir DIR   where the .plan.json files (and experiments.json) are, and the model files their `model` nodes
//                      read (default: the plans folder); names…
//     --dir DIR        compile the plans folder DIR instead of plans/ (its <name>.plan.ts, its
//                      experiments.ts, its schema.json, its JSON next to the sources); may be
//                      repeated. The folder's schema.gen.ts and plans.gen.ts are generated and
//                      tsc compiles them (to dist/ext/).
//     --examples       every plans folder under ../examples/ (a folder holding *.plan.ts)
// (npm run build / npm run check run gen-schema and tsc first; the plans are loaded from dist/.)

import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { planText, type PlanDef } from "./plan.js";
import type { ExperimentsDef } from "./experiments.js";
import { DEMO_SCHEMA } from "./schema.js";

process.setSourceMapsEnabled(true); // call sites in errors point into the .ts sources

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const DIST = path.join(ROOT, "dist");
const EXT = path.join(DIST, "ext");
const EXAMPLES = path.resolve(ROOT, "..", "examples");

/** The plan names in a folder: every <name>.plan.ts, sorted. */
export function planNames(root = ROOT): string[] {
  return fs
    .readdirSync(root)
    .filter((f) => f.endsWith(".plan.ts"))
    .map((f) => f.slice(0, -".plan.ts".length))
    .sort();
}

/** The plans folders under examples/: each folder (up to two levels down) holding a *.plan.ts. */
export function exampleDirs(root = EXAMPLES): string[] {
  const out: string[] = [];
  const walk = (d: string, depth: number) => {
    if (!fs.existsSync(d)) return;
    const ents = fs.readdirSync(d, { withFileTypes: true });
    if (ents.some((e) => e.isFile() && e.name.endsWith(".plan.ts"))) out.push(d);
    if (depth < 2) for (const e of ents) if (e.isDirectory() && e.name !== "node_modules" && !e.name.startsWith(".")) walk(path.join(d, e.name), depth + 1);
  };
  walk(root, 0);
  return out.sort();
}

/** The deepest folder that holds all of `paths`. */
function commonDir(paths: string[]): string {
  let c = paths[0];
  while (!paths.every((p) => p === c || p.startsWith(c.endsWith(path.sep) ? c : c + path.sep))) c = path.dirname(c);
  return c;
}

/**
 * Compiles other plans folders: writes each one's schema.gen.ts, then runs tsc over their
 * plans with this package's settings into dist/ext/. Returns, per folder, where its
 * compiled plans are.
 */
export async function compileDirs(dirs: string[]): Promise<Map<string, string>> {
  const gen = await import(pathToFileURL(path.join(ROOT, "lib", "gen-schema.mjs")).href);
  for (const d of dirs) gen.writeGenerated(d);
  const rootDir = commonDir([ROOT, ...dirs]);
  fs.mkdirSync(EXT, { recursive: true });
  const tsconfig = path.join(EXT, "tsconfig.json");
  const config = {
    extends: path.join(ROOT, "tsconfig.json"),
    // ES modules whatever the folder's package.json says: the output runs under plans/ ("type": "module").
    compilerOptions: { rootDir, outDir: EXT, noEmit: false, module: "esnext", moduleResolution: "bundler" },
    include: dirs.flatMap((d) => [path.join(d, "schema.gen.ts"), path.join(d, "plans.gen.ts"), path.join(d, "*.plan.ts"), path.join(d, "experiments.ts")]),
    exclude: [],
  };
  fs.writeFileSync(tsconfig, JSON.stringify(config, null, 2) + "\n");
  const tsc = spawnSync(process.execPath, [path.join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", tsconfig], { encoding: "utf8" });
  if (tsc.status !== 0) throw new Error(`tsc failed:\n${tsc.stdout}${tsc.stderr}`);
  return new Map(dirs.map((d) => [d, path.join(EXT, path.relative(rootDir, d))]));
}

/** The schema a folder's plans must be typed with: its schema.json, or the demo schema. */
function folderSchema(dir: string): unknown {
  const f = path.join(dir, "schema.json");
  return fs.existsSync(f) ? JSON.parse(fs.readFileSync(f, "utf8")) : DEMO_SCHEMA;
}

/** Loads <distDir>/<name>.plan.js and returns the JSON text its plan compiles to; `planDir` is
 *  the folder the JSON is served from, where the plan's model files must be. */
export async function compileFile(name: string, planDir = ROOT, distDir = DIST, srcDir = ROOT): Promise<string> {
  const mod = await import(pathToFileURL(path.join(distDir, `${name}.plan.js`)).href);
  const def = mod.default as PlanDef | undefined;
  if (!def || def.kind !== "rankd-plan") throw new Error(`the default export is not definePlan({...})`);
  if (def.name !== name) throw new Error(`plan name '${def.name}' differs from the file name '${name}.plan.ts'`);
  if (JSON.stringify(def.schema) !== JSON.stringify(folderSchema(srcDir)))
    throw new Error(`the plan is typed with another schema than ${fs.existsSync(path.join(srcDir, "schema.json")) ? "this folder's schema.json" : "the demo schema (this folder has no schema.json)"}; import definePlan from "./schema.gen.js"`);
  return planText(def, { planDir });
}

/** Loads <distDir>/experiments.js and returns the experiments.json text it compiles to; `planDir`
 *  is the folder the plans are served from (where their model files must be). */
export async function compileExperimentsFile(distDir = DIST, srcDir = ROOT, planDir = srcDir): Promise<string> {
  const mod = await import(pathToFileURL(path.join(distDir, "experiments.js")).href);
  const def = mod.default as ExperimentsDef | undefined;
  if (!def || def.kind !== "rankd-experiments") throw new Error(`the default export is not defineExperiments([...])`);
  if (JSON.stringify(def.plans) !== JSON.stringify(planNames(srcDir)))
    throw new Error(`the experiments are typed with other plans than this folder's (${planNames(srcDir).join(", ")}); import defineExperiments from "./plans.gen.js"`);
  return def.text({ planDir });
}

/** An argument naming the experiments (experiments.ts or experiments.json), not a plan. */
const isExperimentsArg = (a: string) => /^experiments\.(ts|json)$/.test(path.basename(a));

/** build or check the plans `names` (all when empty) of one folder. Returns the number of failures. */
async function run(cmd: "build" | "check", srcDir: string, distDir: string, jsonDir: string, args: string[]): Promise<number> {
  const all = args.length === 0;
  const names = all ? planNames(srcDir) : args.filter((a) => !isExperimentsArg(a)).map((a) => path.basename(a).replace(/\.plan\.(ts|json)$/, ""));
  const withExperiments = all || args.some(isExperimentsArg);
  const shown = (f: string) => (srcDir === ROOT ? f : path.join(path.relative(process.cwd(), srcDir) || ".", f));
  const fix = srcDir === ROOT ? "npm --prefix plans run build" : `node plans/dist/lib/cli.js build --dir ${path.relative(path.dirname(ROOT), srcDir)}`;
  let bad = 0;
  for (const name of names) {
    const src = shown(`${name}.plan.ts`);
    const out = path.join(jsonDir, `${name}.plan.json`);
    let text: string;
    try {
      text = await compileFile(name, jsonDir, distDir, srcDir);
    } catch (e) {
      console.error(`${src}: error: ${(e as Error).message}`);
      bad++;
      continue;
    }
    const old = fs.existsSync(out) ? fs.readFileSync(out, "utf8") : undefined;
    if (cmd === "build") {
      if (old !== text) fs.writeFileSync(out, text);
      console.log(`${old === text ? "unchanged" : "wrote"} ${shown(`${name}.plan.json`)}`);
    } else if (old === undefined) {
      console.error(`${shown(`${name}.plan.json`)}: missing; run ${fix} and commit it`);
      bad++;
    } else if (old !== text) {
      console.error(`${shown(`${name}.plan.json`)}: differs from what ${name}.plan.ts compiles to; run ${fix} and commit it`);
      bad++;
    }
  }
  if (cmd === "check" && all) {
    const sources = new Set(names);
    for (const f of fs.readdirSync(jsonDir).filter((f) => f.endsWith(".plan.json")).sort()) {
      if (!sources.has(f.slice(0, -".plan.json".length))) {
        console.error(`${shown(f)}: has no ${f.replace(/json$/, "ts")} source`);
        bad++;
      }
    }
  }
  // experiments.ts → experiments.json; a folder without experiments.ts has no experiments.json.
  let experiments = false;
  if (withExperiments) {
    const out = path.join(jsonDir, "experiments.json");
    const old = fs.existsSync(out) ? fs.readFileSync(out, "utf8") : undefined;
    if (fs.existsSync(path.join(srcDir, "experiments.ts"))) {
      experiments = true;
      let text: string | undefined;
      try {
        text = await compileExperimentsFile(distDir, srcDir, jsonDir);
      } catch (e) {
        console.error(`${shown("experiments.ts")}: error: ${(e as Error).message}`);
        bad++;
      }
      if (text === undefined) {
        // reported above
      } else if (cmd === "build") {
        if (old !== text) fs.writeFileSync(out, text);
        console.log(`${old === text ? "unchanged" : "wrote"} ${shown("experiments.json")}`);
      } else if (old === undefined) {
        console.error(`${shown("experiments.json")}: missing; run ${fix} and commit it`);
        bad++;
      } else if (old !== text) {
        console.error(`${shown("experiments.json")}: differs from what experiments.ts compiles to; run ${fix} and commit it`);
        bad++;
      }
    } else if (!all) {
      console.error(`${shown("experiments.ts")}: missing`);
      bad++;
    } else if (cmd === "check" && old !== undefined) {
      console.error(`${shown("experiments.json")}: has no experiments.ts source`);
      bad++;
    }
  }
  if (cmd === "check" && bad === 0)
    console.log(`ok: ${names.length} plans${experiments ? " and experiments.json" : ""}${srcDir === ROOT ? "" : ` of ${shown("")}`} match their sources`);
  return bad;
}

async function main(argv: string[]): Promise<number> {
  const cmd = argv[0];
  if (cmd !== "build" && cmd !== "check") {
    console.error("usage: cli.js build|check [--json-dir DIR] [--dir DIR]... [--examples] [name... | experiments.ts]");
    return 2;
  }
  let jsonDir: string | undefined;
  const dirs: string[] = [];
  const args: string[] = [];
  let examples = false;
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--json-dir") jsonDir = path.resolve(argv[++i] ?? ".");
    else if (a === "--dir") dirs.push(path.resolve(argv[++i] ?? "."));
    else if (a === "--examples") {
      examples = true;
      dirs.push(...exampleDirs());
    }
    else args.push(a);
  }
  const others = [...new Set(dirs.filter((d) => d !== ROOT))];
  if ((dirs.length === 0 && !examples) || dirs.includes(ROOT)) {
    const bad = await run(cmd, ROOT, DIST, jsonDir ?? ROOT, args);
    if (others.length === 0) return bad ? 1 : 0;
  }
  if (others.length === 0) {
    console.log(`--examples: no plans folder under ${EXAMPLES}`);
    return 0;
  }
  if (jsonDir !== undefined && others.length > 1) {
    console.error("--json-dir applies to one folder only");
    return 2;
  }
  let outs: Map<string, string>;
  try {
    outs = await compileDirs(others);
  } catch (e) {
    console.error(`error: ${(e as Error).message}`);
    return 1;
  }
  let bad = 0;
  for (const d of others) bad += await run(cmd, d, outs.get(d)!, jsonDir ?? d, args);
  return bad ? 1 : 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2));
}
