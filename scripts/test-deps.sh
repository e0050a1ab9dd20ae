#!/usr/bin/env bash
# Installs what `make test` needs beyond Go, where this machine can:
#   npm       e2e/node_modules (TypeScript SDK, conformance suites, Node 22,
#             playwright-core) with `npm ci --prefix e2e`, again only when
#             e2e/package-lock.json changed since the last install;
#   chromium  Debian's chromium for the browser tests, with apt-get;
#   iproute2  ip(8) for the partition test in network namespaces, with apt-get.
# apt-get runs only as root and only for what is missing, so a second run
# fetches nothing and takes well under a second.
#
# Usage: scripts/test-deps.sh [-notrun FILE] [npm] [chromium] [iproute2]
# (no names: all three). What cannot be installed is said on stderr and
# appended to FILE, for `make test`'s closing list. Under CI (CI=true) a
# failed install is an error; elsewhere the tests that need it skip.
# MCPSWARM_TEST_INSTALL=0 installs nothing and lists what is missing.
set -uo pipefail
cd "$(dirname "$0")/.."

notrun=/dev/null
if [[ "${1:-}" == "-notrun" ]]; then
  notrun="$2"
  shift 2
fi
want=("$@")
[[ ${#want[@]} -gt 0 ]] || want=(npm chromium iproute2)
install="${MCPSWARM_TEST_INSTALL:-1}"
status=0

# missing NAME WHY: a dependency is absent; the tests that need it will skip.
missing() {
  echo "test-deps: $1 NOT INSTALLED: $2" >&2
  echo "set-up: $1: $2" >>"$notrun"
  if [[ "${CI:-}" == "true" ]]; then
    status=1
  fi
}

npm_deps() {
  local lock=e2e/package-lock.json stamp=e2e/node_modules/.installed-package-lock.json
  if cmp -s "$lock" "$stamp"; then
    return
  fi
  if ! command -v npm >/dev/null 2>&1; then
    missing "e2e/node_modules" "no npm on PATH: install Node.js 20+ with npm; the TypeScript-SDK interop and browser tests skip"
    return
  fi
  if [[ "$install" == 0 ]]; then
    missing "e2e/node_modules" "not installed from the current $lock and MCPSWARM_TEST_INSTALL=0: run 'npm ci --prefix e2e'"
    return
  fi
  echo "test-deps: npm ci --prefix e2e ($lock changed or never installed)"
  if npm ci --prefix e2e --no-audit --no-fund; then
    cp "$lock" "$stamp"
  else
    missing "e2e/node_modules" "'npm ci --prefix e2e' failed (offline?); the TypeScript-SDK interop and browser tests skip"
  fi
}

apt_updated=0
# apt_install CMD PACKAGE... installs PACKAGE... unless CMD is on PATH.
apt_install() {
  local cmd=$1
  shift
  if command -v "$cmd" >/dev/null 2>&1; then
    return
  fi
  if [[ "$install" == 0 ]]; then
    missing "$cmd" "not installed and MCPSWARM_TEST_INSTALL=0: run 'apt-get install -y $*'"
    return
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    missing "$cmd" "not installed and no apt-get here: install $* with this system's package manager"
    return
  fi
  if [[ "$(id -u)" != 0 ]]; then
    missing "$cmd" "not installed and not root: run 'sudo apt-get install -y $*'"
    return
  fi
  echo "test-deps: apt-get install $*"
  export DEBIAN_FRONTEND=noninteractive
  if [[ $apt_updated == 0 ]]; then
    apt-get update -qq || true
    apt_updated=1
  fi
  if ! apt-get install -y -qq --no-install-recommends "$@" >/dev/null; then
    missing "$cmd" "'apt-get install -y $*' failed"
  fi
}

for w in "${want[@]}"; do
  case "$w" in
    npm) npm_deps ;;
    chromium)
      if ! command -v chromium-browser >/dev/null 2>&1; then
        apt_install chromium chromium fonts-dejavu-core
      fi
      ;;
    iproute2) apt_install ip iproute2 ;;
    *)
      echo "test-deps: unknown dependency $w (npm, chromium, iproute2)" >&2
      exit 2
      ;;
  esac
done
exit $status
