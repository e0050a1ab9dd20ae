#!/usr/bin/env bash
# go.mod and go.sum must be what `go mod tidy` makes them: a requirement marked
# `// indirect` that the code imports directly (or a stale one) misleads readers
# and reviewers of dependency changes. `-diff` changes nothing and fails on drift.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! go mod tidy -diff; then
  echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit the result" >&2
  exit 1
fi
echo "go.mod and go.sum are tidy"
