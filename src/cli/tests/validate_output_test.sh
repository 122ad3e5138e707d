#!/usr/bin/env bash
# `ropecheck validate` on a broken plugin prints what a person can use: the table, each failure's
# minimal counterexample and ONE replay command that really reproduces it; no RapidCheck value
# dumps, no build-machine paths, no random seed line, no RC_PARAMS instruction (validate ignores
# RC_PARAMS), and numbers that differ printed so that they differ.
# Usage: validate_output_test.sh ROPECHECK PLUGIN.so SOURCE_DIR WORKDIR
set -u
rc=$1 plugin=$2 src=$3 work=$4
mkdir -p "$work"
out=$work/first.txt
"$rc" validate --plugin "$plugin" --dtypes f32 --layouts half --budget quick >"$out" 2>&1
status=$?
fail() { echo "FAIL: $*"; echo "---- output ----"; cat "$out"; exit 1; }
[ "$status" -eq 1 ] || fail "exit status $status, expected 1"
grep -q "Using configuration" "$out" && fail "RapidCheck's random seed line is printed"
grep -q "RC_PARAMS" "$out" && fail "an RC_PARAMS instruction is printed"
grep -qE "$src/(properties|reference|reports|src)/" "$out" &&
  fail "a source path of the build machine is printed"
grep -qE "impl\.hpp|\.cpp:[0-9]+" "$out" && fail "a source file:line is printed"
grep -qE "^(int|long|double|unsigned long|std::)[^ ]*: " "$out" && fail "generator value dumps"
grep -qE "(-?nan) > bound (-?nan)" "$out" && fail "NaN comparison printed as a number comparison"
lines=$(wc -l <"$out")
[ "$lines" -le 80 ] || fail "$lines lines of output (a person reads the table and the failures)"
nfail=$(grep -cE "^\[f32 half\] [A-Za-z]+: (FAIL|mismatch|coverage)" "$out")
nreplay=$(grep -c "^  replay: ropecheck validate " "$out")
[ "$nfail" -ge 1 ] || fail "no failure reported"
[ "$nreplay" -eq "$nfail" ] || fail "$nfail failures but $nreplay replay commands"
# Every replay command reproduces its failure: the same counterexample line.
i=0
while IFS= read -r line; do
  i=$((i + 1))
  check=$(sed -n "s/.*--properties \([A-Za-z]*\) .*/\1/p" <<<"$line")
  cmd=${line#  replay: ropecheck }
  expected=$(grep -A1 -E "^\[f32 half\] $check: " "$out" | sed -n 2p)
  # shellcheck disable=SC2086
  "$rc" $cmd >"$work/replay$i.txt" 2>&1
  rs=$?
  [ "$rs" -eq 1 ] || fail "replay of $check exited $rs"
  got=$(grep -A1 -E "^\[f32 half\] $check: " "$work/replay$i.txt" | sed -n 2p)
  [ -n "$got" ] && [ "$got" = "$expected" ] ||
    fail "replay of $check did not reproduce the counterexample:
  expected: $expected
  got:      $got"
  others=$(grep -cE "^\[f32 half\] [A-Za-z]+: " "$work/replay$i.txt")
  [ "$others" -eq 1 ] || fail "replay of $check reported $others failures, expected exactly 1"
done < <(grep "^  replay: ropecheck validate " "$out")
echo "ok: $nfail failure(s), each replayed to the same counterexample; $lines lines"
