#!/bin/sh
# Measured run of the two report commands the issue budgets (not a timed unit test: run by hand
# on an idle machine; the figures depend on it). Prints wall seconds and peak RSS (MiB) of
#   ropecheck report --out X            (budget: <= 10 s on 2 idle cores, <= 128 MiB)
#   ropecheck report --models all       (budget: <= 60 s)
# as JSON lines. Usage: src/bench/report_speed.sh [path/to/ropecheck] [threads]
# Needs GNU time (/usr/bin/time, Debian package "time").
set -eu
exe=${1:-build/src/cli/ropecheck}
threads=${2:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
measure() {
  name=$1
  shift
  /usr/bin/time -f '%e %M' -o "$work/t" "$@" >/dev/null 2>"$work/err" || rc=$?
  set -- $(tail -n 1 "$work/t")
  printf '{"command": "%s", "wall_seconds": %s, "peak_rss_mib": %.1f, "exit": %s}\n' \
    "$name" "$1" "$(echo "$2 / 1024" | bc -l)" "${rc:-0}"
  rc=0
}
measure "report --out X" "$exe" report --quiet --threads "$threads" --out "$work/default"
measure "report --models all" "$exe" report --quiet --threads "$threads" --models all \
  --out "$work/models"
