#!/usr/bin/env bash
# The MCP flows of docs/mcp.md driven by the npm MCP SDK (client side,
# @modelcontextprotocol/sdk, pinned by package-lock.json) against a real
# brain serve built from this repository: elicitation-answered approvals,
# a Delete with a waiting call, an MCP session across a restart.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --loglevel=error
bin_dir=$(mktemp -d)
trap 'rm -rf "$bin_dir"' EXIT
(cd ../.. && go build -trimpath -o "$bin_dir/brain" ./cmd/brain) # -trimpath: test.sh built every package so already
BRAIN_BIN="$bin_dir/brain" node --test --test-force-exit --test-timeout=120000 ./*.test.mjs
