#!/usr/bin/env bash
# `validate --out` writes the validation's verdict into every output: junit.xml has one test case
# per configuration x check (failures as <failure>), report.md / report.html open with the
# validation verdict before the precision headline and never say "exit 0" for a run that exits 1;
# the reproduce commands of the plugin's worst cases are `ropecheck validate` lines (eval cannot
# run a plugin). A correct plugin: PASS and exit 0 everywhere.
# Usage: validate_out_verdict_test.sh ROPECHECK BROKEN.so CORRECT.so WORKDIR
set -u
rc=$1 broken=$2 correct=$3 work=$4
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
run() {  # name plugin
  "$rc" validate --plugin "$2" --dtypes f32 --layouts half --budget quick --threads 1 \
    --out "$work/$1" >"$work/$1.txt" 2>"$work/$1.err"
}
run broken "$broken"
status=$?
[ "$status" -eq 1 ] || fail "broken plugin: exit $status, expected 1"
d=$work/broken
jf=$(sed -n 's/.*<testsuites [^>]*failures="\([0-9]*\)".*/\1/p' "$d/junit.xml")
[ -n "$jf" ] && [ "$jf" -ge 1 ] || fail "junit.xml: testsuites failures='$jf', expected >= 1"
grep -q '<testsuite name="validate"' "$d/junit.xml" || fail "junit.xml: no validate suite"
grep -q 'name="Differential".*<failure message="unwritten output' "$d/junit.xml" ||
  fail "junit.xml: the Differential case does not fail with the fault"
n_cases=$(grep -c 'classname="validate\.' "$d/junit.xml")
[ "$n_cases" -ge 10 ] || fail "junit.xml: $n_cases validate test cases (one per check expected)"
head -5 "$d/report.md" | grep -q "Validation of plugin .*: FAIL (classification unwritten_output" ||
  fail "report.md does not open with the validation verdict:
$(head -5 "$d/report.md")"
grep -q "exit 0" "$d/report.md" && fail "report.md says 'exit 0' for a run that exits 1"
grep -q "exit 0" "$d/report.html" && fail "report.html says 'exit 0' for a run that exits 1"
grep -q "First counterexample: \[f32 half\] Differential" "$d/report.md" ||
  fail "report.md: no first counterexample"
grep -q '"reproduce": "ropecheck eval' "$d/report.json" &&
  fail "report.json: a plugin's worst case is reproduced with ropecheck eval"
grep -q '"reproduce": "ropecheck validate --plugin' "$d/report.json" ||
  fail "report.json: no validate reproduce line"
# The verdict is the last line: the report's progress comes before it, on stderr.
tail -1 "$work/broken.txt" | grep -q "^FAIL: " || fail "stdout does not end with the verdict"

run correct "$correct"
status=$?
[ "$status" -eq 0 ] || fail "correct plugin: exit $status, expected 0"
d=$work/correct
grep -q '<testsuites [^>]*failures="0"' "$d/junit.xml" || fail "correct: junit failures"
head -5 "$d/report.md" | grep -q "Validation of plugin .*: PASS" || fail "correct: report.md"
grep -q "(exit 0)" "$d/report.md" || fail "correct: report.md does not say exit 0"
# A requested dtype the plugin does not declare (c_rope: f64, f32) is named, not dropped silently.
"$rc" validate --plugin "$correct" --dtypes f32,f16 --layouts half --properties Differential \
  >"$work/dtypes.txt" 2>&1
grep -q "note: --dtypes f16: the plugin does not declare this dtype; not checked" \
  "$work/dtypes.txt" || fail "--dtypes f16 on an f64/f32 plugin: no note
$(cat "$work/dtypes.txt")"
echo "ok: junit failures $jf, $n_cases validate cases; report.md opens with the verdict"
