#!/usr/bin/env python3
"""What tracing costs the target, and what gilspy costs itself.

1. Throughput. One workload process per workload runs the whole time, its main thread printing every worker's
   iteration count every 0.1 s. Phases alternate untraced (U) and traced (B) in one run:
       U, gilspy 1k, U, gilspy 10k, U, gilspy 50k, U, uprobes, U   (x --reps, the B order rotated each rep)
   Each B phase is compared with the mean of the U phases just before and after it (which cancels slow drift
   of the machine); ratios are reported per role (the sum of its threads' iterations/s) as the median over
   the reps with min..max. gilspy's own CPU use (schedstat of all its threads, over the measured part of the
   phase) is reported as % of one core.
2. Sustained rate (--sustain, on by default): gilspy alone at 10k, 20k, 50k, 100k Hz and --busy at 100k, 200k
   on the 4-thread (b) and 16-thread (d) workloads; its summary's achieved rate, late and missed polls, CPU.

3. --floor: a stand-in poller (tools/poller.c) that only wakes up at 10 kHz, and one that also reads every
   thread's /proc/PID/task/TID/syscall: the cost of waking up at all versus the cost of gilspy's work.

usage: cost.py [--python 3.11] [--workloads b,c,d] [--phase 2.5] [--reps 3] [--rates 1000,10000,50000]
               [--no-uprobes] [--no-sustain] [--sustain-only] [--floor] [--prefix 'chrt -f 10'] [--json-out FILE]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import uprobe_gil  # noqa: E402

SETTLE_S = 0.3          # after an untraced phase starts
GILSPY_SETTLE_S = 0.6   # after gilspy starts: its attach (ELF symbols, thread walk) is not what we measure


def khz(rate):
    return f"{rate / 1000:g}k"


def measure(wl, t_a, t_b, per_cpu=False):
    """Per-thread iterations/s between the progress samples nearest [t_a, t_b] (inside it); per_cpu: per
    second of the target's own CPU time instead (insensitive to how much CPU the machine's load leaves it)."""
    a = wl.counts_at(t_a, after=True)
    b = wl.counts_at(t_b, after=False)
    if not a or not b or b[0] <= a[0]:
        return None
    dt = ((b[1] - a[1]) if per_cpu else (b[0] - a[0])) / 1e9
    if dt <= 0:
        return None
    return [(nb - na) / dt for na, nb in zip(a[2:], b[2:])]


def rates(wl, t_a, t_b):
    return {"rates": measure(wl, t_a, t_b), "rates_cpu": measure(wl, t_a, t_b, per_cpu=True)}


def wait_progress(wl, t):
    # The progress printer is a Python thread: it may wait ~tens of ms for the GIL behind CPU-bound threads.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        last = wl.progress[-1][0] if wl.progress else 0
        if last >= t:
            return
        time.sleep(0.02)


def phase_untraced(wl, args):
    t_a = benchlib.monotonic_ns() + int(SETTLE_S * 1e9)
    t_b = t_a + int(args.phase * 1e9)
    time.sleep((t_b - benchlib.monotonic_ns()) / 1e9)
    wait_progress(wl, t_b)
    return rates(wl, t_a, t_b)


def phase_gilspy(wl, args, rate):
    gs = benchlib.Gilspy(args.gilspy, wl.pid, rate, prefix=args.prefix.split())
    t_a = benchlib.monotonic_ns() + int(GILSPY_SETTLE_S * 1e9)
    t_b = t_a + int(args.phase * 1e9)
    time.sleep(max(0.0, (t_a - benchlib.monotonic_ns()) / 1e9))
    c_a, w_a = gs.cpu_ns(), benchlib.monotonic_ns()
    time.sleep(max(0.0, (t_b - benchlib.monotonic_ns()) / 1e9))
    c_b, w_b = gs.cpu_ns(), benchlib.monotonic_ns()
    gs.stop()
    wait_progress(wl, t_b)
    out = {**rates(wl, t_a, t_b), "rc": gs.rc}
    if c_a is not None and c_b is not None:
        out["cpu"] = (c_b - c_a) / (w_b - w_a)
    ru = gs.rusage
    out["cpu_life"] = (ru.ru_utime + ru.ru_stime) / ((gs.t_end - gs.t_start) / 1e9)
    path = gs.raw_path()
    if path:
        s = benchlib.Raw(path).summary
        out.update({k: s.get(k) for k in ("rate_achieved_hz", "late_polls", "missed_polls", "polls", "coverage")})
    else:
        out["error"] = f"gilspy exit {gs.rc}: {gs.stderr.strip()[-300:]}"
    gs.cleanup()
    return out


def build_poller():
    """Compiles bench/tools/poller.c into a temporary directory; None without a C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return None
    d = tempfile.mkdtemp(prefix="gilspy-bench-poller-")
    out = os.path.join(d, "poller")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools", "poller.c")
    if subprocess.run([cc, "-O2", "-o", out, src], capture_output=True).returncode != 0:
        return None
    return out


