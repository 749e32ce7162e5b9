#!/usr/bin/env python3
"""How one gilspy (one poll thread) scales with the number of targets: 1, 2, 4, 8, 16 Python processes recorded
by one `gilspy record -p A,B,...`, each process light on CPU but busy with the GIL (two threads that nap 2 ms and
compute ~0.1 ms: a hand-off every few hundred microseconds), so the machine is not saturated by the targets
themselves and what grows is gilspy's work. Per count: gilspy's CPU (% of one core, from its rusage), the
achieved poll rate per target, late polls, and hand-off coverage, with ratios against the 1-target row of the
same run.

usage: sudo bench/scale.py [--python 3.11] [--counts 1,2,4,8,16] [--seconds 4] [--gilspy PATH]
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Gilspy, default_gilspy, die, find_python, snapshot_gilspy  # noqa: E402

WORKLOAD = """
import sys, threading, time
def work():
    while True:
        time.sleep(0.002)
        sum(range(3000))
for _ in range(2):
    threading.Thread(target=work, daemon=True).start()
print("ready", flush=True)
time.sleep(float(sys.argv[1]))
"""


def run(gilspy, python, count, seconds):
    procs = [subprocess.Popen([python, "-c", WORKLOAD, str(seconds + 30)], stdout=subprocess.PIPE)
             for _ in range(count)]
    try:
        for p in procs:
            p.stdout.readline()
        time.sleep(0.3)
        g = Gilspy(gilspy, ",".join(str(p.pid) for p in procs), None, duration=seconds)
        g.wait(seconds + 60)
        if g.rc != 0:
            die(f"gilspy exited {g.rc} for {count} targets: {g.stderr.strip()}")
        wall = (g.t_end - g.t_start) / 1e9
        cpu = (g.rusage.ru_utime + g.rusage.ru_stime) / wall
        summaries = []
        for name in os.listdir(g.dir):
            if name.endswith(".json") and not name.endswith(".trace.json"):
                with open(os.path.join(g.dir, name)) as f:
                    summaries.append(json.load(f)["summary"])
        g.cleanup()
        if len(summaries) != count:
            die(f"{count} targets but {len(summaries)} files")
        mean = lambda key: sum(s[key] for s in summaries) / count  # noqa: E731
        wakeups = summaries[0]["poll_loop_wakeups"]
        return {"targets": count, "gilspy_cpu": cpu, "rate_hz": mean("rate_achieved_hz"),
                "late": summaries[0]["late_polls"] / wakeups if wakeups else 0.0,
                "coverage": mean("coverage")}
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default="3.11")
    ap.add_argument("--counts", default="1,2,4,8,16")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--gilspy", default=default_gilspy())
    a = ap.parse_args()
    python = find_python(a.python)
    if python is None:
        die(f"no Python {a.python} (pyenv)")
    if not a.gilspy:
        die("no gilspy binary: build it, or --gilspy PATH")
    gilspy = snapshot_gilspy(a.gilspy)
    rows = [run(gilspy, python, int(n), a.seconds) for n in a.counts.split(",")]
    base = rows[0]
    print(f"one gilspy, N targets ({os.path.basename(python)}, 2 napping threads each, {a.seconds:g} s, "
          f"{os.cpu_count()} CPUs, default adaptive polling)\n")
    print("| targets | gilspy CPU (% of a core) | x 1 target | polls/s per target | x 1 target | late polls | "
          "coverage |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['targets']} | {100 * r['gilspy_cpu']:.1f} | {r['gilspy_cpu'] / base['gilspy_cpu']:.2f} | "
              f"{r['rate_hz']:.0f} | {r['rate_hz'] / base['rate_hz']:.2f} | {100 * r['late']:.1f} % | "
              f"{100 * r['coverage']:.1f} % |")


if __name__ == "__main__":
    main()
