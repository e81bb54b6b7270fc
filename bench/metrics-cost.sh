#!/usr/bin/env bash
# The metrics' cost in instructions (make bench-metrics): lands one
# generated stream under valgrind's callgrind with the metrics endpoint off
# and on, and prints the instructions each run executed and their ratio.
# Instruction counts are the same from run to run within about 0.3%,
# whatever else the machine does, where wall time moves by 5% and more.
#
# usage: bench/metrics-cost.sh CDCLAKE CDCGEN [EVENTS] [FORMAT]
set -euo pipefail
cdclake=$1 cdcgen=$2 events=${3:-20000} format=${4:-debezium}
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$cdcgen" --out "$work/in" --events "$events" --tables 24 --format "$format" >/dev/null
count() { # NAME ARGS...: callgrind's instruction count of one run
  local name=$1
  shift
  # Go's asynchronous preemption signals confuse callgrind: off.
  GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    "$cdclake" run --source "$work/in/stream.ndjson" --sink "$work/lake-$name" "$@" >"$work/$name.log" 2>&1 ||
    { tail -n 20 "$work/$name.log" >&2; exit 1; }
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$work/$name.log"
}
count off >"$work/off" &
count on --metrics-addr 127.0.0.1:0 >"$work/on" &
wait
off=$(<"$work/off") on=$(<"$work/on")
[[ -n $off && -n $on ]] || { echo "no instruction count" >&2; exit 1; }
awk -v off="$off" -v on="$on" -v ev="$events" -v f="$format" 'BEGIN {
  printf "%s, %d events, one core: %d instructions with the metrics off, %d on: on/off %.4f\n", f, ev, off, on, on / off }'
