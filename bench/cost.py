#!/usr/bin/env python3
"""What tracing costs the target, and what gilspy costs itself.

1. Throughput. One workload process per workload runs the whole time, reporting its progress every 0.1 s
   (gilwork.py: every worker's iterations; server: requests answered under loopback load from loadgen.py).
   Phases alternate untraced (U) and traced in one run:
       U, mode 1, U, mode 2, U, ..., U   (x --reps, the order rotated each rep)
   A mode is any gilspy setting (--modes "label=gilspy args", empty = gilspy's defaults), uprobes, or the
   stand-in poller tools/poller.c ("label=poller -m 0 -s fifo -c other"). Each traced phase is compared with the
   mean of the U phases just before and after it (which cancels slow drift of the machine); ratios are reported
   per role (the sum of its threads' rates) as the median over the reps with min..max. The tracer's own CPU use
   (schedstat of all its threads, over the measured part of the phase) is reported as % of one core.
   --perf adds, per phase, the target's context switches, involuntary ones (sched_switch with the task still
   runnable: preempted) and CPU migrations, and the tracer's context switches (perf stat -I on both).
2. Sustained rate (--sustain, on by default): gilspy alone at 10k, 20k, 50k, 100k Hz and --busy at 100k, 200k
   on the 4-thread (b) and 16-thread (d) workloads; its summary's achieved rate, late and missed polls, CPU.

2b. --gc-cost: what reading the garbage collector's state at each poll (in the GIL's region where it lies in
   the same struct, else one more region of the poll's process_vm_readv; 3.15+: also its statistics) costs the
   sustained rate: gilspy alone at 10 kHz and at --busy 200 kHz on the b and d workloads, with and without the
   hidden --no-gc, alternated (the order swapped every rep) on the same target; per rep the ratio with /
   without, median and range over --reps. At 200 kHz the poller cannot keep up, so its achieved rate is
   what its CPU allows: on a machine shared with other jobs that swings by tens of %, so the table also gives
   polls per CPU-second of the poller (achieved rate / its CPU share), the per-poll cost, which does not.

3. --floor: shorthand for two poller modes: "wake 10k" (only wakes up, CFS, any CPU) and "wake 10k +/proc" (also
   reads every thread's /proc/PID/task/TID/syscall): the cost of waking up at all versus gilspy's work.

usage: cost.py [--python 3.11] [--workloads b,c,server] [--phase 2.5] [--reps 5] [--rates 1000,10000,50000]
               [--modes "default=,r1k=-r 1000,nort=--no-realtime,wake=poller -m 0 -s fifo"]
               [--no-uprobes] [--no-sustain] [--sustain-only] [--floor] [--perf] [--clients 4]
               [--prefix 'chrt -f 10'] [--json-out FILE]
"""
import argparse
import json
import os
import shutil
import signal
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
# Summary fields shown per mode when the binary writes them (newer binaries may add poll_mode, rate_mean_hz).
SUMMARY_KEYS = ("rate_asked_hz", "rate_achieved_hz", "rate_mean_hz", "poll_mode", "poller_scheduling",
                "late_polls", "missed_polls", "polls", "coverage", "task_reads", "poller_cpu")
PERF_EVENTS = ["context-switches", "cpu-migrations", "sched:sched_switch"]
PERF_FILTER = "prev_state == 0"  # on sched_switch: switched out while still runnable = preempted
PERF_NAMES = {"context-switches": "cs", "cpu-migrations": "migr", "sched:sched_switch": "invol"}


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


def not_helpers_ns(wl):
    """The machine's busy CPU time minus the workload's helpers' (the server's load generator): what the
    foreign-load estimate starts from."""
    return benchlib.machine_busy_ns() - wl.helper_cpu_ns()


def foreign_load(wl, busy, t_a, t_b, tracer_cpu=0.0):
    """Cores' worth of CPU used in [t_a, t_b] by neither the target nor the tracer: the other engineers' builds
    and benchmarks on this machine (and this script, perf). busy: (machine busy ns at t_a, at t_b)."""
    a, b = wl.counts_at(t_a, after=True), wl.counts_at(t_b, after=False)
    if not a or not b or b[0] <= a[0]:
        return None
    target = (b[1] - a[1]) / (b[0] - a[0])
    return max(0.0, (busy[1] - busy[0]) / (t_b - t_a) - target - tracer_cpu)


