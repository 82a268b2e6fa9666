// The plan compiler's command line.
//   node dist/lib/cli.js build   writes <name>.plan.json for every <name>.plan.ts
//   node dist/lib/cli.js check   fails when a committed <name>.plan.json differs from its source
//   options: --json-dir DIR (where the .plan.json files are, and the model files their
//   `model` nodes read; default: the plans folder), names…
// (npm run build / npm run check run tsc first; the plans are loaded from dist/.)

import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { planText, type PlanDef } from "./plan.js";

process.setSourceMapsEnabled(true); // call sites in errors point into the .ts sources

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const DIST = path.join(ROOT, "dist");

/** The plan names in ROOT: every <name>.plan.ts, sorted. */
export function planNames(root = ROOT): string[] {
  return fs
    .readdirSync(root)
    .filter((f) => f.endsWith(".plan.ts"))
    .map((f) => f.slice(0, -".plan.ts".length))
    .sort();
}

/** Loads dist/<name>.plan.js and returns the JSON text its plan compiles to; `planDir` is
 *  the folder the JSON is served from, where the plan's model files must be. */
export async function compileFile(name: string, planDir = ROOT): Promise<string> {
  const mod = await import(pathToFileURL(path.join(DIST, `${name}.plan.js`)).href);
  const def = mod.default as PlanDef | undefined;
  if (!def || def.kind !== "rankd-plan") throw new Error(`the default export is not definePlan({...})`);
  if (def.name !== name) throw new Error(`plan name '${def.name}' differs from the file name '${name}.plan.ts'`);
  return planText(def, { planDir });
}

async function main(argv: string[]): Promise<number> {
  const cmd = argv[0];
  if (cmd !== "build" && cmd !== "check") {
    console.error("usage: cli.js build|check [--json-dir DIR] [name...]");
    return 2;
  }
  let jsonDir = ROOT;
  const args = argv.slice(1);
  const j = args.indexOf("--json-dir");
  if (j >= 0) {
    jsonDir = path.resolve(args[j + 1] ?? ".");
    args.splice(j, 2);
  }
  const all = args.length === 0;
  const names = all ? planNames() : args.map((a) => path.basename(a).replace(/\.plan\.(ts|json)$/, ""));
  let bad = 0;
  for (const name of names) {
    const src = `${name}.plan.ts`;
    const out = path.join(jsonDir, `${name}.plan.json`);
    let text: string;
    try {
      text = await compileFile(name, jsonDir);
    } catch (e) {
      console.error(`${src}: error: ${(e as Error).message}`);
      bad++;
      continue;
    }
    const old = fs.existsSync(out) ? fs.readFileSync(out, "utf8") : undefined;
    if (cmd === "build") {
      if (old !== text) fs.writeFileSync(out, text);
      console.log(`${old === text ? "unchanged" : "wrote"} ${name}.plan.json`);
    } else if (old === undefined) {
      console.error(`${name}.plan.json: missing; run npm --prefix plans run build and commit it`);
      bad++;
    } else if (old !== text) {
      console.error(`${name}.plan.json: differs from what ${src} compiles to; run npm --prefix plans run build and commit it`);
      bad++;
    }
  }
  if (cmd === "check" && all) {
    const sources = new Set(names);
    for (const f of fs.readdirSync(jsonDir).filter((f) => f.endsWith(".plan.json")).sort()) {
      if (!sources.has(f.slice(0, -".plan.json".length))) {
        console.error(`${f}: has no ${f.replace(/json$/, "ts")} source`);
        bad++;
      }
    }
  }
  if (cmd === "check" && bad === 0) console.log(`ok: ${names.length} plans match their sources`);
  return bad ? 1 : 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2));
}
