#!/usr/bin/env bash
# Prints, loudly, what `make test` did not run and why: the set-up lines of
# scripts/test-deps.sh and the tests scripts/testreport found skipped with
# testenv.Prefix, both collected in FILE. Prints one quiet line when FILE is
# empty: everything ran.
set -euo pipefail
file="$1"
if [[ ! -s "$file" ]]; then
  echo "make test: every test ran (none skipped for a missing tool)"
  exit 0
fi
bar='##########################################################################'
echo
echo "$bar"
echo "#  NOT RUN on this machine: $(grep -vc '^set-up:' "$file" || true) test(s) skipped for want of a tool."
echo "#  The suite is INCOMPLETE here; the lines below say what is missing and how to get it."
echo "$bar"
sed 's/^/#  /' "$file"
echo "$bar"
