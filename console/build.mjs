// Builds console/dist/ — index.html, app.js, app.css, favicon.svg — which rankd embeds. The same
// sources give the same bytes: no timestamps, no absolute paths, no source maps.
import { build } from "esbuild";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "dist");
rmSync(dist, { recursive: true, force: true });
mkdirSync(dist);
const common = { absWorkingDir: here, bundle: true, minify: true, legalComments: "none", charset: "utf8", logLevel: "warning" };
await build({ ...common, entryPoints: ["src/main.ts"], outfile: "dist/app.js", format: "esm", target: "es2022" });
await build({ ...common, entryPoints: ["src/app.css"], outfile: "dist/app.css" });
for (const file of ["index.html", "favicon.svg"]) copyFileSync(join(here, file), join(dist, file));
