#!/usr/bin/env bash
# gilspy's accuracy and cost benchmark (bench/README.md): builds if needed, then, for every mode in MODES
# (gilspy settings: the default adaptive schedule, fixed rates, --busy),
#   1. bench/compare.py: gilspy against uprobe ground truth, every pyenv interpreter 3.8-3.13, workloads a-h
#   2. bench/cost.py:    target throughput untraced / under each mode (alternated) on workloads b, c, the
#                        thread-per-request server and d (16 threads: gilspy's CPU), and gilspy's CPU
#   3. bench/table.py:   one markdown table, a row per mode: worst error per workload against cost
# and prints the tables. The full run (6 interpreters x 4 workloads x 5 modes of 3 s windows, then 4 workloads x
# 5 modes x 5 pairs of 1.5 s phases) takes about 20 minutes on 2 cores (the estimate is printed at the start);
# --quick (3.11 only, 1 s windows, 1 pair of 1 s phases) under 3 minutes. Needs root for the uprobes (it still runs without: the uprobe columns then say why
# they are missing).
# Usage: scripts/bench.sh [--quick] [--compare-only|--cost-only]
#   env: MODES ("label=gilspy args,...", default below), PYTHONS (3.8,...,3.13; --quick: 3.11), COST_PYTHON (3.11),
#        WINDOW (compare's window, 3 s; --quick 1), PHASE (cost's phase, 1.5 s; --quick 1), REPS (cost's pairs
#        per mode, 5; --quick 1), COMPARE_WORKLOADS (a-h), COST_WORKLOADS (b,c,server,d),
#        GILSPY_PREFIX (e.g. "chrt -f 10"), BENCH_OUT (build/bench), PERF=1 (cost.py --perf: the target's context
#        switches), COST_UPROBES=1 (cost.py also measures the uprobes' cost), FLOOR=1 (cost.py --floor: the
#        stand-in poller), SUSTAIN=1 (cost.py's sustained-rate table); each of the last three adds minutes
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
MODES=${MODES:-default=,r1k=-r 1000,r2k=-r 2000,r10k=-r 10000,busy=--busy -r 100000}
if ((quick)); then
  PYTHONS=${PYTHONS:-3.11}; WINDOW=${WINDOW:-1}; PHASE=${PHASE:-1}; REPS=${REPS:-1}
fi
PYTHONS=${PYTHONS:-3.8,3.9,3.10,3.11,3.12,3.13}
COST_PYTHON=${COST_PYTHON:-3.11}
WINDOW=${WINDOW:-3}
PHASE=${PHASE:-1.5}
REPS=${REPS:-5}
COMPARE_WORKLOADS=${COMPARE_WORKLOADS:-a,b,c,d,e,f,g,h}
COST_WORKLOADS=${COST_WORKLOADS:-b,c,server,d}
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

count() { local IFS=,; local -a x=($1); echo ${#x[@]}; }
n_modes=$("$PY" -c 'import sys; sys.path.insert(0, "bench"); import benchlib; print(len(benchlib.parse_modes(sys.argv[1])))' "$MODES")
n_py=$(count "$PYTHONS") n_cwl=$(count "$COMPARE_WORKLOADS") n_kwl=$(count "$COST_WORKLOADS")
# Estimate, from a --quick run on 2 cores (load average 3-4): a comparison run is the window + ~3.2 s (workload
# start, bpftrace's attach, the 0.5 s lead, bpftrace's and gilspy's exit), plus ~5 s to measure the probe cost
# once; a cost pair is 2 phases + ~1.1 s (settle times, gilspy's start and exit), plus ~2.5 s per workload to
# start it, and its first untraced phase; uprobes / floor / sustain add their own.
estimate=$(awk -v c="$compare" -v k="$cost" -v np="$n_py" -v nc="$n_cwl" -v nk="$n_kwl" -v nm="$n_modes" \
  -v w="$WINDOW" -v p="$PHASE" -v r="$REPS" -v up="${COST_UPROBES:-0}" -v fl="${FLOOR:-0}" -v su="${SUSTAIN:-0}" \
  'BEGIN { s = 0
           if (c) s += 5 + np * nc * nm * (w + 3.2)
           if (k) { m = nm + 2 * (fl == 1); s += nk * (2.5 + p + 0.4 + r * m * (2 * p + 1.1)) + (up == 1) * nk * r * (2 * p + 4) + (su == 1) * 45 }
           printf "%d", s }')

echo "# gilspy benchmark, $(date -u +%FT%TZ), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# gilspy $(build/cli/gilspy --version 2>/dev/null || echo '?'), $(bpftrace --version 2>/dev/null || echo 'no bpftrace')"
echo "# modes ($n_modes): $MODES"
echo "# compare: Python $PYTHONS x workloads $COMPARE_WORKLOADS x modes, $WINDOW s windows;" \
     "cost: Python $COST_PYTHON, workloads $COST_WORKLOADS, $REPS pairs of $PHASE s phases per mode"
echo "# estimated duration: $((estimate / 60)) min $((estimate % 60)) s (more on a loaded machine)"
start=$SECONDS
cmp_json="" cost_json=""
if ((compare)); then
  echo
  echo "#### 1. Accuracy: gilspy vs uprobes, same process, same window ($WINDOW s), per mode"
  cmp_json="$OUT/compare.json"
  rm -f "$cmp_json"
  "$PY" bench/compare.py --python "$PYTHONS" --workloads "$COMPARE_WORKLOADS" --window "$WINDOW" --modes "$MODES" \
    --brief --json-out "$cmp_json" "${prefix[@]}"
  echo "# compare.py done after $((SECONDS - start)) s"
fi
if ((cost)); then
  echo
  echo "#### 2. Cost (Python $COST_PYTHON), per mode"
  cost_json="$OUT/cost.json"
  rm -f "$cost_json"
  extra=()
  [ "${COST_UPROBES:-0}" = 1 ] || extra+=(--no-uprobes)
  [ "${SUSTAIN:-0}" = 1 ] || extra+=(--no-sustain)
  [ "${FLOOR:-0}" = 1 ] && extra+=(--floor)
  [ "${PERF:-0}" = 1 ] && extra+=(--perf)
  "$PY" bench/cost.py --python "$COST_PYTHON" --workloads "$COST_WORKLOADS" --phase "$PHASE" --reps "$REPS" \
    --modes "$MODES" --json-out "$cost_json" "${prefix[@]}" "${extra[@]}"
fi
echo
echo "#### 3. Cost against accuracy, per mode (bench/table.py; markdown)"
echo
"$PY" bench/table.py --compare "$cmp_json" --cost "$cost_json"
echo
echo "# done in $((SECONDS - start)) s (estimated $estimate s), load average now $(cut -d' ' -f1-3 /proc/loadavg); JSON in $OUT/"
