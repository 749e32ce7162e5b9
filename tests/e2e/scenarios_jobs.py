"""Scenarios for whole jobs: `record` with no -p finds every Python process (also those that start while it
runs, unless --no-follow), and --subprocesses follows a target's children (multiprocessing workers)."""
import collections
import glob
import gzip
import json
import os
import re
import subprocess
import tempfile
import time

from harness import (WORKLOADS, Failure, Raw, Workload, check, check_trace, find_interpreter, run_gilspy,
                     run_trace_checker, single_raw, workload_env)


def raw_files(directory):
    return {int(os.path.basename(f).split("_")[1]): f for f in glob.glob(os.path.join(directory, "GIL_*_rank_*.json"))
            if not f.endswith(".trace.json")}


def check_cpu_threads_share(raw, cpu_tids, who):
    """Two CPU-bound threads of one process: both hold and both wait (a hand-off every 5 ms)."""
    for tid in cpu_tids:
        t = raw.thread(tid)
        check(t["hold_share"] > 0.15 and t["wait_share"] > 0.15,
              f"{who}: CPU thread {tid} held {t['hold_share']:.1%} and waited {t['wait_share']:.1%}, expected both > 15 %")
    # One of them always wants the GIL, so while both live one of them holds it nearly all the time (also while
    # the OS preempts the holder on a loaded machine); the process may have lived only part of the recording.
    threads = [raw.thread(tid) for tid in cpu_tids]
    span = min(t["last_ns"] for t in threads) - max(t["first_ns"] for t in threads)
    held = sum(t["hold_ns"] for t in threads)
    check(span > 0.5e9 and held > 0.8 * span,
          f"{who}: the CPU threads held the GIL {held / 1e6:.0f} ms of the {span / 1e6:.0f} ms they both lived")


