#!/usr/bin/env bash
# Runs every Go fuzz target in the module for the given time each (default
# 30s). A failing input is written by go test under the package's
# testdata/fuzz/<Target>/ and should be committed with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-30s}
# Two modules: the broker (.) and the harness (bench/); each target runs
# in its own.
grep -rl --include='*_test.go' '^func Fuzz' . | while read -r file; do
	dir=$(dirname "${file#./}") mod=.
	case $dir in bench | bench/*) mod=bench dir=${dir#bench} dir=${dir#/} ;; esac
	pkg=./${dir:-.}
	grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //' | while read -r target; do
		echo "== $mod $pkg $target ($fuzztime)"
		(cd "$mod" && go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg")
	done
done
