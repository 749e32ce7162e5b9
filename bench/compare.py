#!/usr/bin/env python3
"""gilspy against uprobe ground truth: the same process, the same run, the same window.

For each interpreter (pyenv 3.8-3.13 by default) and each workload (bench/workloads/gilwork.py: a, b, c, d):
start the workload, start `gilspy record -p PID --no-trace` and bpftrace (bench/uprobe_gil.py) together; the
window [S, E] starts --lead seconds after bpftrace has attached every probe and lasts --window seconds.
gilspy's H / W intervals (raw ts + meta.clock.monotonic_ns = CLOCK_MONOTONIC) are clipped to the same window.
Per thread: hold share and wait share (of the window) from both, their difference in percentage points, hold
counts; per run: GIL busy share both ways, gilspy's coverage (hand-offs seen / total, whole recording), the
uprobe side's hand-offs (switches) in the window, gilspy's achieved rate and late polls.

With --modes "label=gilspy args,..." each (interpreter, workload) is run once per mode (a new workload process
each time); every row carries its mode, and the summary has a MODE column. bench/table.py puts the modes' worst
errors next to their cost (cost.py --modes with the same labels).

usage: compare.py [--python 3.8,3.9,...|PATH] [--workloads a,b,c,d] [--window 3]
                  [--rate 10000 [--busy] | --modes "default=,r1k=-r 1000,busy=--busy -r 100000"]
                  [--json-out FILE] [--brief] [--check-threads]
--check-threads (the ctest smoke test): exit 1 unless both sides saw the same set of threads; 77 when
uprobes cannot attach. No timing is asserted.
"""
import argparse
import json
import os
import shlex
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import exact_truth  # noqa: E402
import uprobe_gil  # noqa: E402

DEFAULT_PYTHONS = "3.8,3.9,3.10,3.11,3.12,3.13"
HOLD_TARGET_PP = 1.0
WAIT_TARGET_PP = 3.0


def lock_address(args, pid):
    if args.truth != "lock":
        return None
    addr = benchlib.gil_address(args.gilspy, pid)
    if addr is None:
        raise uprobe_gil.Unavailable("--truth lock: `gilspy info` could not tell the GIL's address")
    return addr


def calibrate(python, args):
    """The probes' own cost, in ns, on a lone os.write thread (never contended: natively ~0.1 µs inside
    take_gil). Returns {"wait_ns": the mean time inside take_gil, which the uprobes count as waiting,
    "take_ns": of it, the part after locked = 1 (the uretprobe's trap), "drop_ns": the drop_gil entry handler's
    time after its timestamp, before locked = 0}; take_ns and drop_ns only with the function boundaries as
    truth, where `gilspy info` tells the GIL's address (uprobe_gil.program()'s cost_probe). gilspy, which reads
    the lock word, sees take_ns and drop_ns as holding; on a thread that takes the GIL thousands of times a
    second that is points of its time. None when uprobes are unavailable."""
    wl = benchlib.Workload(python, "cal", seconds=600)
    if args.truth == "exact":
        try:
            return exact_truth.calibrate(args.gilspy, wl.pid, wl.ready["threads"][0]["tid"])
        finally:
            wl.stop()
    try:
        cost_addr = benchlib.gil_address(args.gilspy, wl.pid) if args.truth == "func" else None
        tr = uprobe_gil.UprobeTracer(wl.pid, 0.2, 0.6, gil_addr=lock_address(args, wl.pid),
                                     cost_gil_addr=cost_addr).start()
        tr.wait_attached()
        res = tr.result()
    except uprobe_gil.Unavailable:
        return None
    finally:
        wl.stop()
    t = res["threads"].get(wl.ready["threads"][0]["tid"])
    if not t or not t["waits"]:
        return None
    cost = {"wait_ns": t["wait_ns"] / t["waits"]}
    if "probe_cost" in res:
        cost["take_ns"] = min(cost["wait_ns"], res["probe_cost"]["take_ns"])
        cost["drop_ns"] = res["probe_cost"]["drop_ns"]
    return cost


