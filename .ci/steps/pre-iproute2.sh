#!/usr/bin/env bash
# e2e.TestPartitionLongerThanGraceHeals partitions real nodes with network
# namespaces (ip netns, veth, a bridge); it needs root and ip(8) from
# iproute2, and skips without them. Install iproute2 when it is missing.
set -euo pipefail
if command -v ip >/dev/null 2>&1; then
  echo "ip(8) present: $(ip -V)"
  exit 0
fi
apt-get update
apt-get install -y --no-install-recommends iproute2
ip -V
