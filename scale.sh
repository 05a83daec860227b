#!/usr/bin/env bash
# Runs issue 21's scale loads on this machine and prints each figure
# beside its goal (internal/scalereport): connected clients (in process,
# and from outside: npm ws clients against the binary, which needs node
# and npm), stored sessions, busy sessions, the journaled round trip
# beside its floor, and the release binary's size. Every load is bounded
# in count and time and cleans up what it makes (temporary directories,
# its child processes).
#
#   ./scale.sh                       # the sizes below; 15–25 minutes on 2 cores
#   SCALE_CLIENTS=1000 SCALE_STORED=100000 SCALE_APPENDERS=100 ./scale.sh   # a quick look
#   SCALE_ONLY="stored floor" ./scale.sh   # some of: clients outside history stored appenders mcp floor binary
#
# A step that fails is reported and the others still run; the report says
# which figures are missing.
#
# Take latency figures in a quiet moment: the report prints the load
# average beside each. docs/performance.md ("Scale") has the latest run.
set -euo pipefail
cd "$(dirname "$0")"
clients=${SCALE_CLIENTS:-1000,3000,10000}
rate=${SCALE_RATE:-2000}
seconds=${SCALE_SECONDS:-10}
stored=${SCALE_STORED:-100000,300000,1000000}
appenders=${SCALE_APPENDERS:-100,300,1000}
mcpclients=${SCALE_MCP:-100,300,1000}
history=${SCALE_HISTORY:-200}
historycalls=${SCALE_HISTORY_CALLS:-1100}
count=${COUNT:-5}
out=${SCALE_OUT:-scale-out}
mkdir -p "$out"
out=$(cd "$out" && pwd) # absolute: the tests run in their packages' directories
only=${SCALE_ONLY:-clients outside history stored appenders mcp floor binary}
status=0
step() { # name: whether to run it (and forget its last figures)
  case " $only " in *" $1 "*) ;; *) return 1 ;; esac
  rm -f "$out/$1.json" "$out/$1.txt"
}
failed() { echo "scale.sh: $1 failed" >&2; status=1; }

if step clients; then
  echo "scale.sh: connected clients ($clients) at $rate round trips/s for ${seconds}s each" >&2
  go test ./cmd/brain -run '^TestScaleClients$' -count 1 -timeout 60m -v \
    -args -scale.clients "$clients" -scale.rate "$rate" -scale.seconds "$seconds" -scale.json "$out/clients.json" >&2 || failed clients
fi

if step outside; then
  # The same clients measured as issue 21 first did: the binary in a
  # process of its own, npm ws clients (clients/ts's pinned ones), the
  # node's RSS from /proc as it settles by itself.
  echo "scale.sh: connected clients from outside ($clients): npm ws clients against the brain serve binary" >&2
  ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
  if go build -o "$out/brain-outside" ./cmd/brain &&
    { [ -d clients/ts/node_modules/ws ] || (cd clients/ts && npm ci --no-audit --no-fund --loglevel=error) >&2; }; then
    (cd clients/ts && node scale/outside.mjs --brain "$out/brain-outside" --sizes "$clients" --json "$out/outside.json") >&2 || failed outside
  else
    failed outside
  fi
  rm -f "$out/brain-outside"
fi

if step history; then
  echo "scale.sh: $history clients after $historycalls calls each" >&2
  go test ./cmd/brain -run '^TestScaleHistory$' -count 1 -timeout 30m -v \
    -args -scale.history "$history" -scale.historycalls "$historycalls" -scale.historyjson "$out/history.json" >&2 || failed history
fi

if step stored; then
  echo "scale.sh: stored sessions ($stored)" >&2
  go test ./store -run '^TestScaleStored$' -count 1 -timeout 60m -v \
    -args -scale.stored "$stored" -scale.json "$out/stored.json" >&2 || failed stored
fi

if step appenders; then
  echo "scale.sh: busy sessions ($appenders)" >&2
  go test ./store -run '^TestScaleAppenders$' -count 1 -timeout 30m -v \
    -args -scale.appenders "$appenders" -scale.json "$out/appenders.json" >&2 || failed appenders
fi

if step mcp; then
  echo "scale.sh: sessions each driven by its own MCP client ($mcpclients)" >&2
  go test ./cmd/brain -run '^TestScaleMCP$' -count 1 -timeout 30m -v \
    -args -scale.mcp "$mcpclients" -scale.mcpjson "$out/mcp.json" >&2 || failed mcp
fi

if step floor; then
  # Interleaved, one of each in turn: the machine's state drifts by tens
  # of percent within a minute, and -count N would run all of one before
  # the other (the ratio moved 1.43-2.26x between sittings that way).
  echo "scale.sh: the journaled round trip and its floor ($count pairs, interleaved)" >&2
  if go test -c -o "$out/server.test" ./server; then
    : > "$out/floor.txt"
    for _ in $(seq "$count"); do
      for b in WSRoundTripJournaled FloorWSEchoJournaled; do
        (cd server && "$out/server.test" -test.run '^$' -test.bench "^Benchmark$b\$" -test.benchmem -test.timeout 30m) \
          >> "$out/floor.txt" || { failed floor; break 2; }
      done
    done
    rm -f "$out/server.test"
  else
    failed floor
  fi
fi

if step binary; then
  echo "scale.sh: the binary" >&2
  go build -o "$out/brain-dev" ./cmd/brain
  go build -trimpath -ldflags='-s -w' -tags grpcnotrace -o "$out/brain-release" ./cmd/brain
  go build -trimpath -ldflags='-s -w' -tags grpcnotrace,brain_nomodels -o "$out/brain-release-nomodels" ./cmd/brain
  {
    echo "go-build $(stat -c %s "$out/brain-dev")"
    echo "release $(stat -c %s "$out/brain-release")"
    echo "release-nomodels $(stat -c %s "$out/brain-release-nomodels")"
  } > "$out/binary.txt"
  rm -f "$out"/brain-dev "$out"/brain-release "$out"/brain-release-nomodels
fi

echo
echo "scale.sh: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), load average now $(cut -d' ' -f1-3 /proc/loadavg)"
echo
go run ./internal/scalereport "$out"
exit "$status"
