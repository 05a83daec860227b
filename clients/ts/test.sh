#!/usr/bin/env bash
# Tests of the TypeScript client: installs its pinned dependencies (npm ci),
# type-checks everything with tsc --strict (including the compile-time proof
# that the package's types are the seed's, test/assignable.ts), builds brain
# from this repository, and runs the node:test suites against it.
set -euo pipefail
cd "$(dirname "$0")"

npm ci --no-audit --no-fund --loglevel=error
rm -rf dist
# The package alone, without Node's types: it must build for a browser.
npx tsc -p tsconfig.build.json --noEmit
npx tsc -p tsconfig.json
# The README's host-platform example, type-checked against the package.
mkdir -p .readme-check
awk '/^## A host platform/{f=1} f&&/^```ts$/{p=1;next} p&&/^```$/{exit} p' README.md > .readme-check/example.ts
test -s .readme-check/example.ts
npx tsc -p test/readme/tsconfig.json

bin_dir=$(mktemp -d)
trap 'rm -rf "$bin_dir"' EXIT
(cd ../.. && go build -trimpath -o "$bin_dir/brain" ./cmd/brain) # -trimpath: test.sh built every package so already

BRAIN_BIN="$bin_dir/brain" node --test --test-force-exit --test-timeout=120000 dist/test/*.test.js
