#!/usr/bin/env bash
# `ropecheck validate --threads N` gives the same output whatever N: stdout and validation.json
# of --threads 1 and --threads 2 are byte-identical apart from the timing fields (the seconds of
# the verdict line and "seconds" in validation.json) and the --out directory's name.
# Usage: validate_threads_test.sh ROPECHECK WORKDIR PLUGIN.so [validate options...]
# VALIDATE_A / VALIDATE_B (default "--threads 1" / "--threads 2") are the two runs' own options:
# with "--oracle fast" / "--oracle mpfr" the test shows the two oracles give the same validation.
set -u
A=${VALIDATE_A:---threads 1} B=${VALIDATE_B:---threads 2}
rc=$1 work=$2 plugin=$3
shift 3
rm -rf "$work"
mkdir -p "$work"
for n in 1 2; do
  if [ "$n" = 1 ]; then opts=$A; else opts=$B; fi
  # shellcheck disable=SC2086  # opts is a list of options
  "$rc" validate --plugin "$plugin" $opts --out "$work/out$n" "$@" \
    >"$work/stdout$n.txt" 2>"$work/stderr$n.txt"
  echo $? >"$work/status$n.txt"
  # Timing and the output directory are the only differences allowed.
  sed -E -e 's/, [0-9.e+-]+ s \(budget /, <secs> s (budget /' \
    -e "s#^reports written to $work/out$n #reports written to <out> #" \
    "$work/stdout$n.txt" >"$work/stdout$n.masked"
  sed -E '/^  "seconds": /d' "$work/out$n/validation.json" >"$work/validation$n.masked" 2>/dev/null ||
    { echo "FAIL: run $n ($opts) wrote no validation.json"; cat "$work/stderr$n.txt"; exit 1; }
done
fail() { echo "FAIL: $*"; exit 1; }
cmp -s "$work/status1.txt" "$work/status2.txt" ||
  fail "exit status $(cat "$work/status1.txt") with $A, $(cat "$work/status2.txt") with $B"
diff -u "$work/stdout1.masked" "$work/stdout2.masked" || fail "stdout differs between $A and $B"
diff -u "$work/validation1.masked" "$work/validation2.masked" ||
  fail "validation.json differs between $A and $B"
grep -q "^  \"seconds\": " "$work/out1/validation.json" || fail "validation.json has no seconds field"
echo "same output with $A and $B ($(wc -l <"$work/stdout1.txt") lines, exit $(cat "$work/status1.txt"))"