def wait_progress(wl, t):
    # The progress printer is a Python thread: it may wait ~tens of ms for the GIL behind CPU-bound threads.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        last = wl.progress[-1][0] if wl.progress else 0
        if last >= t:
            return
        time.sleep(0.02)


class PerfCounts:
    """perf stat -I 100 on one process, started before the phase settles and stopped after it: the counts of
    the 100 ms intervals that lie inside [t_a, t_b], per second. Interval mode because perf's own start-up
    (tens of ms) would otherwise blur the window's edges. Counts threads created after the start too (perf's
    counters are inherited), which matters for the thread-per-request server."""

    def __init__(self, pid):
        self.t0 = benchlib.monotonic_ns()
        cmd = ["perf", "stat", "-x,", "-I", "100", "-p", str(pid)]
        for e in PERF_EVENTS:
            cmd += ["-e", e] + (["--filter", PERF_FILTER] if e.startswith("sched:") else [])
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def stop(self, t_a, t_b):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None
        lo, hi = (t_a - self.t0) / 1e9, (t_b - self.t0) / 1e9
        sums, times = {}, set()
        for line in err.splitlines():
            f = line.split(",")
            if len(f) < 4:
                continue
            try:
                ts, val = float(f[0]), float(f[1])
            except ValueError:
                continue
            if lo + 0.1 <= ts <= hi:  # an interval [ts - 0.1, ts] entirely inside the window
                name = PERF_NAMES.get(f[3])
                if name:
                    sums[name] = sums.get(name, 0.0) + val
                    times.add(ts)
        if not times:
            return None
        secs = 0.1 * len(times)
        return {k: v / secs for k, v in sums.items()}


def perf_start(args, pid):
    return PerfCounts(pid) if args.perf and pid else None


def perf_stop(pc, t_a, t_b):
    return pc.stop(t_a, t_b) if pc else None


def phase_untraced(wl, args):
    pc = perf_start(args, wl.pid)
    t_a = benchlib.monotonic_ns() + int(SETTLE_S * 1e9)
    t_b = t_a + int(args.phase * 1e9)
    time.sleep(max(0.0, (t_a - benchlib.monotonic_ns()) / 1e9))
    busy_a = not_helpers_ns(wl)
    time.sleep(max(0.0, (t_b - benchlib.monotonic_ns()) / 1e9))
    busy_b = not_helpers_ns(wl)
    wait_progress(wl, t_b)
    return {**rates(wl, t_a, t_b), "perf": perf_stop(pc, t_a, t_b),
            "foreign": foreign_load(wl, (busy_a, busy_b), t_a, t_b)}


def timed_tracer(wl, args, pid, cpu_of):
    """Waits out a traced phase: settle, then the measured window [t_a, t_b] with the tracer's CPU (cpu_of())
    and, with --perf, the target's and the tracer's context switches measured over it."""
    pc, pc_tracer = perf_start(args, wl.pid), perf_start(args, pid)
    t_a = benchlib.monotonic_ns() + int(GILSPY_SETTLE_S * 1e9)
    t_b = t_a + int(args.phase * 1e9)
    time.sleep(max(0.0, (t_a - benchlib.monotonic_ns()) / 1e9))
    c_a, w_a, busy_a = cpu_of(), benchlib.monotonic_ns(), not_helpers_ns(wl)
    time.sleep(max(0.0, (t_b - benchlib.monotonic_ns()) / 1e9))
    c_b, w_b, busy_b = cpu_of(), benchlib.monotonic_ns(), not_helpers_ns(wl)
    out = {"t_a": t_a, "t_b": t_b, "busy": (busy_a, busy_b)}
    if c_a is not None and c_b is not None:
        out["cpu"] = (c_b - c_a) / (w_b - w_a)
    out["perf"] = perf_stop(pc, t_a, t_b)
    out["perf_tracer"] = perf_stop(pc_tracer, t_a, t_b)
    return out


