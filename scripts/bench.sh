#!/usr/bin/env bash
# gilspy's accuracy and cost benchmark (bench/README.md): builds if needed, then
#   1. bench/compare.py: gilspy against uprobe ground truth, every pyenv interpreter 3.8-3.13, workloads a-d
#   2. bench/cost.py:    target throughput untraced / gilspy 1k, 10k, 50k Hz (or MODES) / uprobes / a stand-in
#                        poller that only wakes at 10 kHz (alternated), on workloads b, c, d and the
#                        thread-per-request server, gilspy's CPU, and the highest poll rate it sustains with 4
#                        and 16 threads
# and prints the tables. About 8-10 minutes on 2 cores. Needs root for the uprobes (it still runs without:
# the uprobe columns then say why they are missing).
# Usage: scripts/bench.sh [--quick] [--compare-only|--cost-only]
#   env: PYTHONS (default 3.8,...,3.13), COST_PYTHON (3.11), WINDOW (3 s), PHASE (2.5 s), REPS (5),
#        GILSPY_PREFIX (e.g. "chrt -f 10": run gilspy at real-time priority), BENCH_OUT (build/bench),
#        COST_WORKLOADS (b,c,d,server), MODES (cost.py --modes, e.g. "default=,r1k=-r 1000,nort=--no-realtime":
#        compare gilspy settings instead of rates), PERF=1 (count the target's context switches: cost.py --perf)
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0 compare=1 cost=1
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    --compare-only) cost=0 ;;
    --cost-only) compare=0 ;;
    *) echo "usage: $0 [--quick] [--compare-only|--cost-only]" >&2; exit 2 ;;
  esac
done

PY=${BENCH_PYTHON:-python3}
PYTHONS=${PYTHONS:-3.8,3.9,3.10,3.11,3.12,3.13}
COST_PYTHON=${COST_PYTHON:-3.11}
WINDOW=${WINDOW:-3}
PHASE=${PHASE:-2.5}
REPS=${REPS:-5}
if ((quick)); then WINDOW=1; PHASE=1.5; REPS=1; fi
OUT=${BENCH_OUT:-build/bench}
mkdir -p "$OUT"

if [ ! -x build/cli/gilspy ]; then
  scripts/setup.sh
fi
if [ -d /sys/kernel/tracing ] && ! mountpoint -q /sys/kernel/tracing 2>/dev/null && [ "$(id -u)" = 0 ]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi
prefix=()
[ -n "${GILSPY_PREFIX:-}" ] && prefix=(--prefix "$GILSPY_PREFIX")

echo "# gilspy benchmark, $(date -u +%FT%TZ), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# gilspy $(build/cli/gilspy --version 2>/dev/null || echo '?'), $(bpftrace --version 2>/dev/null || echo 'no bpftrace')"
start=$SECONDS
if ((compare)); then
  echo
  echo "#### 1. Accuracy: gilspy vs uprobes, same process, same window ($WINDOW s), default rate 10 kHz"
  "$PY" bench/compare.py --python "$PYTHONS" --window "$WINDOW" --json-out "$OUT/compare.json" "${prefix[@]}"
fi
if ((cost)); then
  echo
  echo "#### 2. Cost (Python $COST_PYTHON)"
  floor=(--floor); ((quick)) && floor=()
  extra=()
  [ -n "${MODES:-}" ] && extra+=(--modes "$MODES")
  [ "${PERF:-0}" = 1 ] && extra+=(--perf)
  "$PY" bench/cost.py --python "$COST_PYTHON" --workloads "${COST_WORKLOADS:-b,c,d,server}" --phase "$PHASE" \
    --reps "$REPS" --json-out "$OUT/cost.json" "${floor[@]}" "${prefix[@]}" "${extra[@]}"
fi
echo
echo "# done in $((SECONDS - start)) s, load average now $(cut -d' ' -f1-3 /proc/loadavg); JSON in $OUT/"
