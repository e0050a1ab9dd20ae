#!/usr/bin/env bash
# The next official conformance suite (@modelcontextprotocol/conformance
# 0.2.0-alpha.12, npm alias conformance-next) against one node started with
# `serve --dev --conformance`, for both requirement sets it scores:
#   2025-11-25: every scenario it runs (33), pending ones included;
#   2026-07-28: every scored scenario (37); the tasks extension and pending
#               scenarios are reported by judge.mjs but do not decide.
# 10 consecutive runs each, no expected failures. The stable 0.1.16 ×10 run
# is .ci/run's own `make conformance`.
set -euo pipefail
cd "$(dirname "$0")/../.."

runs="${CONFORMANCE_NEXT_RUNS:-10}"
bin="$(mktemp -d)/mcpswarm"
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/node

start=$(date +%s)
MCPSWARM_BIN="$bin" CONFORMANCE_PACKAGE=next CONFORMANCE_REQUIREMENTS=2025-11-25 CONFORMANCE_SCORE=all \
	CONFORMANCE_RUNS="$runs" e2e/conformance/run.sh
MCPSWARM_BIN="$bin" CONFORMANCE_PACKAGE=next CONFORMANCE_REQUIREMENTS=2026-07-28 CONFORMANCE_SCORE=scored \
	CONFORMANCE_RUNS="$runs" e2e/conformance/run.sh
echo "conformance-next: both requirement sets passed ${runs}× in $(($(date +%s) - start)) s"