def phase_gilspy(wl, args, extra):
    binary = args.gilspy
    if extra[:1] and extra[0].startswith("@"):  # another build, side by side with --gilspy's in one run
        binary, extra = benchlib.snapshot_gilspy(extra[0][1:]), extra[1:]
    gs = benchlib.Gilspy(binary, wl.pid, None, extra=extra, prefix=args.prefix.split())
    w = timed_tracer(wl, args, gs.proc.pid, gs.cpu_ns)
    gs.stop()
    wait_progress(wl, w["t_b"])
    out = {**rates(wl, w["t_a"], w["t_b"]), **w, "rc": gs.rc,
           "foreign": foreign_load(wl, w["busy"], w["t_a"], w["t_b"], w.get("cpu", 0.0))}
    ru = gs.rusage  # None when gilspy exited at once (refused its options): its raw file says why below
    out["cpu_life"] = (ru.ru_utime + ru.ru_stime) / ((gs.t_end - gs.t_start) / 1e9) if ru else None
    path = gs.raw_path()
    if path:
        s = benchlib.Raw(path).summary
        out.update({k: s[k] for k in SUMMARY_KEYS if k in s})
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


def phase_poller(wl, args, words):
    """The stand-in poller (tools/poller.c) with its own options (rate, work per poll, scheduling, CPU)."""
    secs = GILSPY_SETTLE_S + args.phase + 0.3
    p = subprocess.Popen([args.poller, "-p", str(wl.pid), "-a", str(args.gil_addr or 0), "-d", str(secs), *words],
                         stdout=subprocess.PIPE, text=True)
    w = timed_tracer(wl, args, p.pid, lambda: benchlib.cpu_ns(p.pid))
    out_text = p.communicate()[0]
    wait_progress(wl, w["t_b"])
    out = {**rates(wl, w["t_a"], w["t_b"]), **w,
           "foreign": foreign_load(wl, w["busy"], w["t_a"], w["t_b"], w.get("cpu", 0.0))}
    f = out_text.split()
    stats = dict(zip(f[0::2], f[1::2]))
    if "polls" in stats:
        out["rate_achieved_hz"] = int(stats["polls"]) / secs
        out["polls"] = int(stats["polls"])
        out["late_polls"] = int(stats.get("late", 0))
    return out


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


def conditions(args):
    conds = [(f"gilspy {khz(r)}", "gilspy", ["-r", str(r)]) for r in args.rates]
    conds += args.modes
    if not args.no_uprobes:
        conds.append(("uprobes", "uprobes", []))
    if args.floor:
        r = str(args.floor_rate)
        conds += [(f"wake {khz(args.floor_rate)}", "poller", ["-m", "0", "-r", r]),
                  (f"wake {khz(args.floor_rate)} +/proc", "poller", ["-m", "2", "-r", r])]
    if not args.poller:
        conds = [c for c in conds if c[1] != "poller"]
    return conds


def throughput(python, workload, args):
    wl = benchlib.start_workload(python, workload, seconds=3600, progress=0.1, clients=args.clients)
    roles = [t["role"] for t in wl.ready["threads"]]
    conds = conditions(args)
    if args.poller:
        args.gil_addr = benchlib.gil_address(args.gilspy, wl.pid)
    phases = []  # (condition label or "U", result)
    try:
        phases.append(("U", phase_untraced(wl, args)))
        for rep in range(args.reps):
            order = conds[rep % len(conds):] + conds[:rep % len(conds)]
            for label, kind, words in order:
                if kind == "gilspy":
                    phases.append((label, phase_gilspy(wl, args, words)))
                elif kind == "poller":
                    phases.append((label, phase_poller(wl, args, words)))
                else:
                    phases.append((label, phase_uprobes(wl, args)))
                phases.append(("U", phase_untraced(wl, args)))
    finally:
        wl.stop()
    return {"python": wl.ready["python"], "workload": workload, "roles": roles, "phases": phases,
            "reps": args.reps, "phase": args.phase, "modes": [list(c) for c in conds],
            "load": getattr(wl, "load_result", None)}