def phase_poller(wl, args, mode, rate):
    """The stand-in poller (tools/poller.c): what waking up `rate` times a second costs the target by itself."""
    p = subprocess.Popen([args.poller, str(wl.pid), str(rate), str(mode), str(args.gil_addr or 0),
                          str(GILSPY_SETTLE_S + args.phase + 0.1)], stdout=subprocess.PIPE)
    t_a = benchlib.monotonic_ns() + int(GILSPY_SETTLE_S * 1e9)
    t_b = t_a + int(args.phase * 1e9)
    _, _, ru = os.wait4(p.pid, 0)
    wait_progress(wl, t_b)
    return {**rates(wl, t_a, t_b), "cpu": (ru.ru_utime + ru.ru_stime) / (GILSPY_SETTLE_S + args.phase + 0.1)}


def phase_uprobes(wl, args):
    try:
        tr = uprobe_gil.UprobeTracer(wl.pid, 0.3, args.phase).start()
        tr.wait_attached()
        res = tr.result()
    except uprobe_gil.Unavailable as e:
        return {"unavailable": str(e)}
    S, E = res["window"]
    wait_progress(wl, E)
    calls = res["takes_in_window"] + res["drops_in_window"]
    return {**rates(wl, S, E), "probe_hits_per_s": calls / ((E - S) / 1e9)}


def throughput(python, workload, args):
    wl = benchlib.Workload(python, workload, seconds=3600, progress=0.1)
    roles = [t["role"] for t in wl.ready["threads"]]
    conds = [("gilspy", r) for r in args.rates] + ([("uprobes", None)] if not args.no_uprobes else [])
    if args.poller:
        args.gil_addr = benchlib.gil_address(args.gilspy, wl.pid)
        conds += [("floor", (0, args.floor_rate)), ("floor", (2, args.floor_rate))]
    phases = []  # (condition label or "U", result)
    try:
        phases.append(("U", phase_untraced(wl, args)))
        for rep in range(args.reps):
            order = conds[rep % len(conds):] + conds[:rep % len(conds)]
            for kind, rate in order:
                if kind == "gilspy":
                    phases.append((f"gilspy {khz(rate)}", phase_gilspy(wl, args, rate)))
                elif kind == "floor":
                    label = f"wake {khz(rate[1])}" + (" +/proc" if rate[0] == 2 else "")
                    phases.append((label, phase_poller(wl, args, *rate)))
                else:
                    phases.append(("uprobes", phase_uprobes(wl, args)))
                phases.append(("U", phase_untraced(wl, args)))
    finally:
        wl.stop()
    return {"python": wl.ready["python"], "workload": workload, "roles": roles, "phases": phases,
            "reps": args.reps, "phase": args.phase}


def role_sums(rates, roles):
    out = {}
    for r, v in zip(roles, rates):
        out[r] = out.get(r, 0.0) + v
    return out


def analyse(run, key="rates"):
    """Per traced condition: ratio to the neighbouring untraced phases per role, gilspy CPU, rate, late."""
    roles = run["roles"]
    phases = run["phases"]
    by_cond = {}
    for i, (label, res) in enumerate(phases):
        if label == "U" or not res.get(key):
            continue
        base = [r[key] for r in (phases[i - 1][1], phases[i + 1][1] if i + 1 < len(phases) else {}) if r.get(key)]
        if not base:
            continue
        base_roles = [role_sums(b, roles) for b in base]
        mine = role_sums(res[key], roles)
        ent = by_cond.setdefault(label, {"ratios": {}, "cpu": [], "achieved": [], "late": [], "missed": [],
                                         "polls": [], "hits": [], "notes": []})
        for role, v in mine.items():
            b = statistics.mean(br[role] for br in base_roles)
            ent["ratios"].setdefault(role, []).append(v / b if b else float("nan"))
        if "cpu" in res:
            ent["cpu"].append(res["cpu"])
        for k, dst in (("rate_achieved_hz", "achieved"), ("late_polls", "late"), ("missed_polls", "missed"),
                       ("polls", "polls"), ("probe_hits_per_s", "hits")):
            if res.get(k) is not None:
                ent[dst].append(res[k])
        if res.get("error"):
            ent["notes"].append(res["error"])
    base_all = [role_sums(r[key], roles) for lbl, r in phases if lbl == "U" and r.get(key)]
    base_mean = {role: statistics.mean(b[role] for b in base_all) for role in base_all[0]} if base_all else {}
    base_spread = {role: (min(b[role] for b in base_all), max(b[role] for b in base_all)) for role in base_mean}
    return by_cond, base_mean, base_spread


