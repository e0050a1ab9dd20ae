#!/usr/bin/env bash
# The side-by-side harness (bench/, its own Go module) must build, pass its
# tests and drive every series without a failed call: a one-round smoke run
# of `make bench-compare` (QUICK=1 prints its tables and writes nothing).
# About 1-2 minutes on 2 cores, most of it compiling go-sdk and gonum/plot.
set -euo pipefail
cd "$(dirname "$0")/../.."
(
  cd bench
  if ! go mod tidy -diff; then
    echo "bench/go.mod and bench/go.sum are not tidy: run 'cd bench && go mod tidy' and commit the result" >&2
    exit 1
  fi
  go vet ./...
  go test -count=1 ./...
)
make bench-compare QUICK=1