def role_sums(rates, roles):
    out = {}
    for r, v in zip(roles, rates):
        out[r] = out.get(r, 0.0) + v
    return out


def analyse(run, key="rates", max_foreign=None):
    """Per traced condition: ratio to the neighbouring untraced phases per role, and the condition's other
    figures (tracer CPU, summary fields, perf counts) as lists over the reps."""
    roles = run["roles"]
    phases = run["phases"]
    by_cond = {}
    skipped = {}  # label -> pairs left out for foreign load
    for i, (label, res) in enumerate(phases):
        if label == "U" or not res.get(key):
            continue
        neigh = [phases[i - 1][1], phases[i + 1][1] if i + 1 < len(phases) else {}]
        base = [r[key] for r in neigh if r.get(key)]
        if not base:
            continue
        foreign = max((r.get("foreign") or 0.0) for r in neigh + [res])
        if max_foreign is not None and foreign > max_foreign:
            skipped[label] = skipped.get(label, 0) + 1
            continue
        base_roles = [role_sums(b, roles) for b in base]
        mine = role_sums(res[key], roles)
        ent = by_cond.setdefault(label, {"ratios": {}, "cpu": [], "hits": [], "notes": [], "summary": {},
                                         "perf": {}, "perf_tracer": {}, "foreign": []})
        ent["foreign"].append(foreign)
        for role, v in mine.items():
            b = statistics.mean(br[role] for br in base_roles)
            ent["ratios"].setdefault(role, []).append(v / b if b else float("nan"))
        if "cpu" in res:
            ent["cpu"].append(res["cpu"])
        if res.get("probe_hits_per_s") is not None:
            ent["hits"].append(res["probe_hits_per_s"])
        for k in SUMMARY_KEYS:
            if res.get(k) is not None:
                ent["summary"].setdefault(k, []).append(res[k])
        for src in ("perf", "perf_tracer"):
            for k, v in (res.get(src) or {}).items():
                ent[src].setdefault(k, []).append(v)
        if res.get("error"):
            ent["notes"].append(res["error"])
    base_all = [role_sums(r[key], roles) for lbl, r in phases if lbl == "U" and r.get(key)]
    base_mean = {role: statistics.mean(b[role] for b in base_all) for role in base_all[0]} if base_all else {}
    base_spread = {role: (min(b[role] for b in base_all), max(b[role] for b in base_all)) for role in base_mean}
    # Drift: how much consecutive untraced phases differ (what the neighbour-mean baseline must absorb).
    steps = {role: [abs(b2[role] / b1[role] - 1) for b1, b2 in zip(base_all, base_all[1:]) if b1[role]]
             for role in base_mean}
    base_perf = {}
    for lbl, r in phases:
        if lbl == "U":
            for k, v in (r.get("perf") or {}).items():
                base_perf.setdefault(k, []).append(v)
    for label, n in skipped.items():
        by_cond.setdefault(label, {"ratios": {}, "cpu": [], "hits": [], "notes": [], "summary": {}, "perf": {},
                                   "perf_tracer": {}, "foreign": []})["notes"].append(
            f"{n} pair(s) left out: foreign load above {max_foreign:.2f} core")
    base_foreign = [r["foreign"] for lbl, r in phases if lbl == "U" and r.get("foreign") is not None]
    return by_cond, base_mean, base_spread, steps, base_perf, base_foreign


def fmt_ratio(vals):
    if not vals:
        return "-"
    med = statistics.median(vals)
    return f"{100 * (med - 1):+6.2f}% [{100 * (min(vals) - 1):+.1f}..{100 * (max(vals) - 1):+.1f}]"


def med(vals, fmt="{:.0f}", scale=1.0):
    return fmt.format(scale * statistics.median(vals)) if vals else "-"


