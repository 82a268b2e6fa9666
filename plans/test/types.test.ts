// Misuse that tsc must reject: runs `tsc --noEmit -p test/fixtures` once and checks that every
// line marked "// expect-error[: text]" in a fixture has an error (whose message contains the
// text), that no other line has one, and that good.ts is clean.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const FIX = path.join(ROOT, "test", "fixtures");

function runTsc(): Map<string, { line: number; msg: string }[]> {
  let out = "";
  try {
    execFileSync(process.execPath, [path.join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", FIX, "--noEmit", "--pretty", "false"], {
      cwd: ROOT,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (e) {
    out = String((e as { stdout?: string }).stdout ?? "");
  }
  const errs = new Map<string, { line: number; msg: string }[]>();
  let last: { line: number; msg: string } | undefined;
  for (const l of out.split("\n")) {
    const m = l.match(/^(.*?)\((\d+),(\d+)\): error (TS\d+: .*)$/);
    if (m) {
      const file = path.basename(m[1]);
      last = { line: Number(m[2]), msg: m[4] };
      errs.set(file, [...(errs.get(file) ?? []), last]);
    } else if (last && l.startsWith(" ")) last.msg += "\n" + l.trim();
  }
  return errs;
}

const errors = runTsc();
const fixtures = fs.readdirSync(FIX).filter((f) => f.endsWith(".ts")).sort();

test("good.ts type-checks cleanly", () => {
  assert.deepEqual(errors.get("good.ts") ?? [], []);
});

for (const file of fixtures.filter((f) => f.startsWith("bad_"))) {
  const lines = fs.readFileSync(path.join(FIX, file), "utf8").split("\n");
  const got = errors.get(file) ?? [];
  const marked = new Set<number>();
  lines.forEach((text, i) => {
    const m = text.match(/\/\/ expect-error(?::\s*(.*))?$/);
    if (!m) return;
    const line = i + 1;
    marked.add(line);
    const name = lines.slice(0, i).reverse().find((l) => l.startsWith("export const"))?.match(/export const (\w+)/)?.[1];
    test(`${file}:${line} ${name ?? ""} is a type error`, () => {
      const here = got.filter((e) => e.line === line);
      assert.ok(here.length > 0, `no tsc error on ${file}:${line}: ${text.trim()}`);
      if (m[1]) assert.ok(here.some((e) => e.msg.includes(m[1])), `tsc errors on ${file}:${line} do not mention ${m[1]}:\n${here.map((e) => e.msg).join("\n")}`);
    });
  });
  test(`${file}: no errors on unmarked lines`, () => {
    const stray = got.filter((e) => !marked.has(e.line));
    assert.deepEqual(stray.map((e) => `${file}:${e.line}: ${e.msg}`), []);
  });
}
