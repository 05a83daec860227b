#!/usr/bin/env bash
# Tests of the TypeScript tool SDK: installs its pinned dependencies (npm
# ci) and compiles everything with tsc --strict, including the type-level
# fixture test/types.ts (undeclared handles and bindings must not compile).
# The SDK's run-time behaviour is tested through the example tools
# (examples/ts-tools), built by brain build and run by the Go host.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --loglevel=error
npx tsc -p tsconfig.json
echo "sdk/ts: 1 passed, 0 failed (tsc: the package and the type fixture)"