def print_throughput(run, max_foreign=None):
    by_cond, base_mean, base_spread, steps, base_perf, base_foreign = analyse(run, "rates", max_foreign)
    by_cond_cpu = analyse(run, "rates_cpu", max_foreign)[0]
    roles = list(base_mean)
    unit = "requests/s" if run["workload"] == "server" else "iterations/s"
    print(f"\n== Throughput, Python {run['python']}, workload {run['workload']} "
          f"({benchlib.WORKLOAD_NAMES[run['workload']]}), {run['reps']} reps of {run['phase']} s phases")
    print(f"   untraced, {unit} summed per role, mean [min..max] over the U phases: " + "; ".join(
        f"{r} {base_mean[r]:.0f} [{base_spread[r][0]:.0f}..{base_spread[r][1]:.0f}]" for r in roles))
    spread = max((base_spread[r][1] / base_spread[r][0] - 1) if base_spread[r][0] else 0 for r in roles)
    step = max((statistics.median(steps[r]) if steps[r] else 0) for r in roles)
    step_max = max((max(steps[r]) if steps[r] else 0) for r in roles)
    print(f"   untraced steadiness: spread (max/min - 1) {100 * spread:.1f} %; consecutive U phases differ by "
          f"median {100 * step:.1f} %, max {100 * step_max:.1f} %" + ("   NOISY (machine load?)" if spread > 0.05 else ""))
    if base_foreign:
        print(f"   foreign load (CPU used by neither target nor tracer: other jobs on the machine) in U phases: "
              f"median {statistics.median(base_foreign):.2f} core, max {max(base_foreign):.2f}")
    if base_perf:
        print("   untraced, target per s: " + ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in base_perf.items()))
    if run.get("load"):
        ld = run["load"]
        print(f"   load generator: {ld['clients']} clients, {ld['completed']} requests completed, {ld['errors']} errors")
    print("   change vs. the neighbouring untraced phases, median [min..max] over reps; 'wall' = per second, "
          "'cpu' = per second of the target's own CPU time; tracer CPU in % of one core; µs/poll = its CPU per poll")
    have_perf = any(e["perf"] for e in by_cond.values())
    head = f"   {'CONDITION':<16}"
    for r in roles:
        head += f" {r + ' x' + str(run['roles'].count(r)) + ' wall':>24} {'cpu':>24}"
    head += f" {'foreign':>7} {'tracer CPU':>10} {'µs/poll':>7} {'Hz got':>7} {'Hz mean':>7} {'late':>6} {'probes/s':>8}"
    if have_perf:
        head += f" {'cs/s':>6} {'invol/s':>7} {'migr/s':>6} {'tracer cs/s':>11}"
    print(head)
    extras = []
    for cond, ent in by_cond.items():
        line = f"   {cond:<16}"
        for r in roles:
            line += f" {fmt_ratio(ent['ratios'].get(r, [])):>24}"
            line += f" {fmt_ratio(by_cond_cpu.get(cond, {}).get('ratios', {}).get(r, [])):>24}"
        s = ent["summary"]
        cpu = med(ent["cpu"], "{:.1f} %", 100)
        per_poll = "-"
        if ent["cpu"] and s.get("rate_achieved_hz"):
            per_poll = f"{1e6 * statistics.median(ent['cpu']) / max(1.0, statistics.median(s['rate_achieved_hz'])):.1f}"
        late = f"{100 * sum(s['late_polls']) / max(1, sum(s['polls'])):.1f}%" if s.get("polls") and s.get("late_polls") else "-"
        line += (f" {med(ent['foreign'], '{:.2f}'):>7} {cpu:>10} {per_poll:>7} {med(s.get('rate_achieved_hz')):>7} {med(s.get('rate_mean_hz')):>7}"
                 f" {late:>6} {med(ent['hits']):>8}")
        if have_perf:
            p, pt = ent["perf"], ent["perf_tracer"]
            line += f" {med(p.get('cs')):>6} {med(p.get('invol')):>7} {med(p.get('migr')):>6} {med(pt.get('cs')):>11}"
        print(line)
        for k in ("poll_mode", "poller_scheduling"):
            if s.get(k):
                extras.append(f"{cond}: {k} {'/'.join(sorted(set(map(str, s[k]))))}")
        for n in ent["notes"][:2]:
            print(f"      note: {n}")
    for e in extras:
        print(f"      {e}")
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


