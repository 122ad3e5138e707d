#!/usr/bin/env bash
# `check` on a wrong-declaration dump: exit 1 with a hint matching EXPECT (or, EXPECT = none, no
# hint line at all); then, when the hint states spec keys, the hint followed: the same dump with
# those keys as --spec (which overrides __metadata__) must PASS, exit 0.
# usage: hint_followed_test.sh ROPECHECK DUMP WORKDIR EXPECT
set -u
rc_bin=$1 dump=$2 work=$3 expect=$4
mkdir -p "$work"
out=$("$rc_bin" check --tensors "$dump" --threads 1 2>&1)
status=$?
echo "$out"
if [ "$status" != 1 ]; then echo "FAILED: exit $status, expected 1"; exit 1; fi
hint=$(printf '%s\n' "$out" | grep '^hint: ' || true)
if [ "$expect" = none ]; then
  if [ -n "$hint" ]; then echo "FAILED: a hint where none holds"; exit 1; fi
  exit 0
fi
if ! printf '%s\n' "$hint" | grep -Eq -- "$expect"; then
  echo "FAILED: hint does not match: $expect"; exit 1
fi
keys=$(printf '%s\n' "$hint" | grep -o 'spec keys {[^}]*}' | sed 's/^spec keys //' || true)
[ -z "$keys" ] && exit 0
printf '%s\n' "$keys" > "$work/spec.json"
echo "--- followed: --spec $keys"
out2=$("$rc_bin" check --tensors "$dump" --spec "$work/spec.json" --threads 1 2>&1)
status2=$?
echo "$out2"
if [ "$status2" != 0 ]; then echo "FAILED: the hint followed exits $status2, expected 0"; exit 1; fi
