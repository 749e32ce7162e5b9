#!/usr/bin/env python3
"""`gilspy convert` at scale: MB/s of raw input and of trace output, and peak memory, against a baseline that
loads the whole raw file as JSON, sorts its events by time and dumps them (Python's json, what a script that
"just converts it" does), both in the same run on the same synthetic recordings.

The recordings are what a long, busy recording of a many-threaded process looks like: N threads (default 64)
handing the GIL round: each hand-off ends a hold of one thread and a wait of the next, a waiter count now and
then, a stats line per second of recording. They are written in gilspy's raw format (docs/raw-format.md) by
this script, at two sizes (SIZE and 2 x SIZE MB) to show that convert's memory does not grow with the events.

usage: bench/convert_bench.py [--mb 100] [--threads 64] [--gilspy build/cli/gilspy] [--no-baseline] [--keep]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import default_gilspy, die  # noqa: E402

HEADER = ('{"format":"gilspy-raw","format_version":2,\n"meta":{"build":"shared","clock":{"monotonic_ns":1000,'
          '"realtime_ns":1719853884000000000},"command":"python3 train.py","free_threaded":false,'
          '"gil_addr":140000000000,"gilspy_version":"0.1.0","hostname":"bench","pid":%d,"python_binary":'
          '"/usr/lib/libpython3.11.so.1.0","python_version":"3.11.7","rank":0,"rate_hz":10000.0,'
          '"switch_interval_us":5000},\n"events":[')


def write_recording(path, threads, target_bytes):
    """Round-robin hand-offs between `threads` threads of pid 4000 until the file has about target_bytes."""
    pid = 4000
    tids = [pid] + [pid + 100 + i for i in range(threads - 1)]
    lines = [HEADER % pid]
    first = True
    size = len(lines[0])
    t = 0
    out = open(path, "w")

    def put(line):
        nonlocal first, size
        lines.append(("\n" if first else ",\n") + line)
        first = False
        size += len(line) + 2

    for i, tid in enumerate(tids):
        put(json.dumps(["T", tid, i * 1000, "MainThread" if tid == pid else f"thread {tid} (worker)",
                        140000000000 + 4096 * i], separators=(",", ":")))
    t = 100_000
    k = 0
    wait_start = {tid: t for tid in tids}
    next_stats = 1_000_000_000
    polls = 0
    while size < target_bytes:
        holder = tids[k % len(tids)]
        nxt = tids[(k + 1) % len(tids)]
        hold = 4_000_000 + (k * 7919) % 1_500_000  # 4-5.5 ms
        put(f'["H",{holder},{t},{hold}]')
        t += hold
        put(f'["W",{nxt},{wait_start[nxt]},{t - wait_start[nxt]}]')
        wait_start[holder] = t + 20_000
        if k % 16 == 0:
            put(f'["N",{t},{len(tids) - 1 - (k // 16) % 3}]')
        polls += 20
        if t >= next_stats:
            put(f'["S",{t},{polls},{polls // 50},{polls // 1000},{k},{k + k // 20}]')
            next_stats += 1_000_000_000
        k += 1
        if len(lines) > 10000:
            out.write("".join(lines))
            lines.clear()
    for tid in tids:
        put(f'["E",{tid},{t}]')
    put('["F"]')
    summary = {"duration_ns": t, "stop_reason": "duration", "polls": polls, "threads": []}
    lines.append("],\n\"summary\":" + json.dumps(summary, separators=(",", ":")) + "}\n")
    out.write("".join(lines))
    out.close()
    return k


BASELINE = r"""
import json, sys
with open(sys.argv[1]) as f:
    doc = json.load(f)
events = [e for e in doc["events"] if e[0] in ("H", "W")]
events.sort(key=lambda e: e[2])
out = [{"ph": "X", "name": "hold_gil" if e[0] == "H" else "take_gil", "pid": doc["meta"]["pid"], "tid": e[1],
        "ts": e[2] / 1000, "dur": e[3] / 1000} for e in events]
with open(sys.argv[2], "w") as f:
    json.dump({"traceEvents": out}, f)
"""


def timed(cmd):
    """Runs cmd; returns (wall seconds, CPU seconds, peak RSS in MiB) of that process alone."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    err = p.stderr.read().decode()
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        die(f"{' '.join(cmd)} failed: {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=100, help="size of the smaller recording, MB")
    ap.add_argument("--threads", type=int, default=64)
    ap.add_argument("--gilspy", default=default_gilspy())
    ap.add_argument("--repeat", type=int, default=3, help="convert runs per size (the fastest is shown)")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--keep", action="store_true", help="leave the files in the temporary folder")
    a = ap.parse_args()
    if not a.gilspy:
        die("no gilspy binary: build it, or --gilspy PATH")
    d = tempfile.mkdtemp(prefix="gilspy-convert-bench-")
    rows = []
    for scale in (1, 2):
        raw = os.path.join(d, f"GIL_4000_rank_0.x{scale}.json")
        handoffs = write_recording(raw, a.threads, int(a.mb * scale * 1e6))
        raw_mb = os.path.getsize(raw) / 1e6
        trace = os.path.join(d, f"x{scale}.trace.json")
        best = None
        for _ in range(a.repeat):
            run = timed([a.gilspy, "convert", "-i", raw, "-o", trace])
            best = run if best is None or run[0] < best[0] else best
        out_mb = os.path.getsize(trace) / 1e6
        rows.append(("gilspy convert", raw_mb, handoffs, *best[:2], out_mb, best[2]))
        if not a.no_baseline and scale == 1:
            base_out = os.path.join(d, "baseline.json")
            wall, cpu, rss = timed([sys.executable, "-c", BASELINE, raw, base_out])
            rows.append(("baseline: json.load, sort, json.dump", raw_mb, handoffs, wall, cpu,
                         os.path.getsize(base_out) / 1e6, rss))
            os.unlink(base_out)
        if not a.keep:
            os.unlink(trace)
            os.unlink(raw)
    print(f"convert of synthetic recordings ({a.threads} threads, round-robin hand-offs; {os.cpu_count()} CPUs; "
          f"best of {a.repeat} for gilspy)\n")
    print("| what | raw MB | hand-offs | wall s | CPU s | raw MB/s in (wall, CPU) | trace MB | MB/s out (wall) | "
          "peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for what, raw_mb, handoffs, wall, cpu, out_mb, rss in rows:
        print(f"| {what} | {raw_mb:.0f} | {handoffs} | {wall:.2f} | {cpu:.2f} | {raw_mb / wall:.0f}, "
              f"{raw_mb / cpu:.0f} | {out_mb:.0f} | {out_mb / wall:.0f} | {rss:.0f} |")
    g = [r for r in rows if r[0] == "gilspy convert"]
    b = [r for r in rows if r[0] != "gilspy convert"]
    if b:
        print(f"\ngilspy convert vs baseline at {g[0][1]:.0f} MB: {b[0][3] / g[0][3]:.1f}x faster (wall), "
              f"{b[0][4] / g[0][4]:.1f}x less CPU, {b[0][6] / g[0][6]:.1f}x less memory")
    print(f"peak RSS at 2x the events: {g[1][6] / g[0][6]:.2f}x (bounded by threads, not events: ~1)")
    if a.keep:
        print(f"files in {d}")
    else:
        os.rmdir(d)


if __name__ == "__main__":
    main()