def scenario_record_all(gilspy, python):
    """No -p, no program: two Python processes running at the start (this interpreter and another version),
    then six more on mixed versions that start while it records (eight in all), one file each; --no-follow
    leaves out the later ones."""
    names = ("pyenv-3.11", "pyenv-3.8", "pyenv-3.13", "debian-3.11")
    found = {n: find_interpreter(n)[0] for n in names}
    others = [o for o in found.values() if o and o != python] or [python]
    missing = [n for n, o in found.items() if not o]
    print(f"record_all: {python} mixed with {others}" + (f"; not found, not mixed in: {missing}" if missing else ""))
    second = others[0]
    before = [Workload(python, "cpu_threads.py", 30, 2), Workload(second, "cpu_threads.py", 30, 2)]
    late = []
    try:
        d = tempfile.mkdtemp(prefix="gilspy-rec-")
        # 6 s: the six late workloads start one after another; on a loaded 2-core machine the last one's
        # threads came 4.8 s in (CI), and each process's CPU threads must share the GIL for 0.5 s.
        p = subprocess.Popen([gilspy, "record", "-d", "6", "-o", d, "--no-status", "-q"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        late = [Workload(([python] + others)[i % (len(others) + 1)], "cpu_threads.py", 30, 2) for i in range(6)]
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0, f"exit {p.returncode}; stderr {err!r}")
        for w in before:
            check(f"pid {w.pid} " in err, f"the list printed first does not name pid {w.pid}: {err!r}")
        for w in late:
            check(f"recording pid {w.pid} too" in err, f"pid {w.pid}, started during the recording, was not said: {err!r}")
        files = raw_files(d)
        for w in before + late:
            check(w.pid in files, f"no file for pid {w.pid}: {sorted(files)}")
            raw = Raw(files[w.pid])
            check_cpu_threads_share(raw, w.info["cpu"], f"pid {w.pid}")
            check_trace(files[w.pid].replace(".json", ".trace.json"), raw)
        gilspy_pid = p.pid
        check(gilspy_pid not in files, "gilspy recorded itself")
        for w in late:
            raw = Raw(raw_files(d)[w.pid])
            first = min(e[2] for e in raw.events if e[0] == "T")
            check(first >= 0.8e9, f"pid {w.pid} started 1 s in or later but its threads appear at {first / 1e9:.2f} s")
        # --no-follow: only those running at the start.
        d2 = tempfile.mkdtemp(prefix="gilspy-rec-")
        p = subprocess.Popen([gilspy, "record", "-d", "2", "-o", d2, "--no-status", "-q", "--no-follow"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        later = Workload(python, "cpu_threads.py", 30, 2)
        late.append(later)
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0, f"--no-follow: exit {p.returncode}; stderr {err!r}")
        files = raw_files(d2)
        check(all(w.pid in files for w in before), f"--no-follow: missing {[w.pid for w in before]} in {sorted(files)}")
        check(later.pid not in files, f"--no-follow recorded pid {later.pid}, which started later")
    finally:
        for w in before + late:
            w.kill()


def scenario_subprocesses(gilspy, python):
    """--subprocesses in launch mode: a parent that starts two multiprocessing workers after 0.8 s; a file for
    the parent and for each worker, the workers' two CPU threads sharing the GIL."""
    d = tempfile.mkdtemp(prefix="gilspy-rec-")
    report = os.path.join(d, "report.json")
    out = run_gilspy(gilspy, "record", "--subprocesses", "-o", d, "--no-status", "-q", "--", python,
                     os.path.join(WORKLOADS, "mp_workers.py"), 0.8, 2, 2.5, env=workload_env(report), check_rc=0)
    info = json.load(open(report))
    files = raw_files(d)
    check(info["pid"] in files, f"no file for the parent {info['pid']}: {sorted(files)}")
    parent = Raw(files[info["pid"]]).summary
    for pid in info["workers"]:
        check(pid in files, f"no file for worker {pid}: {sorted(files)}; stderr {out.stderr!r}")
        check(f"recording pid {pid} too" in out.stderr, f"worker {pid} was not said: {out.stderr!r}")
        raw = Raw(files[pid])
        # A worker is recorded from when it was found (the parent starts it 0.8 s in) to its own end: its
        # figures are over that span, where its two CPU threads kept the GIL busy (over the whole session's
        # span, as before, it read ~60 % busy and its recording as long as the parent's).
        span, busy = raw.summary["duration_ns"], raw.summary["gil_busy_share"]
        check(0.5e9 < span < parent["duration_ns"] - 0.5e9,
              f"worker {pid} recorded for {span / 1e9:.2f} s, the parent for {parent['duration_ns'] / 1e9:.2f} s")
        check(busy > 0.85, f"worker {pid}: GIL busy {busy:.0%} of its own recording")
        cpu = [t["tid"] for t in raw.summary["threads"] if t["tid"] != pid and t["holds"] > 10]
        check(len(cpu) == 2, f"worker {pid}: expected its 2 CPU threads to hold the GIL, got {raw.summary['threads']}")
        check_cpu_threads_share(raw, cpu, f"worker {pid}")
        check_trace(files[pid].replace(".json", ".trace.json"), raw)


def scenario_short_children(gilspy, python):
    """--subprocesses with 12 forked children that live 0.3 s each, one every 0.15 s: every one is recorded
    (the kernel's process events find a child within a drain; the half-second /proc scans alone found about
    a quarter of them), from early in its life, over its own span."""
    d = tempfile.mkdtemp(prefix="gilspy-rec-")
    report = os.path.join(d, "report.json")
    out = run_gilspy(gilspy, "record", "--subprocesses", "-o", d, "--no-status", "-q", "--", python,
                     os.path.join(WORKLOADS, "short_forks.py"), 12, 0.3, 0.15, env=workload_env(report),
                     check_rc=0)
    info = json.load(open(report))
    files = raw_files(d)
    missed = [c["pid"] for c in info["children"] if c["pid"] not in files]
    check(not missed, f"children not recorded: {missed} of {len(info['children'])}; stderr {out.stderr!r}")
    spans = []
    for c in info["children"]:
        summary = Raw(files[c["pid"]]).summary
        spans.append(summary["duration_ns"] / 1e9)
        check(summary["duration_ns"] < 0.6e9, f"child {c['pid']} recorded for {summary['duration_ns'] / 1e9:.2f} s")
    # Found within a drain or two (50 ms each) plus the fork's settling time (20 ms): most of a 0.3 s life.
    check(sorted(spans)[len(spans) // 2] > 0.15, f"children recorded for {sorted(spans)} s (median too short)")
    # Children that live 5 ms end before they can be tried: each is counted in one line at the end.
    d2 = tempfile.mkdtemp(prefix="gilspy-rec-")
    report2 = os.path.join(d2, "report.json")
    out2 = run_gilspy(gilspy, "record", "--subprocesses", "-o", d2, "--no-status", "-q", "--", python,
                      os.path.join(WORKLOADS, "short_forks.py"), 5, 0.005, 0.05, env=workload_env(report2),
                      check_rc=0)
    kids = [c["pid"] for c in json.load(open(report2))["children"]]
    recorded = sum(1 for pid in kids if pid in raw_files(d2))
    m = re.search(r"(\d+) child process(?:es)? of the targets \(([\d, ]+)\) ended before gilspy could attach",
                  out2.stderr)
    missed = int(m.group(1)) if m else 0
    check(recorded + missed == len(kids), f"of {len(kids)} 5 ms children {recorded} recorded and {missed} said "
                                          f"missed: {out2.stderr!r}")
    named = {int(p) for p in m.group(2).split(", ")} if m else set()
    check(named == {pid for pid in kids if pid not in raw_files(d2)}, f"missed children named {named}, kids {kids}")
    print(f"short children: {len(info['children'])} of {len(info['children'])} recorded, "
          f"spans {min(spans):.2f}-{max(spans):.2f} s (median {sorted(spans)[len(spans) // 2]:.2f} s of 0.3 s "
          f"lives); of {len(kids)} 5 ms children {missed} said missed, {recorded} recorded")


def scenario_discover_bad_input(gilspy, python):
    """Flags that do not fit the targets: one line, exit 2; a dead pid among found ones is not an error."""
    for args, words in ((["--subprocesses"], "--subprocesses follows the children"),
                        (["-p", str(os.getpid()), "--no-follow"], "--no-follow is for recording every"),
                        (["-p", str(os.getpid()), "--accelerator"], "--accelerator chooses among")):
        out = run_gilspy(gilspy, "record", "-d", "1", *args)
        check(out.returncode == 2 and words in out.stderr and out.stderr.strip().count("\n") == 0,
              f"record {' '.join(args)}: exit {out.returncode}, stderr {out.stderr!r}")
    # A dead and a non-Python pid in a -p list: named, skipped, the Python one recorded; exit 1 (not all recorded).
    w = Workload(python, "cpu_threads.py", 30, 2)
    sleeper = subprocess.Popen(["sleep", "30"])
    dead = subprocess.Popen(["true"])
    dead.wait()
    try:
        d = tempfile.mkdtemp(prefix="gilspy-rec-")
        out = run_gilspy(gilspy, "record", "-p", f"{w.pid},{dead.pid},{sleeper.pid}", "-d", "1", "-o", d, "-q",
                         "--no-status")
        check(out.returncode == 1, f"-p with a dead and a non-Python pid: exit {out.returncode}, {out.stderr!r}")
        for bad in (dead.pid, sleeper.pid):
            check(f"pid {bad} is not recorded" in out.stderr, f"pid {bad} is not named: {out.stderr!r}")
        files = raw_files(d)
        check(list(files) == [w.pid], f"files for {sorted(files)}, expected only {w.pid}")
        check_cpu_threads_share(Raw(files[w.pid]), w.info["cpu"], f"pid {w.pid}")
        # None of them can be recorded: one line naming each, nothing written.
        out = run_gilspy(gilspy, "record", "-p", f"{dead.pid},{sleeper.pid}", "-d", "1", "-o", d)
        check(out.returncode == 1 and out.stderr.strip().count("\n") == 0 and str(dead.pid) in out.stderr
              and str(sleeper.pid) in out.stderr, f"no pid recordable: exit {out.returncode}, {out.stderr!r}")
    finally:
        w.kill()
        sleeper.kill()
        sleeper.wait()
    # --accelerator with no process holding a device: nothing to record; with --no-follow that is an error.
    out = run_gilspy(gilspy, "record", "-d", "1", "--accelerator", "--no-follow", "-o", tempfile.mkdtemp())
    check(out.returncode == 1 and "no Python process with an accelerator device open" in out.stderr,
          f"--accelerator --no-follow with no device holder: exit {out.returncode}, stderr {out.stderr!r}")


def load_trace(path):
    """A trace as JSON with its keys in file order (.gz or not)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        text = f.read()
    return text, json.loads(text, object_pairs_hook=collections.OrderedDict)


def check_merged(original_path, merged_path, pid):
    """The merged trace: every original event unchanged, then gilspy's; traceEvents first, the other members in
    their order, then "gilspy"; every GIL event in the profiler's process `pid`, on tids the profiler does not use.
    Returns (gilspy's events, {lane tid: name})."""
    run_trace_checker("--merged", merged_path)
    text_before, before = load_trace(original_path)
    text_after, after = load_trace(merged_path)
    n = len(before["traceEvents"])
    check(after["traceEvents"][:n] == before["traceEvents"], "the profiler's events are not all there, unchanged, in order")
    keys = [k for k in before if k != "traceEvents"]
    check(list(after) == ["traceEvents"] + keys + ["gilspy"], f"members {list(after)}, expected traceEvents first")
    check(all(after[k] == before[k] for k in keys), "a member of the profiler's trace changed")
    check('"rank": 0' in text_after, "\"rank\": 0 is not spelled as the profiler wrote it")
    gil = after["traceEvents"][n:]
    profiler_tids = {e["tid"] for e in before["traceEvents"] if e.get("pid") == pid}
    for e in gil:
        check(e["pid"] == pid and (e["ph"] == "C" or e["tid"] not in profiler_tids),
              f"a GIL event is not on a lane of its own in process {pid}: {e}")
    lanes = {e["tid"]: e["args"]["name"] for e in gil if e["ph"] == "M" and e["name"] == "thread_name"}
    return gil, lanes


def scenario_merge_profiler(gilspy, python):
    """convert --merge-into with a real clock: a program that writes its own Kineto-shaped trace (.json.gz) of
    "step" slices (its threads compute) and "io_wait" / "main_wait" slices (asleep) is recorded; merged, every
    GIL hold of a thread lies inside one of its steps, none in its sleeps. Then the errors: a trace of another
    pid (the message points at --pid-map, which then works), a raw file given as the trace."""
    d = tempfile.mkdtemp(prefix="gilspy-merge-")
    profile = os.path.join(d, "steps.pt.trace.json.gz")
    report = os.path.join(d, "report.json")
    # A fixed rate: the edges of holds within a poll period (0.2 ms), whatever the adaptive schedule's budget does
    # on a loaded machine; what is tested is where the merge puts them.
    run_gilspy(gilspy, "record", "-r", "5000", "-o", d, "--no-status", "-q", "--no-trace", "--", python,
               os.path.join(WORKLOADS, "profiled_steps.py"), profile, env=workload_env(report), check_rc=0)
    info = json.load(open(report))
    pid, workers = info["pid"], info["workers"]
    raw_path = single_raw(d)
    raw = Raw(raw_path)
    merged = os.path.join(d, "merged.json.gz")
    out = run_gilspy(gilspy, "convert", "-i", raw_path, "--merge-into", profile, "-o", merged, check_rc=0)
    check(f"GIL lanes of pid {pid} in process {pid}" in out.stdout, f"convert did not say where the lanes went: {out.stdout}")
    check("warning" not in out.stderr, f"convert warned: {out.stderr}")
    with open(merged, "rb") as f:
        check(f.read(2) == b"\x1f\x8b", "a .gz output is not gzip")
    gil, lanes = check_merged(profile, merged, pid)
    _, doc = load_trace(profile)
    base = doc["baseTimeNanoseconds"]
    windows = collections.defaultdict(lambda: collections.defaultdict(list))  # tid -> name -> [(start, end)] ns
    for e in doc["traceEvents"]:
        if e.get("ph") == "X":
            start = base + round(e["ts"] * 1000)
            windows[e["tid"]][e["name"]].append((start, start + round(e["dur"] * 1000)))
    # A hold's edge lies between the two polls around it: off by at most half their gap, a poll period plus
    # the lateness of the later one. 3 ms covers that and the two clocks' readings on a quiet machine; on a
    # loaded one (a CI VM losing its CPU for ms) the recording says how late its polls came, and that bound
    # holds instead (as the sorter's check in run_e2e.py does).
    period = 1e9 / raw.meta["rate_hz"]
    slack = round(max(3e6, raw.summary["max_lateness_ns"] + 2 * period))
    # And a true hold inside a sleep slice: the thread read the clock for the slice's start, then lost its CPU
    # before time.sleep() released the GIL. The counters see that (holds whose holder waited >= 1 ms for a CPU
    # while holding); only that much may lie inside the sleeps, beyond the edges.
    preempted = {t["tid"]: t["preempted_hold_ns"] for t in raw.summary.get("counters", {}).get("threads", [])}

    def inside(t0, t1, spans):
        return sum(max(0, min(t1, b) - max(t0, a)) for a, b in spans)

    def grown(spans, by):
        return [(a - by, b + by) for a, b in spans]

    for tid in workers:
        lane = 1_000_000_000 + tid
        check(lanes.get(lane, "").startswith(f"GIL {tid}"), f"no lane 'GIL {tid} ...' on tid {lane}: {lanes}")
        holds = [(base + round(e["ts"] * 1000), base + round((e["ts"] + e["dur"]) * 1000))
                 for e in gil if e["ph"] == "X" and e["name"] == "hold_gil" and e["tid"] == lane]
        total = sum(b - a for a, b in holds)
        check(len(holds) > 10 and total > 0.2e9, f"thread {tid}: {len(holds)} holds, {total / 1e6:.0f} ms in the merge")
        in_steps = sum(inside(a, b, grown(windows[tid]["step"], slack)) for a, b in holds)
        in_sleep = sum(inside(a, b, grown(windows[tid]["io_wait"], -slack)) for a, b in holds)
        check(in_steps >= 0.97 * total, f"thread {tid}: {in_steps / 1e6:.0f} of {total / 1e6:.0f} ms of its holds "
                                        f"inside its step slices")
        if in_sleep > preempted.get(tid, 0):
            worst = max(holds, key=lambda h: inside(h[0], h[1], grown(windows[tid]["io_wait"], -slack)))
            raise Failure(f"thread {tid}: {in_sleep / 1e6:.1f} ms of holds while its trace says it slept (edges "
                          f"given {slack / 1e6:.1f} ms; the recording's polls came up to "
                          f"{raw.summary['max_lateness_ns'] / 1e6:.1f} ms late, {raw.summary['missed_polls']} "
                          f"missed; its holder lost its CPU in holds for {preempted.get(tid, 0) / 1e6:.1f} ms); "
                          f"the worst hold [{worst[0] - base}, {worst[1] - base}] ns after the trace's base, "
                          f"its sleeps {[(a - base, b - base) for a, b in windows[tid]['io_wait']]}")
    main_holds = [(base + round(e["ts"] * 1000), base + round((e["ts"] + e["dur"]) * 1000)) for e in gil
                  if e["ph"] == "X" and e["name"] == "hold_gil" and e["tid"] == 1_000_000_000 + pid]
    (w0, w1), = windows[pid]["main_wait"]
    asleep = sum(inside(a, b, [(w0 + slack, w1 - slack)]) for a, b in main_holds)
    check(asleep < 5_000_000, f"the main thread held the GIL {asleep / 1e6:.1f} ms while asleep in main_wait")
    check(sum(1 for e in gil if e["ph"] == "X" and e["name"] == "hold_gil") == len(raw.holds),
          "not every hold of the recording is in the merge")

    # A trace of another pid: nothing written, one line pointing at --pid-map; which then places the lanes.
    _, other = load_trace(profile)
    for e in other["traceEvents"]:
        if e.get("pid") == pid:
            e["pid"] = pid + 1
    other_path = os.path.join(d, "other.json")
    with open(other_path, "w") as f:
        json.dump(other, f)
    out = run_gilspy(gilspy, "convert", "-i", raw_path, "--merge-into", other_path, "-o", os.path.join(d, "x.json"))
    check(out.returncode == 1 and "--pid-map" in out.stderr and str(pid + 1) in out.stderr
          and out.stderr.strip().count("\n") == 0, f"no matching pid: exit {out.returncode}, {out.stderr!r}")
    check(not os.path.exists(os.path.join(d, "x.json")), "a failed merge left its output")
    mapped = os.path.join(d, "mapped.json")
    out = run_gilspy(gilspy, "convert", "-i", raw_path, "--merge-into", other_path, "-o", mapped, "--pid-map",
                     f"{pid}:{pid + 1}", check_rc=0)
    # The input line gives no wrong reason for the other pid ("an earlier input has pid ..."): the merge line
    # says why.
    check("an earlier input" not in out.stdout and f"in process {pid + 1} of" in out.stdout and "(--pid-map)" in
          out.stdout, f"--pid-map merge lines: {out.stdout!r}")
    gil, lanes = check_merged(other_path, mapped, pid + 1)
    check(any(name.startswith(f"GIL {workers[0]}") for name in lanes.values()), f"--pid-map lanes: {lanes}")
    # The raw file given as the trace: not a trace, said in one line.
    out = run_gilspy(gilspy, "convert", "-i", raw_path, "--merge-into", raw_path, "-o", os.path.join(d, "y.json"))
    check(out.returncode == 1 and "has no \"traceEvents\"" in out.stderr and out.stderr.strip().count("\n") == 0,
          f"a raw file as the trace: exit {out.returncode}, {out.stderr!r}")


SCENARIOS = {
    "record_all": scenario_record_all,
    "subprocesses": scenario_subprocesses,
    "short_children": scenario_short_children,
    "discover_bad_input": scenario_discover_bad_input,
    "merge_profiler": scenario_merge_profiler,
}
