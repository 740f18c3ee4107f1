// Regenerate the client's types from the server: the FastAPI app's OpenAPI document
// (../../scripts/openapi.py, no server needed) to openapi.json, then openapi-typescript to
// src/schema.d.ts. Both files are committed.
//
//   npm run generate            write them
//   npm run check-generated     regenerate into a scratch directory and fail if either differs
//                               from the committed one (scripts/ts-tests.sh runs this, so the
//                               client cannot drift from the server)
//
// The Python that imports memstack: $MEMSTACK_PYTHON, else the repository's .venv/bin/python,
// else python3.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const repo = resolve(pkg, "../..");
const targets = { document: join(pkg, "openapi.json"), types: join(pkg, "src/schema.d.ts") };

export function python() {
  if (process.env.MEMSTACK_PYTHON) return process.env.MEMSTACK_PYTHON;
  const venv = join(repo, ".venv/bin/python");
  return existsSync(venv) ? venv : "python3";
}

function generate(document, types) {
  execFileSync(python(), [join(repo, "scripts/openapi.py"), document], { stdio: "inherit" });
  const cli = join(pkg, "node_modules/openapi-typescript/bin/cli.js");
  // run from the package so that the header names the document as "openapi.json" wherever it is written
  execFileSync(process.execPath, [cli, document, "--output", types, "--alphabetize", "--default-non-nullable", "false"], { cwd: pkg, stdio: ["ignore", "ignore", "inherit"] });
}

/** Where the committed file and the fresh one first differ, with two lines of context. */
function firstDifference(committed, fresh) {
  const a = existsSync(committed) ? readFileSync(committed, "utf8").split("\n") : [];
  const b = readFileSync(fresh, "utf8").split("\n");
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  const show = (lines, sign) => lines.slice(Math.max(0, i - 2), i + 3).map((l) => `${sign} ${l}`).join("\n");
  return `${committed.slice(repo.length + 1)}, line ${i + 1}:\n${show(a, "-")}\n${show(b, "+")}`;
}

if (process.argv.includes("--check")) {
  const scratch = mkdtempSync(join(tmpdir(), "memstack-openapi-"));
  try {
    const fresh = { document: join(scratch, "openapi.json"), types: join(scratch, "schema.d.ts") };
    generate(fresh.document, fresh.types);
    const stale = Object.keys(targets).filter(
      (k) => !existsSync(targets[k]) || !readFileSync(fresh[k]).equals(readFileSync(targets[k])),
    );
    if (stale.length) {
      for (const k of stale) console.error(firstDifference(targets[k], fresh[k]));
      console.error(
        `generated files differ from the server's OpenAPI document: ${stale.map((k) => targets[k].slice(repo.length + 1)).join(", ")}\n` +
          "(a route or schema of memstack.server changed, or a FastAPI or pydantic version writes the document otherwise)\n" +
          "regenerate them: cd clients/typescript && npm run generate (then commit both)",
      );
      process.exit(1);
    }
    console.log("generated types match the server's OpenAPI document");
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
} else {
  generate(targets.document, targets.types);
  console.log(`wrote ${targets.document.slice(repo.length + 1)} and ${targets.types.slice(repo.length + 1)}`);
}