def run_one(python, workload, mode, args):
    """One workload process, gilspy with the mode's options (label, words) and the uprobes on it."""
    label, words = mode
    wl = benchlib.Workload(python, workload, seconds=600)
    gs = None
    ex = None
    tracer = None
    row = {"python": wl.ready["python"], "python_path": python, "workload": workload, "pid": wl.pid,
           "mode": label, "mode_args": shlex.join(words), "truth": args.truth}
    try:
        binary = args.gilspy
        if words[:1] and words[0].startswith("@"):  # another build, side by side with --gilspy's (as cost.py)
            binary, words = benchlib.snapshot_gilspy(words[0][1:]), words[1:]
        gs = benchlib.Gilspy(binary, wl.pid, None, extra=words, prefix=args.prefix.split())
        if args.truth == "exact":
            ex = exact_truth.start(args.gilspy, wl.pid)
        if args.truth != "exact" or args.referee:
            try:
                tracer = uprobe_gil.UprobeTracer(wl.pid, args.lead, args.window, events=args.confusion,
                                                 gil_addr=lock_address(args, wl.pid)).start()
                tracer.wait_attached()
                S, E = tracer.start_ns, tracer.end_ns
            except uprobe_gil.Unavailable as e:
                row["uprobe_unavailable"] = str(e)
                tracer = None
                S = benchlib.monotonic_ns() + int(args.lead * 1e9)
                E = S + int(args.window * 1e9)
        else:
            S, E = exact_truth.window_after_attach(args.lead, args.window)
        row["window"] = [S, E]
        up = None
        if tracer:
            try:
                up = tracer.result()
            except uprobe_gil.Unavailable as e:
                row["uprobe_unavailable"] = str(e)
        else:
            exact_truth.wait_until(E)
        gs.stop()
        if ex:
            ex.stop()
        if benchlib.monotonic_ns() < E:
            row["error"] = "gilspy ended before the window did"
    finally:
        # The workload is stopped whatever went wrong before (a gilspy that refused its options once left a
        # workload spinning for the rest of the bench, skewing every later run).
        try:
            if tracer and tracer.proc.poll() is None:
                tracer.stop()
            if gs and gs.rc is None:
                gs.stop()
            if ex and ex.rc is None:
                ex.stop()
        finally:
            result = wl.stop()
    row["workload_result"] = result
    path = gs.raw_path()
    if not path:
        row["error"] = f"gilspy wrote no raw file (exit {gs.rc}): {gs.stderr.strip()[-1000:]}"
        return row
    raw = benchlib.Raw(path)
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
        stem = os.path.join(args.keep, f"{row['python']}_{workload}_{safe}")
        os.replace(path, stem + ".gilspy.json")
        if up:
            with open(stem + ".uprobe.json", "w") as f:
                json.dump({"window": [S, E], "roles": wl.roles, **up}, f)
    gs.cleanup()
    if raw.start_ns > S or raw.end_ns < E:
        row["error"] = (f"gilspy's recording [{raw.start_ns}, {raw.end_ns}] does not cover the window [{S}, {E}] "
                        f"(exit {gs.rc}: {gs.stderr.strip()[-300:]})")
    W = E - S
    if ex:
        referee = up
        try:
            up = exact_truth.truth_of(ex, S, E)
        except ValueError as e:
            row["error"] = str(e)
            up = None
        if up and referee:
            row["referee"] = exact_truth.agreement(up, referee, W)
    summ = raw.summary
    row["gilspy"] = {k: summ.get(k) for k in ("coverage", "handoffs_seen", "handoffs_total", "polls", "late_polls",
                                               "missed_polls", "rate_achieved_hz", "rate_asked_hz",
                                               "unknown_holder_polls", "task_reads", "gil_busy_share",
                                               "poll_mode", "dense_polls", "poller_cpu_moves")}
    row["gilspy_rc"] = gs.rc
    if gs.rusage is not None and gs.t_end > gs.t_start:
        # gilspy's CPU over its whole life (attach included), % of one core: with the uprobes on the target.
        row["gilspy_cpu_life"] = (gs.rusage.ru_utime + gs.rusage.ru_stime) / ((gs.t_end - gs.t_start) / 1e9)
    if up:
        row["uprobe"] = {k: up[k] for k in ("takes_in_window", "drops_in_window", "switches", "calls_take",
                                             "calls_drop", "hold_unknown_start", "wait_unknown_start",
                                             "hold_lost_start", "wait_lost_start", "hold_lost_end",
                                             "wait_lost_end",
                                             "attached_ns")}
    tids = set(raw.threads)
    if up:
        tids |= set(up["threads"])
    threads = []
    for tid in sorted(tids, key=lambda t: (wl.roles.get(t, "zz"), t)):
        g_hold, g_holds = benchlib.clip(raw.holds.get(tid, []), S, E)
        g_wait, g_waits = benchlib.clip(raw.waits.get(tid, []), S, E)
        t = {"tid": tid, "role": wl.roles.get(tid, "?"), "gilspy_seen": tid in raw.threads,
             "g_hold": g_hold / W, "g_wait": g_wait / W, "g_holds": g_holds, "g_waits": g_waits}
        if up:
            u = up["threads"].get(tid, {})
            t.update({"uprobe_seen": tid in up["tids_seen"], "u_hold": u.get("hold_ns", 0) / W,
                      "u_wait": u.get("wait_ns", 0) / W, "u_holds": u.get("holds", 0), "u_waits": u.get("waits", 0),
                      "u_waits_long": u.get("waits_long", 0), "u_holds_short": u.get("holds_short", 0),
                      "u_short_hold": u.get("holds_short_ns", 0) / W})
            if "events" in up:
                conf = benchlib.confusion(benchlib.truth_steps(up["events"].get(tid, [])),
                                          benchlib.gilspy_steps(raw.holds.get(tid, []), raw.waits.get(tid, [])), S, E)
                t["confusion"] = {f"{a}>{b}": v / W for (a, b), v in conf.items()}
            t["d_hold_pp"] = 100 * (t["g_hold"] - t["u_hold"])
            t["d_wait_pp"] = 100 * (t["g_wait"] - t["u_wait"])
            # The same with the probes' own cost (see calibrate) taken out: per take_gil, its time inside
            # take_gil leaves the uprobes' wait; of it, the part after locked = 1 goes to their hold, the rest
            # (the entry handler, before the thread does anything) to released; per drop_gil, the entry
            # handler's time before locked = 0 goes from released to hold. Without the split (the lock word as
            # truth, or no GIL address) it all goes to the hold with the function boundaries, to released with
            # the lock word.
            t["da_hold_pp"], t["da_wait_pp"], t["u_probe"] = adjusted(
                t, args.probe_cost, "func" if args.truth == "exact" else args.truth, W)
            if raw.meta.get("mode") == "exact" and args.truth in ("func", "exact"):
                # gilspy --exact probes the same function boundaries, its hits costing what the truth's do:
                # compared as they are, and it claims no interval.
                t["da_hold_pp"], t["da_wait_pp"] = t["d_hold_pp"], t["d_wait_pp"]
                t["in_ci"] = None
                threads.append(t)
                continue
            ci = raw.ci95_share(tid, S, E)
            t["ci95_pp"] = None if ci is None else 100 * ci
            # The uprobes (their cost taken out) inside gilspy's interval, on both shares.
            t["in_ci"] = None if ci is None else (abs(t["da_hold_pp"]) <= 100 * ci and abs(t["da_wait_pp"]) <= 100 * ci)
        threads.append(t)
    row["threads"] = threads
    row["g_busy"] = sum(t["g_hold"] for t in threads)
    row["g_holds_window"] = sum(t["g_holds"] for t in threads)
    if up:
        row["u_busy"] = sum(t["u_hold"] for t in threads)
        if row["u_busy"] > 1.005:
            # Holds of different threads overlap: bpftrace lost or reordered events (seen once in ~120 runs,
            # 130 % busy). Such a run says nothing about gilspy.
            row.setdefault("error", f"the uprobes' holds overlap (GIL busy {100 * row['u_busy']:.1f} %): "
                                    "bpftrace lost events; not a ground truth")
        row["u_holds_window"] = sum(t["u_holds"] for t in threads)
        row["max_d_hold_pp"] = max(abs(t["d_hold_pp"]) for t in threads)
        row["max_d_wait_pp"] = max(abs(t["d_wait_pp"]) for t in threads)
        row["max_da_hold_pp"] = max(abs(t["da_hold_pp"]) for t in threads)
        row["max_da_wait_pp"] = max(abs(t["da_wait_pp"]) for t in threads)
        row["probe_cost"] = args.probe_cost
        judged = [t["in_ci"] for t in threads if t.get("in_ci") is not None]
        row["in_ci_share"] = sum(judged) / len(judged) if judged else None
        row["same_threads"] = sorted(raw.threads) == sorted(up["tids_seen"])
        row["threads_only_gilspy"] = sorted(set(raw.threads) - set(up["tids_seen"]))
        row["threads_only_uprobe"] = sorted(set(up["tids_seen"]) - set(raw.threads))
    return row