GC_COST_RATES = [(None, False), (10000, False), (200000, True)]  # None: the default (adaptive, CPU budget)


def gc_cost(python, workload, args):
    """Sustained rate and CPU with the GC state read at each poll and without (--no-gc), alternated."""
    wl = benchlib.Workload(python, workload, seconds=3600)
    rows = []
    try:
        for rate, busy in GC_COST_RATES:
            reps = []
            for rep in range(args.reps):
                pair = {}
                for variant in (("gc", "no-gc") if rep % 2 == 0 else ("no-gc", "gc")):
                    extra = ["--no-gc"] if variant == "no-gc" else []
                    gs = benchlib.Gilspy(args.gilspy, wl.pid, rate, busy=busy, extra=extra, prefix=args.prefix.split())
                    time.sleep(GILSPY_SETTLE_S)
                    c_a, w_a = gs.cpu_ns(), benchlib.monotonic_ns()
                    time.sleep(args.sustain_s)
                    c_b, w_b = gs.cpu_ns(), benchlib.monotonic_ns()
                    gs.stop()
                    path = gs.raw_path()
                    s = benchlib.Raw(path).summary if path else {}
                    pair[variant] = {"rate": s.get("rate_achieved_hz"), "missed": s.get("missed_polls"),
                                     "cpu": (c_b - c_a) / (w_b - w_a) if c_a is not None and c_b is not None else None,
                                     "gc_read": s.get("gc") is not None}
                    gs.cleanup()
                reps.append(pair)
            rows.append({"rate": rate, "busy": busy, "reps": reps})
    finally:
        wl.stop()
    return {"python": wl.ready["python"], "workload": workload, "threads": len(wl.ready["threads"]), "rows": rows}


def print_gc_cost(res):
    print(f"\n== Reading the GC state at each poll, Python {res['python']}, workload {res['workload']} "
          f"({res['threads']} threads): achieved rate with / without (--no-gc), {len(res['rows'][0]['reps'])} "
          f"alternated pairs")
    print(f"   {'ASKED':>9} {'MODE':<6} {'WITH GC':>9} {'WITHOUT':>9} {'RATIO (median, min..max)':>28} "
          f"{'CPU WITH':>9} {'CPU W/O':>8}   POLLS PER CPU-SECOND WITH / WITHOUT, RATIO (median, min..max)")
    for r in res["rows"]:
        ok = [p for p in r["reps"] if p["gc"]["rate"] and p["no-gc"]["rate"]]
        if not ok:
            print(f"   {r['rate']:>9} no complete pair")
            continue
        ratios = sorted(p["gc"]["rate"] / p["no-gc"]["rate"] for p in ok)
        med = statistics.median
        print(f"   {r['rate'] or 'adaptive':>9} {'busy' if r['busy'] else 'sleep':<6} "
              f"{med([p['gc']['rate'] for p in ok]):>9.0f} "
              f"{med([p['no-gc']['rate'] for p in ok]):>9.0f} {100 * (med(ratios) - 1):>+9.2f} % "
              f"[{100 * (ratios[0] - 1):+.2f}..{100 * (ratios[-1] - 1):+.2f}] "
              f"{100 * med([p['gc']['cpu'] or 0 for p in ok]):>8.1f}% {100 * med([p['no-gc']['cpu'] or 0 for p in ok]):>7.1f}%"
              f"{capacity(ok)}"
              f"{'' if all(p['gc']['gc_read'] for p in ok) else '   (GC state NOT read with gc: see the summary)'}")