def fmt_ratio(vals):
    if not vals:
        return "-"
    med = statistics.median(vals)
    return f"{100 * (med - 1):+6.2f}% [{100 * (min(vals) - 1):+.1f}..{100 * (max(vals) - 1):+.1f}]"


def print_throughput(run):
    by_cond, base_mean, base_spread = analyse(run, "rates")
    by_cond_cpu, base_cpu, _ = analyse(run, "rates_cpu")
    roles = list(base_mean)
    print(f"\n== Throughput, Python {run['python']}, workload {run['workload']} "
          f"({benchlib.WORKLOAD_NAMES[run['workload']]}), {run['reps']} reps of {run['phase']} s phases")
    print("   untraced, iterations/s summed per role, mean [min..max] over the U phases: " + "; ".join(
        f"{r} {base_mean[r]:.0f} [{base_spread[r][0]:.0f}..{base_spread[r][1]:.0f}]" for r in roles))
    spread = max((base_spread[r][1] / base_spread[r][0] - 1) if base_spread[r][0] else 0 for r in roles)
    if spread > 0.05:
        print(f"   NOISY: untraced phases differ by up to {100 * spread:.0f} % among themselves (machine load?)")
    print("   change vs. the neighbouring untraced phases, median [min..max] over reps; 'wall' = iterations per "
          "second, 'cpu' = per second of the target's own CPU time")
    head = f"   {'CONDITION':<12}"
    for r in roles:
        head += f" {r + ' x' + str(run['roles'].count(r)) + ' wall':>24} {'cpu':>24}"
    print(head + f" {'tracer CPU':>10} {'Hz got':>7} {'late':>7} {'probes/s':>9}")
    for cond, ent in by_cond.items():
        line = f"   {cond:<12}"
        for r in roles:
            line += f" {fmt_ratio(ent['ratios'].get(r, [])):>24}"
            line += f" {fmt_ratio(by_cond_cpu.get(cond, {}).get('ratios', {}).get(r, [])):>24}"
        cpu = f"{100 * statistics.median(ent['cpu']):.1f} %" if ent["cpu"] else "-"
        ach = f"{statistics.median(ent['achieved']):.0f}" if ent["achieved"] else "-"
        late = (f"{100 * sum(ent['late']) / max(1, sum(ent['polls'])):.1f}%" if ent["polls"] else "-")
        hits = f"{statistics.median(ent['hits']):.0f}" if ent["hits"] else "-"
        print(line + f" {cpu:>10} {ach:>7} {late:>7} {hits:>9}")
        for n in ent["notes"][:2]:
            print(f"      note: {n}")
    unavailable = [r.get("unavailable") for lbl, r in run["phases"] if r.get("unavailable")]
    if unavailable:
        print(f"   uprobes unavailable: {unavailable[0]}")


def sustain(python, workload, args):
    wl = benchlib.Workload(python, workload, seconds=3600)
    rows = []
    try:
        for rate, busy in [(10000, False), (20000, False), (50000, False), (100000, False), (100000, True),
                           (200000, True)]:
            gs = benchlib.Gilspy(args.gilspy, wl.pid, rate, busy=busy, prefix=args.prefix.split())
            time.sleep(GILSPY_SETTLE_S)
            c_a, w_a = gs.cpu_ns(), benchlib.monotonic_ns()
            time.sleep(args.sustain_s)
            c_b, w_b = gs.cpu_ns(), benchlib.monotonic_ns()
            gs.stop()
            ru = gs.rusage
            row = {"rate": rate, "busy": busy,
                   "cpu_life": (ru.ru_utime + ru.ru_stime) / ((gs.t_end - gs.t_start) / 1e9),
                   "cpu": (c_b - c_a) / (w_b - w_a) if c_a is not None and c_b is not None else None}
            path = gs.raw_path()
            if path:
                s = benchlib.Raw(path).summary
                row.update({k: s.get(k) for k in ("rate_achieved_hz", "late_polls", "missed_polls", "polls",
                                                   "max_lateness_ns", "coverage", "task_reads")})
            else:
                row["error"] = f"exit {gs.rc}: {gs.stderr.strip()[-200:]}"
            gs.cleanup()
            rows.append(row)
    finally:
        wl.stop()
    return {"python": wl.ready["python"], "workload": workload, "threads": len(wl.ready["threads"]), "rows": rows}