def adjusted(t, cost, truth, W):
    """(hold error, wait error) in pp against the uprobes with their own cost taken out, and the share of the
    window moved out of their wait."""
    cost = cost or {}
    moved = min(t["u_wait"], t["u_waits"] * cost.get("wait_ns", 0) / W)
    if "take_ns" in cost:
        to_hold = min(moved, t["u_waits"] * cost["take_ns"] / W) + t["u_holds"] * cost["drop_ns"] / W
    else:
        to_hold = moved if truth == "func" else 0
    return 100 * (t["g_hold"] - (t["u_hold"] + to_hold)), 100 * (t["g_wait"] - (t["u_wait"] - moved)), moved


def pct(x):
    return f"{100 * x:6.2f}"


def print_row(row, brief):
    name = (f"Python {row['python']}, workload {row['workload']} ({benchlib.WORKLOAD_NAMES[row['workload']]}), "
            f"mode {row['mode']} (gilspy {row['mode_args'] or 'defaults'})")
    print(f"\n== {name}")
    if row.get("error"):
        print(f"   ERROR: {row['error']}")
    if row.get("uprobe_unavailable"):
        print(f"   uprobes unavailable, gilspy only: {row['uprobe_unavailable']}")
    if "threads" not in row:
        return
    up = "uprobe" in row
    g = row["gilspy"]
    W = (row["window"][1] - row["window"][0]) / 1e9
    if not brief:
        print(f"   {'TID':>7} {'ROLE':<8} {'HOLD% up':>8} {'gilspy':>7} {'Δpp':>6} {'adj':>6}   {'WAIT% up':>8} "
              f"{'gilspy':>7} {'Δpp':>6} {'adj':>6}   {'HOLDS up':>8} {'<100µs':>7} {'gilspy':>7}   {'±95':>5} inside")
        for t in row["threads"]:
            if up:
                ci = "-" if t.get("ci95_pp") is None else f"{t['ci95_pp']:.2f}"
                inside = {None: "-", True: "yes", False: "NO"}[t.get("in_ci")]
                print(f"   {t['tid']:>7} {t['role']:<8} {pct(t['u_hold']):>8} {pct(t['g_hold']):>7} {t['d_hold_pp']:+6.2f} "
                      f"{t['da_hold_pp']:+6.2f}   {pct(t['u_wait']):>8} {pct(t['g_wait']):>7} {t['d_wait_pp']:+6.2f} "
                      f"{t['da_wait_pp']:+6.2f}   {t['u_holds']:>8} {t['u_holds_short']:>7} {t['g_holds']:>7}   "
                      f"{ci:>5} {inside}")
            else:
                print(f"   {t['tid']:>7} {t['role']:<8} {'-':>8} {pct(t['g_hold']):>7} {'-':>6} {'-':>6}   {'-':>8} "
                      f"{pct(t['g_wait']):>7} {'-':>6} {'-':>6}   {'-':>8} {'-':>7} {t['g_holds']:>7}")
    if any("confusion" in t for t in row["threads"]):
        print("   where the time goes (true state > gilspy's state, pp of the window; H hold, W wait, R released):")
        for t in row["threads"]:
            c = t.get("confusion", {})
            off = sorted(((v, k) for k, v in c.items() if k[0] != k[2] and v >= 0.0005), reverse=True)
            print(f"   {t['tid']:>7} {t['role']:<8} " + ", ".join(f"{k} {100 * v:.2f}" for v, k in off))
    line = (f"   window {W:.2f} s; GIL busy: gilspy {100 * row['g_busy']:.2f} %")
    if up:
        line += f", uprobes {100 * row['u_busy']:.2f} %"
        u = row["uprobe"]
        line += (f"; uprobes in window: {u['takes_in_window']} take_gil, {u['drops_in_window']} drop_gil, "
                 f"{u['switches']} hand-offs")
    print(line)
    lost = {k: row["uprobe"].get(k, 0) for k in ("hold_lost_start", "wait_lost_start", "hold_lost_end",
                                                 "wait_lost_end")} if up else {}
    if any(lost.values()):
        print(f"   WARNING: the uprobes lost events: {lost['hold_lost_start']} hold(s) and {lost['wait_lost_start']} "
              f"wait(s) ended without a start (left out), {lost['hold_lost_end']} hold(s) and "
              f"{lost['wait_lost_end']} wait(s) started again without an end (the earlier one is lost)")
    if up and abs(row["uprobe"]["takes_in_window"] - row["uprobe"]["drops_in_window"]) > len(row["threads"]):
        print("   WARNING: take_gil and drop_gil counts differ by more than the thread count: a caller may have "
              "an inlined copy the uprobes miss")
    cov = g.get("coverage")
    print(f"   gilspy: coverage {100 * cov:.1f} % ({g['handoffs_seen']} of {g['handoffs_total']} hand-offs, whole "
          f"recording), {g.get('poll_mode') or '?'} schedule, {g['rate_achieved_hz']:.0f} Hz mean "
          f"(peak {g['rate_asked_hz']:.0f}), {g['late_polls']} late, "
          f"{g['missed_polls']} missed polls" if cov is not None else "   gilspy: no summary")
    if up:
        print(f"   max |Δ| hold {row['max_d_hold_pp']:.2f} pp, wait {row['max_d_wait_pp']:.2f} pp (adjusted for the "
              f"probes' own cost: {row['max_da_hold_pp']:.2f}, {row['max_da_wait_pp']:.2f}); "
              f"same threads: {'yes' if row['same_threads'] else 'NO'}"
              + (f" (only gilspy: {row['threads_only_gilspy']}, only uprobes: {row['threads_only_uprobe']})"
                 if not row["same_threads"] else ""))
    if row.get("referee"):
        r = row["referee"]
        print(f"   the two ground truths (gilspy --exact, bpftrace's uprobes): max |Δ| hold {r['max_hold_pp']:.2f} pp, "
              f"wait {r['max_wait_pp']:.2f} pp")


