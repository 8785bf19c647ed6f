#!/usr/bin/env bash
# Runs every Go fuzz target in the module for the given time each (default
# 30s). A failing input is written by go test under the package's
# testdata/fuzz/<Target>/ and should be committed with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-30s}
grep -rl --include='*_test.go' '^func Fuzz' . | while read -r file; do
	pkg=./$(dirname "${file#./}")
	grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //' | while read -r target; do
		echo "== $pkg $target ($fuzztime)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
	done
done
