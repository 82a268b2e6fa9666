// Runs the unit tests of test/*.test.ts: each bundled by esbuild into .test-build/
// (the sources are TypeScript; node runs JavaScript), then `node --test` on them.
import { build } from "esbuild";
import { spawnSync } from "node:child_process";
import { readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, ".test-build");
rmSync(out, { recursive: true, force: true });
const tests = readdirSync(join(here, "test")).filter((f) => f.endsWith(".test.ts"));
await build({ absWorkingDir: here, entryPoints: tests.map((f) => `test/${f}`), outdir: ".test-build", bundle: true,
  platform: "node", format: "esm", outExtension: { ".js": ".mjs" }, logLevel: "warning" });
const files = tests.map((f) => join(out, f.replace(/\.ts$/, ".mjs")));
const run = spawnSync(process.execPath, ["--test", ...files], { stdio: "inherit" });
process.exit(run.status ?? 1);