def print_summary(rows):
    truths = sorted({r.get("truth", "func") for r in rows})
    print(f"\n== Summary (truth: {', '.join(truths)}; targets on every workload but c: every thread's hold within 1 pp, "
          "wait within 3 pp of the uprobes; 'adj' takes the probes' own cost out (see calibrate); the verdict uses adj; "
          "'in 95%': threads whose adj hold and wait both lie inside gilspy's 95 % interval)")
    mw = max([4] + [len(r.get("mode", "")) for r in rows])
    print(f"   {'PYTHON':<8} {'WL':<2} {'MODE':<{mw}} {'max|Δhold|':>10} {'adj':>5} {'max|Δwait|':>10} {'adj':>5} {'busy up':>8} "
          f"{'gilspy':>7} {'coverage':>9} {'hand-offs/s':>11} {'holds up':>9} {'gilspy':>7} {'rate Hz':>8} {'late':>6} {'in 95%':>6}  verdict")
    for row in rows:
        if "threads" not in row:
            print(f"   {row['python']:<8} {row['workload']:<2} {row['mode']:<{mw}} {'error: ' + row.get('error', '?')[:80]}")
            continue
        g = row["gilspy"]
        W = (row["window"][1] - row["window"][0]) / 1e9
        if "uprobe" in row:
            ok = row["max_da_hold_pp"] <= HOLD_TARGET_PP and row["max_da_wait_pp"] <= WAIT_TARGET_PP
            verdict = ("ok" if ok else "MISS") if row["workload"] != "c" else "(no target)"
            share = row.get("in_ci_share")
            in_ci = "-" if share is None else f"{100 * share:.0f}%"
            if row.get("error"):
                verdict += " (invalid: " + row["error"][:40] + ")"
            print(f"   {row['python']:<8} {row['workload']:<2} {row['mode']:<{mw}} {row['max_d_hold_pp']:9.2f}  {row['max_da_hold_pp']:5.2f} "
                  f"{row['max_d_wait_pp']:9.2f}  {row['max_da_wait_pp']:5.2f} "
                  f"{pct(row['u_busy']):>8} {pct(row['g_busy']):>7} {100 * (g['coverage'] or 0):8.1f}% "
                  f"{row['uprobe']['switches'] / W:11.0f} {row['u_holds_window']:>9} {row['g_holds_window']:>7} "
                  f"{g['rate_achieved_hz']:8.0f} {g['late_polls']:>6} {in_ci:>6}  {verdict}")
        else:
            print(f"   {row['python']:<8} {row['workload']:<2} {row['mode']:<{mw}} {'-':>10} {'-':>5} {'-':>10} {'-':>5} {'-':>8} {pct(row['g_busy']):>7} "
                  f"{100 * (g['coverage'] or 0):8.1f}% {'-':>11} {'-':>9} {row['g_holds_window']:>7} "
                  f"{g['rate_achieved_hz']:8.0f} {g['late_polls']:>6}  uprobes unavailable")


