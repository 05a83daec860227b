#!/usr/bin/env bash
# Runs brain's benchmarks and the peers in ../shared/anchors in one go, then
# prints each path beside its floor or peer as a ratio of medians (one run:
# these machines are noisy, so compare only numbers from the same run).
#
#   ./bench.sh                 # -count 5; raw output kept in bench-out/
#   COUNT=3 ./bench.sh
#   ANCHORS=/path/to/anchors ./bench.sh
#
# docs/performance.md shows the latest output and what each row means.
set -euo pipefail
cd "$(dirname "$0")"
count=${COUNT:-5}
anchors=${ANCHORS:-../shared/anchors}
out=bench-out
mkdir -p "$out"

brain_bench() { # package regexp
  go test -run '^$' -bench "$2" -benchmem -count "$count" -timeout 30m "$1" | tee -a "$out/brain.txt" >&2
}

: > "$out/brain.txt"
brain_bench ./session/ '^BenchmarkInvoke$'
brain_bench ./host/ '^Benchmark(EchoArtifact|ProvisionWarmCache)$'
brain_bench ./host/jshost/ '^Benchmark(EchoScript|ProvisionScriptWarmCache|NewSessionScript|IdleRealm)$'
brain_bench ./internal/jsvm/ '^Benchmark(RunSmall|New)$'
brain_bench ./server/ '^Benchmark(WSRoundTrip(Journaled)?|FloorWSEchoJournaled)$'
brain_bench ./mcpbridge/ '^BenchmarkMCPCallToolHTTP$'
brain_bench ./store/ '^BenchmarkAppend$'
brain_bench ./provide/script/ '^Benchmark(CallSmall|NewRealm)$'
brain_bench ./kernel/ '^BenchmarkInvokeNative$'

if [ -x "$anchors/run.sh" ]; then
  BENCH='WazeroCall$|WazeroCallTerminating|FloorWSEcho|FloorTCPPingPong|FloorJSONFuncCall|ValidateSanthosh|MCPGoCallToolHTTP|MCPGoSDKCallToolHTTP' \
    COUNT="$count" "$anchors/run.sh" | tee "$out/anchors.txt" >&2
else
  echo "bench.sh: no anchors at $anchors; ratios against peers are left out" >&2
  : > "$out/anchors.txt"
fi

go run ./internal/benchtable "$out/brain.txt" "$out/anchors.txt"
