#!/usr/bin/env bash
# Three nodes joined on loopback, for trying things by hand. They run the
# way production does (a cluster key, a policy with bearer tokens), so two
# clients of the same principal on different nodes see the same sessions.
# Node i serves MCP on 127.0.0.1:808i, gRPC on 909i and gossip on 794(5+i).
# Ctrl-C stops them all.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/mcpswarm}
KEY=data/local-cluster.key
mkdir -p data
[ -f "$KEY" ] || "$BIN" keygen > "$KEY"
pids=()
cleanup() {
  trap - INT TERM EXIT
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup INT TERM EXIT
for i in 1 2 3; do
  join=()
  [ "$i" -gt 1 ] && join=(--join 127.0.0.1:7946)
  "$BIN" serve --name "node$i" --cluster-key-file "$KEY" --policy deploy/local-policy.yaml \
    --http "127.0.0.1:808$i" --grpc "127.0.0.1:909$i" --gossip "127.0.0.1:794$((5 + i))" \
    --data-dir "data/node$i" --log-format text "${join[@]}" 2>&1 | sed -u "s/^/[node$i] /" &
  pids+=($!)
done
echo "three nodes: MCP at http://127.0.0.1:8081/mcp, :8082/mcp, :8083/mcp (token: alice-local-token)"
echo "members: $BIN members --cluster-key-file $KEY --addr 127.0.0.1:9091"
wait