def modes_of(args):
    """[(label, gilspy words)] from --modes, or the one mode --rate / --busy / neither asks for."""
    if args.modes:
        if args.rate or args.busy:
            benchlib.die("--modes and --rate / --busy: give the rate inside a mode ('r10k=-r 10000')")
        modes = benchlib.parse_modes(args.modes)
        bad = [label for label, kind, _ in modes if kind != "gilspy"]
        if bad:
            benchlib.die(f"--modes: compare.py runs gilspy modes only, not {', '.join(bad)}")
        return [(label, words) for label, _, words in modes]
    if args.rate or args.busy:
        words = (["-r", f"{args.rate:g}"] if args.rate else []) + (["--busy"] if args.busy else [])
        label = "gilspy " + ("busy " if args.busy else "") + (f"{args.rate / 1000:g}k" if args.rate else "")
        return [(label.strip(), words)]
    return [("default", [])]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=DEFAULT_PYTHONS, help="comma-separated versions (pyenv) or paths")
    ap.add_argument("--workloads", default="a,b,c,d")
    ap.add_argument("--window", type=float, default=3.0, help="seconds compared")
    ap.add_argument("--lead", type=float, default=0.5, help="seconds from bpftrace's attach to the window")
    ap.add_argument("--rate", type=float, default=0, help="gilspy's fixed poll rate: one mode, labelled 'gilspy "
                    "Nk' (default: gilspy's own default, the adaptive schedule)")
    ap.add_argument("--busy", action="store_true", help="gilspy --busy (with --rate)")
    ap.add_argument("--modes", default="",
                    help="'label=ARGS,...': each (interpreter, workload) is run once per mode, ARGS being gilspy "
                         "record options (empty: gilspy's defaults; @PATH first: the gilspy at PATH, 'old=@/tmp/gilspy-old'), "
                         "e.g. 'default=,r1k=-r 1000,busy=--busy -r "
                         "100000'. Not with --rate / --busy. Default: one mode 'default', gilspy's defaults")
    ap.add_argument("--gilspy", default=benchlib.default_gilspy())
    ap.add_argument("--prefix", default="", help="command words before gilspy, e.g. 'chrt -f 10' (real-time "
                                                  "priority: no late polls on a loaded machine)")
    ap.add_argument("--json-out")
    ap.add_argument("--brief", action="store_true", help="only the summary lines per run, no per-thread rows")
    ap.add_argument("--check-threads", action="store_true")
    ap.add_argument("--max-error", type=float, metavar="PP",
                    help="a test: exit 1 unless every thread's hold and wait (adj) are within PP of the uprobes, "
                         "and both sides saw the same threads (e.g. --modes exact=--exact --max-error 0.5); 77 "
                         "where uprobes or an interpreter are missing")
    ap.add_argument("--referee", action="store_true",
                    help="with --truth exact: bpftrace's uprobes on the same process too, and the two ground "
                         "truths' agreement printed (both cost the target: their probes add up)")
    ap.add_argument("--truth", choices=("func", "lock", "exact"), default="func",
                    help="func (default): hold = take_gil's return .. drop_gil's entry, the probes' own cost "
                         "taken out in the 'adj' columns (measured at the start); lock: hold = the lock word's "
                         "locked=1 .. locked=0, marked by take_gil's and drop_gil's pthread_cond_signal on "
                         "gil->switch_cond / gil->cond, right after each store. Diagnostic: its libc probe traps "
                         "every pthread_cond_signal of the machine, and on two CPUs the load starves the "
                         "workloads' threads (seen: waits off by 8-35 pp where func is within 2); exact: a second "
                         "gilspy, `record --exact`, on the same process (no bpftrace needed; --referee adds it)")
    ap.add_argument("--probe-cost", type=float, help="the probes' time inside take_gil per take in ns, all moved to "
                                                        "the hold (default: measured at the start, split)")
    ap.add_argument("--keep", metavar="DIR", help="keep gilspy's raw files and the uprobe results there")
    ap.add_argument("--confusion", action="store_true",
                    help="also print every transition from bpftrace (costly: ~8 µs per event in the target) and "
                         "show, per thread, how much time gilspy put in the wrong state")
    args = ap.parse_args()
    benchlib.stop_on_sigterm()
    args.modes = modes_of(args)
    if not args.gilspy:
        benchlib.die("gilspy not found: build it (cmake --build build) or pass --gilspy")
    args.gilspy = benchlib.snapshot_gilspy(args.gilspy)
    cost_given = args.probe_cost
    args.probe_cost = {"wait_ns": cost_given} if cost_given is not None else None
    testing = args.check_threads or args.max_error is not None
    if cost_given is None and not testing:
        for spec in args.python.split(","):
            python = benchlib.find_python(spec)
            if python:
                args.probe_cost = calibrate(python, args)
                break
        if args.probe_cost:
            c = args.probe_cost
            print(f"probe cost (truth '{args.truth}', a lone, never contended os.write thread): "
                  f"{c['wait_ns']:.0f} ns inside take_gil per take, which the uprobes count as waiting"
                  + (f"; of it {c['take_ns']:.0f} ns after locked = 1, and {c['drop_ns']:.0f} ns of drop_gil's "
                     "entry handler before locked = 0 (gilspy sees both as holding)" if "take_ns" in c else ""))
    rows = []
    for spec in args.python.split(","):
        python = benchlib.find_python(spec)
        if not python:
            print(f"\n== Python {spec}: not found, skipped")
            if testing:
                print(f"SKIPPED: Python {spec} not found under {benchlib.pyenv_root()}/versions")
                return 77
            continue
        for w in args.workloads.split(","):
            for mode in args.modes:
                row = run_one(python, w, mode, args)
                if testing and row.get("uprobe_unavailable"):
                    print(f"SKIPPED: uprobes unavailable: {row['uprobe_unavailable']}")
                    return 77
                rows.append(row)
                print_row(row, args.brief)
                sys.stdout.flush()
    print_summary(rows)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1)
    if args.check_threads:
        bad = [r for r in rows if "threads" not in r or not r.get("same_threads") or r.get("error")]
        for r in bad:
            print(f"FAIL: Python {r['python']} workload {r['workload']}: "
                  f"{r.get('error') or 'threads differ: only gilspy ' + str(r.get('threads_only_gilspy')) + ', only uprobes ' + str(r.get('threads_only_uprobe'))}")
        return 1 if bad or not rows else 0
    if args.max_error is not None:
        bad = [r for r in rows if "threads" not in r or not r.get("same_threads") or r.get("error")
               or r["max_da_hold_pp"] > args.max_error or r["max_da_wait_pp"] > args.max_error]
        for r in bad:
            print(f"FAIL: Python {r['python']} workload {r['workload']} mode {r['mode']}: "
                  + (r.get("error") or f"hold {r.get('max_da_hold_pp', float('nan')):.2f} pp, wait "
                     f"{r.get('max_da_wait_pp', float('nan')):.2f} pp (limit {args.max_error}); same threads: "
                     f"{r.get('same_threads')}"))
        return 1 if bad or not rows else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
