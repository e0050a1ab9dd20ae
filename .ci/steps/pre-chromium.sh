#!/usr/bin/env bash
# Installs Debian's Chromium for the browser tests in ./e2e (TestUI*), which
# run in `make test` and skip only when no chromium binary is found. Quick
# and idempotent: nothing is fetched when chromium is already installed.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  chromium --version 2>/dev/null || true
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends chromium fonts-dejavu-core
chromium --version