def print_sustain(res):
    print(f"\n== Sustained poll rate, Python {res['python']}, workload {res['workload']} ({res['threads']} threads); "
          f"CPU: gilspy's steady state after attaching, % of one core (in brackets: its whole life, attach included)")
    print(f"   {'ASKED':>9} {'MODE':<6} {'ACHIEVED':>9} {'LATE':>7} {'LATE %':>7} {'MISSED':>7} {'MAX LATE':>9} "
          f"{'CPU':>16} {'COVERAGE':>9}  sustained?")
    best = None
    for r in res["rows"]:
        if r.get("error"):
            print(f"   {r['rate']:>9} {'busy' if r['busy'] else 'sleep':<6} error: {r['error']}")
            continue
        polls = max(1, r["polls"] or 1)
        ok = r["missed_polls"] == 0 and r["late_polls"] <= 0.001 * polls and r["rate_achieved_hz"] >= 0.99 * r["rate"]
        if ok:
            best = max(best or 0, r["rate"])
        print(f"   {r['rate']:>9} {'busy' if r['busy'] else 'sleep':<6} {r['rate_achieved_hz']:>9.0f} {r['late_polls']:>7} "
              f"{100 * r['late_polls'] / polls:>6.2f}% {r['missed_polls']:>7} {r['max_lateness_ns'] / 1e3:>7.0f}µs "
              f"{100 * (r['cpu'] or 0):>7.1f}% [{100 * r['cpu_life']:>5.1f}%] {100 * (r['coverage'] or 0):>8.1f}%  "
              f"{'yes' if ok else 'no'}")
    print(f"   highest rate sustained (no missed polls, ≤0.1 % late, ≥99 % of the asked rate): "
          f"{best if best else 'none'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default="3.11")
    ap.add_argument("--workloads", default="b,c,d")
    ap.add_argument("--phase", type=float, default=2.5, help="seconds measured per phase")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rates", default="1000,10000,50000")
    ap.add_argument("--no-uprobes", action="store_true")
    ap.add_argument("--no-sustain", action="store_true")
    ap.add_argument("--sustain-only", action="store_true")
    ap.add_argument("--sustain-s", type=float, default=2.0, help="seconds measured per rate (after attaching)")
    ap.add_argument("--gilspy", default=benchlib.default_gilspy())
    ap.add_argument("--prefix", default="", help="command words before gilspy, e.g. 'chrt -f 10'")
    ap.add_argument("--floor", action="store_true",
                    help="also run tools/poller.c, a stand-in that only wakes at --floor-rate ('wake'), and one "
                         "that also reads every thread's /proc/PID/task/TID/syscall each time ('wake +/proc')")
    ap.add_argument("--floor-rate", type=int, default=10000)
    ap.add_argument("--json-out")
    args = ap.parse_args()
    args.rates = [int(float(r)) for r in args.rates.split(",") if r]
    args.poller = build_poller() if args.floor else None
    if args.floor and not args.poller:
        print("--floor: no C compiler, the stand-in poller is skipped")
    if not args.gilspy:
        benchlib.die("gilspy not found: build it (cmake --build build) or pass --gilspy")
    args.gilspy = benchlib.snapshot_gilspy(args.gilspy)
    out = {"throughput": [], "sustain": []}
    for spec in args.python.split(","):
        python = benchlib.find_python(spec)
        if not python:
            print(f"\n== Python {spec}: not found, skipped")
            continue
        if not args.sustain_only:
            for w in args.workloads.split(","):
                run = throughput(python, w, args)
                print_throughput(run)
                sys.stdout.flush()
                out["throughput"].append(run)
        if not args.no_sustain:
            for w in ("b", "d"):
                res = sustain(python, w, args)
                print_sustain(res)
                sys.stdout.flush()
                out["sustain"].append(res)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
