#!/usr/bin/env bash
# Runs every test of brain on a fresh machine: installs what the tests need
# (Debian's chromium for the page handle), then gofmt, go vet, staticcheck,
# go test -race over every package (the docs test included: it runs the
# shell blocks of README.md and docs/*.md), the allocation bounds and the
# JavaScript engine's limit tests without the race detector, the TypeScript client's tests, and the TypeScript
# tool SDK's and example tools' type checks (their npm dependencies are
# installed first, with npm ci). Every step runs even if an earlier one failed; the last lines name
# what failed (steps, then failing tests, one per line). Exit status 0 only
# if everything passed. This is the single command CI runs (.ci/run).
set -uo pipefail
cd "$(dirname "$0")"

if [ ! -x /usr/lib/chromium/chromium ]; then
  echo "test.sh: installing Debian's chromium for the page handle tests" >&2
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi

failed_steps=()
step() { # name command...: run one step, remember it if it fails
  local name=$1
  shift
  echo "test.sh: $name" >&2
  local started=$SECONDS
  if ! "$@"; then
    failed_steps+=("$name")
  fi
  echo "test.sh: $name took $((SECONDS - started)) s" >&2
}

check_gofmt() {
  local unformatted
  unformatted=$(gofmt -l $(git ls-files '*.go'))
  if [ -n "$unformatted" ]; then
    echo "test.sh: gofmt would change:" >&2
    echo "$unformatted" >&2
    return 1
  fi
}

failed_tests=$(mktemp)
trap 'rm -f "$failed_tests" "$failed_tests.racefree"' EXIT
# -timeout 14m: a package's own bound, under the whole run's 15 minutes.
# The host package compiles seven Go guests cold under the race detector
# (wazero's compiler instrumented): minutes on two quiet cores, over
# ten on two loaded ones (640 s at load 9: a 10-minute bound killed it).
go_tests() {
  CI=true go test -race -timeout 14m -json ./... | go run ./internal/testsummary -o "$failed_tests"
}

# The TypeScript example tools' npm dependencies, before go test: the Go
# tests of build/ and examples/tools build examples/ts-tools with brain
# build (which needs no Node, only the packages) and run the result.
ts_tools_deps() {
  (cd examples/ts-tools && npm ci --no-audit --no-fund --loglevel=error)
}
# The TypeScript tools type-checked with tsc --strict against the SDK.
ts_tools_check() {
  (cd examples/ts-tools && npx tsc -p tsconfig.json)
}

step "TypeScript tools: npm ci" ts_tools_deps
step gofmt check_gofmt
step "go vet" go vet ./...
step staticcheck go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
# The docs test builds brain and runs the docs' commands with -trimpath
# (internal/docstest), a build configuration of its own: on a fresh clone
# that compile took 11 minutes on two loaded cores, inside go test's
# 10-minute timeout. Building every package so first keeps it out.
step "build" go build -trimpath -o /dev/null ./...
step "go test" go_tests
# The allocation bounds of the WebSocket hot path, an idle connection's
# stack bound and the JavaScript engine's leak bound skip themselves under
# the race detector (it allocates on its own, its frames are larger, and
# its shadow memory grows the process), so they run here without it.
step "allocation bounds" go test -trimpath -count=1 -run 'Allocs$|Leaks$|^TestIdleConnectionStack$|^TestConnectBurstStack$' ./protocol/ ./server/ ./internal/jsvm/
# The tests that drive the JavaScript engine to its limits skip themselves
# under the race detector, where the transpiled engine runs 20-50x slower
# (testutil.SkipUnderRace): their packages run again here without it.
race_free_tests() {
  local pkgs
  pkgs=$(git grep -l 'testutil.SkipUnderRace(t)' -- '*_test.go' | xargs -n1 dirname | sort -u | sed 's#^#./#')
  # shellcheck disable=SC2086 # one argument per package
  go test -trimpath -count=1 -json $pkgs | go run ./internal/testsummary -o "$failed_tests.racefree"
  local status=$?
  cat "$failed_tests.racefree" >>"$failed_tests"
  return $status
}
step "without the race detector" race_free_tests
step "TypeScript client" clients/ts/test.sh
step "TypeScript tool SDK" sdk/ts/test.sh
step "TypeScript tools: tsc" ts_tools_check
step "MCP with the npm SDK" mcpbridge/npmtest/test.sh

echo
if [ ${#failed_steps[@]} -eq 0 ]; then
  echo "test.sh: all passed"
  exit 0
fi
echo "test.sh: FAILED steps: ${failed_steps[*]}"
if [ -s "$failed_tests" ]; then
  echo "test.sh: failing tests:"
  sed 's/^/  /' "$failed_tests"
fi
exit 1
