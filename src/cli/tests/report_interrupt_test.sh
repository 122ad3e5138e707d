#!/usr/bin/env bash
# report_interrupt_test.sh ROPECHECK WORKDIR INT|TERM
# 1. writes a small report into WORKDIR/out (the "previous" report) and fingerprints it;
# 2. starts a long `ropecheck report` into the same directory, waits for its first progress
#    line (the sweep is running), sends SIG<sig>;
# 3. requires exit 128 + signal, a stderr line saying where it stopped, the previous report
#    byte-identical, and no temporary file left in the directory.
set -u
exe=$1 work=$2 sig=$3
rm -rf "$work" && mkdir -p "$work"
out=$work/out
"$exe" report --kernels scalar --dtypes f32 --head-dims 8 --bases 1e4 --layouts half \
  --samples 16 --max-position 300 --threads 1 --quiet --out "$out" >/dev/null || {
  echo "could not write the previous report"; exit 1; }
(cd "$out" && sha256sum -- * > "$work/before.sha")
# Long enough to still be sweeping when the signal arrives (minutes uninterrupted).
"$exe" report --dtypes f64,f32,f16,bf16 --samples 4096 --threads 2 --out "$out" \
  >"$work/stdout" 2>"$work/stderr" &
pid=$!
for _ in $(seq 1 600); do
  grep -q "work units done" "$work/stderr" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if ! grep -q "work units done" "$work/stderr"; then
  echo "the sweep never reported progress"; cat "$work/stderr"; kill -KILL "$pid" 2>/dev/null; exit 1
fi
kill "-$sig" "$pid"
start=$(date +%s)
wait "$pid"
rc=$?
echo "exit $rc after $(( $(date +%s) - start )) s"
cat "$work/stderr"
want=$(( 128 + $(kill -l "$sig") ))
fail=0
[ "$rc" -eq "$want" ] || { echo "FAIL: exit $rc, expected $want"; fail=1; }
grep -Eq "interrupted by SIG$sig: stopped after [0-9]+ of [0-9]+ work units; first unfinished: .*; nothing written, the previous report in '.*' \(if any\) is unchanged" "$work/stderr" \
  || { echo "FAIL: no 'interrupted ... stopped after' message"; fail=1; }
(cd "$out" && sha256sum -c --quiet "$work/before.sha") || { echo "FAIL: previous report changed"; fail=1; }
left=$(cd "$out" && ls -A | grep -v -x -e report.json -e report.md -e report.html -e junit.xml)
[ -z "$left" ] || { echo "FAIL: files left in $out: $left"; fail=1; }
exit $fail