def capacity(pairs):
    """Polls per CPU-second of the poller, with and without, and the per-rep ratio: the per-poll cost."""
    both = [p for p in pairs if p["gc"]["cpu"] and p["no-gc"]["cpu"]]
    if not both:
        return ""
    per = lambda v: v["rate"] / v["cpu"]  # noqa: E731
    ratios = sorted(per(p["gc"]) / per(p["no-gc"]) for p in both)
    med = statistics.median
    return (f"   {med([per(p['gc']) for p in both]) / 1e3:>7.1f}k / {med([per(p['no-gc']) for p in both]) / 1e3:.1f}k, "
            f"{100 * (med(ratios) - 1):+.2f} % [{100 * (ratios[0] - 1):+.2f}..{100 * (ratios[-1] - 1):+.2f}]")


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
    ap.add_argument("--workloads", default="b,c,d", help="of a, b, c, d (gilwork.py) and server")
    ap.add_argument("--phase", type=float, default=2.5, help="seconds measured per phase")
    ap.add_argument("--reps", type=int, default=5, help="traced/untraced pairs per mode (the median is of these)")
    ap.add_argument("--rates", default=None,
                    help="gilspy -r values, each a mode 'gilspy Nk' (default 1000,10000,50000 without --modes)")
    ap.add_argument("--modes", default="",
                    help="'label=ARGS,...': ARGS are gilspy record options (empty: gilspy's defaults), or "
                         "'poller OPTIONS' (tools/poller.c: -m 0-3 -r HZ -s normal|fifo -c free|N|other), or "
                         "'uprobes'; gilspy ARGS starting with @PATH run the gilspy at PATH (two builds compared "
                         "in one run: 'old=@/tmp/gilspy-old,new=')")
    ap.add_argument("--no-uprobes", action="store_true")
    ap.add_argument("--no-sustain", action="store_true")
    ap.add_argument("--sustain-only", action="store_true")
    ap.add_argument("--gc-cost", action="store_true",
                    help="only the cost of reading the GC state: sustained rate with and without --no-gc")
    ap.add_argument("--sustain-s", type=float, default=2.0, help="seconds measured per rate (after attaching)")
    ap.add_argument("--gilspy", default=benchlib.default_gilspy())
    ap.add_argument("--prefix", default="", help="command words before gilspy, e.g. 'chrt -f 10'")
    ap.add_argument("--floor", action="store_true",
                    help="also run tools/poller.c, a stand-in that only wakes at --floor-rate ('wake'), and one "
                         "that also reads every thread's /proc/PID/task/TID/syscall each time ('wake +/proc')")
    ap.add_argument("--floor-rate", type=int, default=10000)
    ap.add_argument("--perf", action="store_true",
                    help="count the target's (and the tracer's) context switches and migrations per phase")
    ap.add_argument("--max-foreign", type=float, default=None,
                    help="leave out pairs in which other jobs used more than this many cores (e.g. 0.15)")
    ap.add_argument("--clients", type=int, default=4, help="server workload: load generator processes")
    ap.add_argument("--json-out")
    ap.add_argument("--report", metavar="JSON", help="print the tables of an earlier --json-out file, measure nothing")
    args = ap.parse_args()
    benchlib.stop_on_sigterm()
    if args.report:
        with open(args.report) as f:
            for run in json.load(f)["throughput"]:
                print_throughput(run, args.max_foreign)
        return 0
    args.modes = benchlib.parse_modes(args.modes)
    if args.rates is None:
        args.rates = "" if args.modes else "1000,10000,50000"
    args.rates = [int(float(r)) for r in args.rates.split(",") if r]
    need_poller = args.floor or any(kind == "poller" for _, kind, _ in args.modes)
    args.poller = build_poller() if need_poller else None
    if need_poller and not args.poller:
        print("no C compiler: the stand-in poller's modes are skipped")
    if args.perf and not shutil.which("perf"):
        print("--perf: no perf (apt-get install linux-perf): context switches are not counted")
        args.perf = False
    if not args.gilspy:
        benchlib.die("gilspy not found: build it (cmake --build build) or pass --gilspy")
    args.gilspy = benchlib.snapshot_gilspy(args.gilspy)
    out = {"throughput": [], "sustain": []}
    for spec in args.python.split(","):
        python = benchlib.find_python(spec)
        if not python:
            print(f"\n== Python {spec}: not found, skipped")
            continue
        if args.gc_cost:
            for w in ("b", "d"):
                res = gc_cost(python, w, args)
                print_gc_cost(res)
                sys.stdout.flush()
                out.setdefault("gc_cost", []).append(res)
            continue
        if not args.sustain_only:
            for w in args.workloads.split(","):
                run = throughput(python, w, args)
                print_throughput(run, args.max_foreign)
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
