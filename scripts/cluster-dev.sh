#!/usr/bin/env bash
# cluster-dev.sh: three NATS servers (JetStream, clustered) and three brain
# nodes on loopback, for development (docs/cluster.md). Ctrl-C stops them.
#
#   scripts/cluster-dev.sh            # run until Ctrl-C
#   scripts/cluster-dev.sh --check    # start, wait until all three nodes serve, stop
#
# Ports: NATS clients 4222-4224, NATS routes 6222-6224, brain 7781-7783
# (override the bases with NATS_PORT, ROUTE_PORT, BRAIN_PORT). State goes
# under $CLUSTER_DIR (default: a new temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."

nats_port=${NATS_PORT:-4222}
route_port=${ROUTE_PORT:-6222}
brain_port=${BRAIN_PORT:-7781}
dir=${CLUSTER_DIR:-$(mktemp -d -t brain-cluster.XXXXXX)}
check=false
[[ "${1:-}" == "--check" ]] && check=true

mkdir -p "$dir/bin"
echo "building nats-server and brain into $dir/bin ..."
go build -o "$dir/bin/nats-server" github.com/nats-io/nats-server/v2
go build -o "$dir/bin/brain" ./cmd/brain

pids=()
stop() {
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop EXIT
trap 'exit 130' INT TERM

routes=""
for i in 0 1 2; do routes+="nats://127.0.0.1:$((route_port + i)),"; done
routes=${routes%,}
for i in 0 1 2; do
	mkdir -p "$dir/nats$((i + 1))"
	"$dir/bin/nats-server" -n "nats$((i + 1))" -a 127.0.0.1 -p $((nats_port + i)) -js -sd "$dir/nats$((i + 1))" \
		--cluster_name brain-dev --cluster "nats://127.0.0.1:$((route_port + i))" --routes "$routes" \
		>"$dir/nats$((i + 1)).log" 2>&1 &
	pids+=($!)
done
nats_urls="nats://127.0.0.1:$nats_port,nats://127.0.0.1:$((nats_port + 1)),nats://127.0.0.1:$((nats_port + 2))"

# start_node i: brain node n<i+1>, retried while the NATS cluster elects
# its JetStream leaders (a node cannot open its R3 stream before that).
start_node() {
	local i=$1 port=$((brain_port + $1)) n="n$(($1 + 1))"
	mkdir -p "$dir/$n/workspace"
	for _ in $(seq 1 60); do
		(cd "$dir/$n" && exec "$dir/bin/brain" serve --addr "127.0.0.1:$port" --data data --console-addr off \
			--nats "$nats_urls" --node-id "$n" >>"$dir/$n.log" 2>&1) &
		local pid=$!
		for _ in $(seq 1 50); do
			if curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then
				pids+=("$pid")
				echo "node $n: http://127.0.0.1:$port (log $dir/$n.log)"
				return 0
			fi
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		sleep 0.5
	done
	echo "node $n did not start; see $dir/$n.log" >&2
	return 1
}

start_node 0
# Every node serves the same tokens: the first node created them.
for n in n2 n3; do
	mkdir -p "$dir/$n/data"
	cp "$dir/n1/data/tokens.json" "$dir/$n/data/tokens.json"
done
start_node 1
start_node 2
echo "tokens: $dir/n1/data/tokens.json (the same on every node)"
if $check; then
	echo "cluster-dev: all three nodes serve"
	exit 0
fi
echo "Ctrl-C stops the cluster."
wait
