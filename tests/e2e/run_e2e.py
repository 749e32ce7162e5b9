#!/usr/bin/env python3
"""gilspy end-to-end scenarios against real interpreters. See harness.py; run one with
   run_e2e.py SCENARIO INTERPRETER --gilspy build/cli/gilspy [--repeat N]
INTERPRETER is pyenv-3.8 ... pyenv-3.13, debian-3.11, or none (scenarios that need no Python).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import scenarios_counters
import scenarios_exact
import scenarios_gc
import scenarios_hostile
import scenarios_jobs
import scenarios_stacks
import scenarios_summary
from harness import (Failure, Raw, Workload, assert_lanes_do_not_overlap, assert_no_overlapping_holds, check,
                     check_trace, cpu_time_in_window, main, run_gilspy, run_trace_checker, single_raw, workload_env,
                     WORKLOADS)


def one_line_error(out, *needles):
    err = out.stderr.strip()
    check(out.returncode not in (0,) and 0 < out.returncode < 128,
          f"expected a clean non-zero exit, got {out.returncode}; stderr: {err!r}")
    check(err.count("\n") == 0 and err.startswith("gilspy: error: "), f"expected one error line, got {err!r}")
    for n in needles:
        check(n.lower() in err.lower(), f"error line should mention {n!r}: {err!r}")


# --- issue 2: gilspy info ---------------------------------------------------------------------------------

def scenario_info(gilspy, python):
    w = Workload(python, "cpu_threads.py", 30, 3)
    try:
        main_tid, cpu = w.info["main"], set(w.info["cpu"])
        # After announcing, the main thread still runs a little Python on its way into join(); wait until the
        # kernel shows it blocked there (a futex that is not the GIL's), then it never needs the GIL again.
        settle = time.monotonic() + 10
        while time.monotonic() < settle:
            r = json.loads(run_gilspy(gilspy, "info", "-p", w.pid, "--json", check_rc=0).stdout)
            if any(t["tid"] == main_tid and t["task"] == "other_syscall" for t in r["threads"]):
                break
        reads = []
        for _ in range(50):
            out = run_gilspy(gilspy, "info", "-p", w.pid, "--json", check_rc=0)
            reads.append((time.monotonic(), json.loads(out.stdout)))
        for _, r in reads:
            tids = {t["tid"] for t in r["threads"]}
            check(tids == cpu | {main_tid}, f"threads found {sorted(tids)}, expected {sorted(cpu | {main_tid})}")
            check(r["holder_tid"] in cpu | {0}, f"holder {r['holder_tid']} is not a CPU thread (main {main_tid})")
            waiting = {t["tid"] for t in r["threads"] if t["state"] == "waiting"}
            check(waiting <= cpu, f"waiting threads {waiting} include a non-CPU thread (cpu {cpu}, main {main_tid}): {r}")
        ok_waiters = sum(1 for _, r in reads if r["waiters"] in (1, 2))
        check(ok_waiters >= 30, f"waiter count was 1-2 in only {ok_waiters} of 50 reads: "
                                f"{[r['waiters'] for _, r in reads]}")
        (t0, r0), (t1, r1) = reads[0], reads[-1]
        rate = (r1["switch_number"] - r0["switch_number"]) / (t1 - t0)
        expected = 1e6 / r0["switch_interval_us"]
        # Forced switches come every interval while others wait; a busy 2-core machine stretches that.
        check(0.2 * expected <= rate <= 1.5 * expected,
              f"switch_number grew {rate:.0f}/s, expected about {expected:.0f}/s")
        held_by_cpu = sum(1 for _, r in reads if r["holder_tid"] in cpu)
        named = sum(len([t for t in r["threads"] if t["state"] == "waiting"]) for _, r in reads)
        print(f"info {reads[0][1]['python_version']}: {len(cpu) + 1} threads with their TIDs in 50/50 reads; "
              f"holder a CPU thread in {held_by_cpu}, nobody in {50 - held_by_cpu}, main never; waiters 1-2 in "
              f"{ok_waiters}/50 (mean {sum(r['waiters'] for _, r in reads) / 50:.2f}), {named} named waiters, all "
              f"CPU threads; switch_number +{rate:.0f}/s (1/interval = {expected:.0f}/s)")
    finally:
        w.kill()


def scenario_info_early(gilspy, python):
    """info right after the process starts (no interpreter, no GIL yet): it retries until it can read them."""
    for _ in range(3):
        p = subprocess.Popen([python, os.path.join(WORKLOADS, "cpu_threads.py"), "3", "2"],
                             env=dict(os.environ, PYTHONPATH=WORKLOADS))
        try:
            # Until exec, the child is a copy of this (Python) test driver: wait for the exec, not for Python.
            target = os.path.realpath(python)
            while p.poll() is None:
                try:
                    if os.readlink(f"/proc/{p.pid}/exe") == target:
                        break
                except OSError:
                    pass
            out = run_gilspy(gilspy, "info", "-p", p.pid, "--json", "--wait", 10, check_rc=0)
            r = json.loads(out.stdout)
            check(r["pid"] == p.pid and r["threads"], f"info on a fresh process found no threads: {r}")
            check(r["locked"] in (0, 1), f"GIL not created yet but info answered: {r}")
        finally:
            p.kill()
            p.wait()


# --- issue 3: gilspy record ---------------------------------------------------------------------------------

def check_cpu_and_sleeper(raw, roles):
    # A CPU-bound thread computes only while it holds the GIL, so its CPU time inside the recording is a lower
    # bound of the hold time gilspy must give it: a hold given to the wrong thread leaves the right one with less
    # hold than it computed. Only that direction is asserted: a holder the OS preempts (or a vCPU the host
    # steals) holds without computing, so hold time may exceed CPU time by any amount on a busy machine. The
    # bound's slack: 3 % (each hand-off's boundary sits at the midpoint between two polls) plus 20 ms (marks are
    # 10 ms apart, so each end of the window is interpolated).
    # CPython does not split the GIL evenly on a busy 2-core machine (a thread back from a forced drop often
    # retakes it first), so 35-65 % each is asserted only when the threads' own CPU times say the run was fair.
    marks = roles.get("cpu_marks", {})
    cpu_ns = {}
    if marks:
        start = raw.to_monotonic(0)
        end = raw.to_monotonic(raw.summary["duration_ns"])
        cpu_ns = {tid: cpu_time_in_window(marks[str(tid)], start, end) for tid in roles["cpu"]}
    total_cpu = sum(cpu_ns.values())
    for tid in roles["cpu"]:
        t = raw.thread(tid)
        check(t["wait_share"] > 0.20, f"CPU thread {tid} waited {t['wait_share']:.1%}, expected > 20 %")
        cpu_share = cpu_ns[tid] / total_cpu if total_cpu else None
        if tid in cpu_ns:
            check(t["hold_ns"] >= 0.97 * cpu_ns[tid] - 20e6,
                  f"CPU thread {tid} was given {t['hold_ns'] / 1e6:.0f} ms of holds in the recording but computed "
                  f"{cpu_ns[tid] / 1e6:.0f} ms (CPU time) in it: it cannot compute without the GIL")
        if cpu_share is None or 0.35 <= cpu_share <= 0.65:
            check(0.35 <= t["hold_share"] <= 0.65, f"CPU thread {tid} held {t['hold_share']:.1%}, expected 35-65 %")
    check(sum(raw.thread(tid)["hold_share"] for tid in roles["cpu"]) >= 0.8,
          "the CPU threads together held the GIL less than 80 % of the time")
    s = raw.thread(roles["sleeper"])
    check(s["hold_share"] < 0.05, f"sleeper held {s['hold_share']:.1%}, expected < 5 %")
    check(s["wait_share"] > 0.30, f"sleeper waited {s['wait_share']:.1%}, expected > 30 %")
    check(raw.summary["gil_busy_share"] <= 1.0, f"GIL busy {raw.summary['gil_busy_share']} > 100 %")
    print(f"record {raw.meta['python_version']}: " + ", ".join(
        f"{name} {t['hold_share']:.1%} hold / {t['wait_share']:.1%} wait" for name, t in
        [(f"cpu{i}", raw.thread(tid)) for i, tid in enumerate(roles["cpu"])] + [("sleeper", s)]) +
        f"; coverage {raw.summary['coverage']:.1%}, {raw.summary['rate_achieved_hz']:.0f} polls/s" +
        "".join(f"; cpu{i} {raw.thread(tid)['hold_ns'] / 1e6:.0f} ms held, {cpu_ns[tid] / 1e6:.0f} ms computed"
                for i, tid in enumerate(roles["cpu"]) if tid in cpu_ns))
    assert_no_overlapping_holds(raw)
    assert_lanes_do_not_overlap(raw)


def scenario_record_launch(gilspy, python):
    d = tempfile.mkdtemp(prefix="gilspy-rec-")
    report = os.path.join(d, "report.json")
    run_gilspy(gilspy, "record", "-o", d, "--", python, os.path.join(WORKLOADS, "cpu_and_sleeper.py"), 4,
               env=workload_env(report), check_rc=0)
    raw = Raw(single_raw(d))
    roles = json.load(open(report))
    check(raw.summary["stop_reason"] == "target exited", f"stop reason {raw.summary['stop_reason']}")
    check_cpu_and_sleeper(raw, roles)
    check_trace(single_raw(d).replace(".json", ".trace.json"), raw)


def scenario_record_pid(gilspy, python):
    w = Workload(python, "cpu_and_sleeper.py", 30)
    try:
        d = tempfile.mkdtemp(prefix="gilspy-rec-")
        out = run_gilspy(gilspy, "record", "-p", w.pid, "-d", 3, "-o", d, check_rc=0)
        check("GIL_%d_rank_0.json" % w.pid in out.stdout, f"record did not say where the file went: {out.stdout}")
        raw = Raw(single_raw(d))
        check(raw.summary["stop_reason"] == "duration", f"stop reason {raw.summary['stop_reason']}")
        check(2.9e9 <= raw.summary["duration_ns"] <= 3.3e9, f"duration {raw.summary['duration_ns']} ns for -d 3")
        check_cpu_and_sleeper(raw, w.info)
        check_trace(single_raw(d).replace(".json", ".trace.json"), raw)
    finally:
        w.kill()


def scenario_pid_namespace(gilspy, python):
    """A Python in its own PID and mount namespaces (a container's view: its threads are 1, 2, 3 ... and its
    interpreter lies on a mount the host cannot see): the same waits as outside, host tids in the output with
    the namespace's own beside them."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        raise Failure("needs root and unshare(1) (util-linux) to make PID namespaces")
    ns_dir = tempfile.mkdtemp(prefix="gilspy-nsonly-")

    def in_namespace(argv):
        # The interpreter is reached through a tmpfs mounted only inside the namespace: the system's static
        # binary is copied there (its stdlib stays at /usr/lib); a pyenv build or a fetched Debian unstable one
        # has its prefix (bin/ and lib/, where it finds its stdlib from its own path) bind-mounted there,
        # libpython and glibc coming through absolute RPATHs.
        python_bin = argv[0]
        system = python_bin.startswith("/usr/bin/")
        copy = (f"cp {python_bin} {ns_dir}/python" if system else
                f"mkdir {ns_dir}/py && mount --bind {os.path.dirname(os.path.dirname(python_bin))} {ns_dir}/py")
        target = f"{ns_dir}/python" if system else f"{ns_dir}/py/bin/{os.path.basename(python_bin)}"
        script = f"mount -t tmpfs none {ns_dir} && {copy} && exec {target} " + " ".join(argv[1:])
        return ["unshare", "--pid", "--mount", "--fork", "--mount-proc", "--kill-child", "sh", "-c", script]

    w = Workload(python, "cpu_and_sleeper.py", 30, launcher=in_namespace)
    try:
        pid = w.pid
        with open(f"/proc/{pid}/status") as f:
            nspid = [l.split()[1:] for l in f if l.startswith("NSpid:")][0]
        check(nspid[-1] == "1" and nspid[0] == str(pid), f"workload {pid} is not pid 1 of a namespace: NSpid {nspid}")
        check(not os.listdir(ns_dir), f"{ns_dir} is visible from the host: {os.listdir(ns_dir)}")
        d = tempfile.mkdtemp(prefix="gilspy-rec-")
        run_gilspy(gilspy, "record", "-p", pid, "-d", 3, "-o", d, check_rc=0)
        raw = Raw(single_raw(d))
        starts = [e for e in raw.events if e[0] == "T"]
        host_of = {}
        for e in starts:
            check(len(e) >= 6 and e[5] > 0, f"thread start {e} has no namespace tid")
            check(os.path.exists(f"/proc/{pid}/task/{e[1]}"), f"thread start {e}: {e[1]} is not a host tid of {pid}")
            host_of[e[5]] = e[1]
        check(host_of.get(1) == pid and raw.threads[pid] == "MainThread",
              f"the main thread (1 in the namespace) should be {pid}, MainThread: {starts}")
        roles = {"cpu": [host_of.get(t, t) for t in w.info["cpu"]], "sleeper": host_of.get(w.info["sleeper"])}
        check_cpu_and_sleeper(raw, roles)
        trace = single_raw(d).replace(".json", ".trace.json")
        check_trace(trace, raw)
        names = [e["args"]["name"] for e in json.load(open(trace))["traceEvents"] if e.get("name") == "thread_name"]
        check(any("tid 1 in its PID namespace" in n for n in names), f"lane names do not give namespace tids: {names}")
        info = json.loads(run_gilspy(gilspy, "info", "-p", pid, "--json", check_rc=0).stdout)
        check(info["other_pid_namespace"] and {t["ns_tid"] for t in info["threads"]} >= {1},
              f"info does not show namespace tids: {info['threads']}")
        # Both pids in the file; the trace as the container sees it (--pid-namespace target).
        check(raw.meta.get("ns_pid") == 1, f"meta has ns_pid {raw.meta.get('ns_pid')}, expected 1")
        target = os.path.join(d, "target.trace.json")
        run_gilspy(gilspy, "convert", "-i", single_raw(d), "--pid-namespace", "target", "-o", target, check_rc=0)
        doc = check_trace(target, raw)
        check({e["pid"] for e in doc["traceEvents"]} == {1}, "--pid-namespace target: not all in pid 1")
        lane_tids = {e["tid"] for e in doc["traceEvents"] if e["ph"] == "X" and e["name"] == "hold_gil"}
        check(lane_tids and lane_tids <= set(host_of), f"--pid-namespace target: lanes {lane_tids}, namespace tids {sorted(host_of)}")
        # A profiler inside the container saw pid 1 and the namespace tids: the merge finds the process by them.
        start_ns = raw.meta["clock"]["realtime_ns"]
        base = start_ns // 10**9 * 10**9
        events = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "ts": 0, "args": {"name": "python"}}]
        for ns_tid in host_of:
            events.append({"ph": "X", "name": "step", "pid": 1, "tid": ns_tid, "ts": (start_ns - base) / 1000,
                           "dur": raw.summary["duration_ns"] / 1000})
        profile = os.path.join(d, "container.pt.trace.json")
        with open(profile, "w") as f:
            json.dump({"traceEvents": events, "distributedInfo": {"rank": 0}, "baseTimeNanoseconds": base}, f)
        merged = os.path.join(d, "merged.json")
        out = run_gilspy(gilspy, "convert", "-i", single_raw(d), "--merge-into", profile, "-o", merged, check_rc=0)
        check("its pid in its own PID namespace" in out.stdout, f"merge did not match the namespace pid: {out.stdout}")
        run_trace_checker("--merged", merged)
        gil = json.load(open(merged))["traceEvents"][len(events):]
        names = {e["tid"]: e["args"]["name"] for e in gil if e["ph"] == "M" and e["name"] == "thread_name"}
        check(all(e["pid"] == 1 for e in gil) and names.get(1_000_000_001) == "GIL 1 (MainThread)",
              f"merged lanes of the container: {names}")
    finally:
        w.kill()


def scenario_record_multi(gilspy, python):
    """Four processes in one recording (-p A,B,C,D): no rank, RANK=3, LOCAL_RANK=5 alone, and RANK=2 with
    LOCAL_RANK=6 (RANK wins); then all merged on one timeline, laid out in rank order."""
    a = Workload(python, "cpu_threads.py", 30, 2)
    b = Workload(python, "cpu_threads.py", 30, 3, env={"RANK": "3"})
    c = Workload(python, "cpu_threads.py", 30, 2, env={"LOCAL_RANK": "5"})
    e = Workload(python, "cpu_threads.py", 30, 2, env={"RANK": "2", "LOCAL_RANK": "6"})
    ranks = ((a, 0), (b, 3), (c, 5), (e, 2))
    try:
        d = tempfile.mkdtemp(prefix="gilspy-rec-")
        run_gilspy(gilspy, "record", "-p", ",".join(str(w.pid) for w, _ in ranks), "-d", 2, "-o", d, check_rc=0)
        files = {w: os.path.join(d, f"GIL_{w.pid}_rank_{rank}.json") for w, rank in ranks}
        for w, path in files.items():
            check(os.path.exists(path), f"no {os.path.basename(path)} in {sorted(os.listdir(d))}")
            raw = Raw(path)
            cpu = set(w.info["cpu"])
            check(cpu <= set(raw.threads), f"pid {w.pid}: threads {sorted(raw.threads)} miss CPU threads {cpu}")
            check(set(t for t, _, _ in raw.holds) <= set(raw.threads), f"pid {w.pid}: a hold of an unknown thread")
            total = sum(raw.thread(t)["hold_share"] for t in cpu)
            check(total > 0.8, f"pid {w.pid}: its CPU threads held the GIL only {total:.0%} of the time")
            assert_no_overlapping_holds(raw)
            check_trace(path.replace(".json", ".trace.json"), raw)
        merged = os.path.join(d, "merged.trace.json")
        inputs = [arg for w, _ in ranks for arg in ("-i", files[w])]
        run_gilspy(gilspy, "convert", *inputs, "-o", merged, check_rc=0)
        doc = json.load(open(merged))
        meta = [ev for ev in doc["traceEvents"] if ev["ph"] == "M"]
        procs = {ev["pid"]: ev["args"]["name"] for ev in meta if ev["name"] == "process_name"}
        check(set(procs) == {w.pid for w, _ in ranks}, f"merged trace has processes {procs}")
        check_trace(merged, [Raw(files[w]) for w, _ in ranks])
        for w, rank in ranks[1:]:
            check(f"rank {rank}" in procs[w.pid], f"process name {procs[w.pid]!r} does not say rank {rank}")
        order = {ev["pid"]: ev["args"]["sort_index"] for ev in meta if ev["name"] == "process_sort_index"}
        by_order = sorted((w for w, _ in ranks), key=lambda w: order.get(w.pid, 1 << 30))
        check([dict(ranks)[w] for w in by_order] == [0, 2, 3, 5], f"processes laid out as {order}, not by rank")
    finally:
        for w, _ in ranks:
            w.kill()


def scenario_long_c_call(gilspy, python):
    d = tempfile.mkdtemp(prefix="gilspy-rec-")
    report = os.path.join(d, "report.json")
    run_gilspy(gilspy, "record", "-o", d, "--", python, os.path.join(WORKLOADS, "long_c_call.py"),
               env=workload_env(report), check_rc=0)
    raw = Raw(single_raw(d))
    info = json.load(open(report))
    s0 = info["sort_start_ns"] - raw.meta["clock"]["monotonic_ns"]
    s1 = info["sort_end_ns"] - raw.meta["clock"]["monotonic_ns"]
    check(info["sort_cpu_ns"] > 100e6, f"the sort took only {info['sort_cpu_ns'] / 1e6:.0f} ms; too short to judge")

    def overlap(a0, a1):
        return max(0, min(a1, s1) - max(a0, s0))

    # The clock reads around the sort are Python code: a pending drop request can hand the GIL over between
    # a clock read and the sort, so [s0, s1] may include waits. The sort itself runs on the CPU with the GIL
    # held throughout: one hold must last at least the sort's CPU time, lie inside the window (give or take a
    # poll's lateness), and be the only long one.
    cpu_ns = info["sort_cpu_ns"]
    slack = max(2e6, raw.summary["max_lateness_ns"]) + 2 * 1e9 / raw.meta["rate_hz"]
    holds = sorted((h for h in raw.holds if h[0] == info["sorter"]), key=lambda h: -overlap(h[1], h[2]))
    check(holds, "the sorter never held the GIL")
    h = holds[0]
    check(h[2] - h[1] >= 0.97 * cpu_ns,
          f"the sorter's longest hold is {(h[2] - h[1]) / 1e6:.0f} ms for a sort of {cpu_ns / 1e6:.0f} ms CPU time")
    check(h[1] >= s0 - slack and h[2] <= s1 + slack,
          f"the long hold [{h[1]}, {h[2]}] is not inside the sort's window [{s0}, {s1}] (slack {slack / 1e6:.1f} ms)")
    check(all(o[2] - o[1] < 0.5 * cpu_ns for o in holds[1:]), f"more than one long hold over the sort: {holds[:3]}")
    check_trace(single_raw(d).replace(".json", ".trace.json"), raw)
    for tid in info["spinners"]:
        waited = sum(max(0, min(w1, h[2]) - max(w0, h[1])) for t, w0, w1 in raw.waits if t == tid)
        check(waited >= 0.9 * (h[2] - h[1]), f"spinner {tid} waited {waited / (h[2] - h[1]):.1%} of the long hold")
    assert_no_overlapping_holds(raw)


def scenario_churn(gilspy, python):
    d = tempfile.mkdtemp(prefix="gilspy-rec-")
    report = os.path.join(d, "report.json")
    run_gilspy(gilspy, "record", "-o", d, "--", python, os.path.join(WORKLOADS, "thread_churn.py"), 3,
               env=workload_env(report), check_rc=0)
    raw = Raw(single_raw(d))
    info = json.load(open(report))
    known = set(info["tids"]) | {info["main"]}
    check(info["started"] > 40, f"only {info['started']} threads were started")
    for tid, s, e in raw.holds + raw.waits:
        check(tid in raw.threads, f"interval of thread {tid}, which was never announced")
        check(tid in known, f"interval of thread {tid}, which is not a thread of the workload")
    starts = {}
    for ev in raw.events:
        if ev[0] == "T":
            starts.setdefault(ev[1], []).append(ev[2])
    # A thread state being set up for a new thread still carries its creator's identity (before 3.11): it must
    # not show up as a second main thread.
    check(len(starts.get(info["main"], [])) == 1,
          f"the main thread was announced {len(starts.get(info['main'], []))} times")
    for tid, s, e in raw.holds:
        end = raw.ends.get(tid)
        check(min(starts[tid]) <= s and (end is None or e <= end),
              f"hold [{s}, {e}] of thread {tid} lies outside its life [{min(starts[tid])}, {end}]")
    assert_no_overlapping_holds(raw)
    check(len(raw.threads) > 20, f"only {len(raw.threads)} threads were seen of {info['started']} started")
    check_trace(single_raw(d).replace(".json", ".trace.json"), raw)


# --- faults and bad input -----------------------------------------------------------------------------------

def scenario_target_exits(gilspy, python):
    w = Workload(python, "cpu_threads.py", 1.5, 2)
    d = tempfile.mkdtemp(prefix="gilspy-rec-")
    out = run_gilspy(gilspy, "record", "-p", w.pid, "-d", 20, "-o", d)
    w.wait()
    check(out.returncode == 1, f"exit {out.returncode}, expected 1 when the target exits before -d")
    check("exited" in out.stderr, f"no word of the target's exit: {out.stderr!r}")
    raw = Raw(single_raw(d))
    check(raw.summary["stop_reason"] == "target exited", f"stop reason {raw.summary['stop_reason']}")
    check(len(raw.holds) > 10, f"only {len(raw.holds)} holds recorded before the exit")
    check_trace(single_raw(d).replace(".json", ".trace.json"), raw)


def record_and_signal(gilspy, python, sig, duration):
    w = Workload(python, "cpu_threads.py", 30, 2)
    try:
        d = tempfile.mkdtemp(prefix="gilspy-rec-")
        args = [gilspy, "record", "-p", str(w.pid), "-o", d] + (["-d", str(duration)] if duration else [])
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        p.send_signal(sig)
        stdout, stderr = p.communicate(timeout=30)
        return p.returncode, stdout, stderr, d
    finally:
        w.kill()


def scenario_signals(gilspy, python):
    for sig, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")):
        rc, out, err, d = record_and_signal(gilspy, python, sig, 30)
        check(rc == 128 + sig, f"{name} during -d 30: exit {rc}, expected {128 + sig}; stderr {err!r}")
        check(name in err and err.strip().count("\n") == 0, f"{name}: expected one line naming it, got {err!r}")
        raw = Raw(single_raw(d))
        check(raw.summary["stop_reason"] == name, f"stop reason {raw.summary['stop_reason']}, expected {name}")
        check(len(raw.holds) > 10, f"{name}: only {len(raw.holds)} holds kept")
        check_trace(single_raw(d).replace(".json", ".trace.json"), raw)
        rc, out, err, d = record_and_signal(gilspy, python, sig, None)
        check(rc == 0, f"{name} ending an open-ended recording: exit {rc}, expected 0; stderr {err!r}")
        check_trace(single_raw(d).replace(".json", ".trace.json"), Raw(single_raw(d)))


def check_two_complete(d, pids, what):
    """Both targets' raw files and traces are complete and valid, and nothing is left unfinished."""
    left = [f for f in os.listdir(d) if f.endswith(".partial") or f.endswith(".tmp")]
    check(not left, f"{what}: unfinished files left: {left}")
    raws = []
    for pid in pids:
        path = os.path.join(d, f"GIL_{pid}_rank_0.json")
        check(os.path.exists(path), f"{what}: no {os.path.basename(path)} in {sorted(os.listdir(d))}")
        raw = Raw(path)
        check(len(raw.holds) > 5, f"{what}: pid {pid}: only {len(raw.holds)} holds kept")
        check_trace(path.replace(".json", ".trace.json"), raw)
        raws.append(raw)
    return raws


def scenario_signals_all(gilspy, python):
    """Every catchable signal whose default would end gilspy, during a two-target recording; then a closed
    stdout (`gilspy record ... | true`)."""
    a = Workload(python, "cpu_threads.py", 60, 2)
    b = Workload(python, "cpu_threads.py", 60, 2)
    try:
        stopping = ["SIGHUP", "SIGINT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGQUIT", "SIGALRM"]
        for name in stopping + ["SIGPIPE"]:
            sig = getattr(signal, name)
            d = tempfile.mkdtemp(prefix="gilspy-rec-")
            # SIGPIPE is ignored (only a closed stdout matters): that recording runs its 2.5 s to the end.
            p = subprocess.Popen([gilspy, "record", "-p", f"{a.pid},{b.pid}", "-o", d, "-d", "2.5"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 10
            while len([f for f in os.listdir(d) if f.endswith(".partial")]) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)
            p.send_signal(sig)
            out, err = p.communicate(timeout=30)
            if name == "SIGPIPE":
                check(p.returncode == 0, f"{name}: exit {p.returncode}, expected 0 (ignored); stderr {err!r}")
            else:
                check(p.returncode == 128 + sig, f"{name}: exit {p.returncode}, expected {128 + sig}; stderr {err!r}")
                check(name in err and err.strip().count("\n") == 0, f"{name}: expected one line naming it: {err!r}")
            for raw in check_two_complete(d, (a.pid, b.pid), name):
                expected = "duration" if name == "SIGPIPE" else name
                check(raw.summary["stop_reason"] == expected,
                      f"{name}: stop reason {raw.summary['stop_reason']!r}, expected {expected!r}")
        d = tempfile.mkdtemp(prefix="gilspy-rec-")
        r, w = os.pipe()
        os.close(r)  # stdout is a pipe nobody reads: the first summary line meets EPIPE
        p = subprocess.Popen([gilspy, "record", "-p", f"{a.pid},{b.pid}", "-o", d, "-d", "1.5"], stdout=w,
                             stderr=subprocess.PIPE, text=True)
        os.close(w)
        _, err = p.communicate(timeout=30)
        check(p.returncode == 0, f"closed stdout: exit {p.returncode}, expected 0; stderr {err!r}")
        check_two_complete(d, (a.pid, b.pid), "closed stdout")
    finally:
        a.kill()
        b.kill()


def scenario_target_execs(gilspy, python):
    """The target exec()s another program mid-recording: said so (not "exited"), files complete."""
    w = Workload(python, "execs.py", 1.5)
    try:
        d = tempfile.mkdtemp(prefix="gilspy-rec-")
        out = run_gilspy(gilspy, "record", "-p", w.pid, "-d", 8, "-o", d, "--no-status")
        one_line_error_text = out.stderr.strip()
        check(out.returncode == 1, f"exit {out.returncode}, expected 1; stderr {one_line_error_text!r}")
        check("exec'd another program" in one_line_error_text and "sleep" in one_line_error_text and
              one_line_error_text.count("\n") == 0, f"expected one line saying it exec'd sleep: {one_line_error_text!r}")
        check(os.path.exists(f"/proc/{w.pid}"), "the target should still live (it runs sleep)")
        raw = Raw(single_raw(d))
        check(raw.summary["stop_reason"] == "target exec'd another program", f"stop reason {raw.summary['stop_reason']!r}")
        held = sum(end - start for _, start, end in raw.holds)
        check(held > 0.5e9, f"only {held / 1e9:.2f} s held before the exec (a thread spun for about 1.5 s)")
        check(raw.summary["duration_ns"] < 6e9, f"recorded {raw.summary['duration_ns'] / 1e9:.1f} s, expected to stop soon after the exec")
        check_trace(single_raw(d).replace(".json", ".trace.json"), raw)
    finally:
        w.kill()


def scenario_target_stopped(gilspy, python):
    """SIGSTOP for about a second mid-recording: marked as a process_stopped interval of that length."""
    w = Workload(python, "cpu_threads.py", 30, 2)
    try:
        d = tempfile.mkdtemp(prefix="gilspy-rec-")
        p = subprocess.Popen([gilspy, "record", "-p", str(w.pid), "-d", "3", "-o", d, "--no-status"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        os.kill(w.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        time.sleep(1.0)
        os.kill(w.pid, signal.SIGCONT)
        stopped_for = time.monotonic() - stopped_at
        out, err = p.communicate(timeout=30)
        check(p.returncode == 0, f"exit {p.returncode}; stderr {err!r}")
        raw = Raw(single_raw(d))
        stops = [e for e in raw.events if e[0] == "P"]
        check(len(stops) == 1, f"expected one process-stopped interval, got {stops}")
        # The stop is seen at re-walks, every 20 ms: each end may be off by that (and by a busy machine's lag).
        check(abs(stops[0][2] / 1e9 - stopped_for) < 0.1,
              f"stopped for {stopped_for:.3f} s, recorded {stops[0][2] / 1e9:.3f} s")
        check(raw.summary["stops"] == 1 and raw.summary["stopped_ns"] == stops[0][2], f"summary: {raw.summary}")
        said = f"stopped (SIGSTOP, a debugger) 1 time for {stops[0][2] / 1e9:.2f} s in all"
        check(said in out, f"the printed summary does not say {said!r}: {out}")
        trace = json.load(open(single_raw(d).replace(".json", ".trace.json")))
        marks = [e for e in trace["traceEvents"] if e.get("name") == "process_stopped"]
        check(len(marks) == 1 and abs(marks[0]["dur"] / 1e6 - stopped_for) < 0.1, f"trace marks: {marks}")
        check_trace(single_raw(d).replace(".json", ".trace.json"), raw)
    finally:
        os.kill(w.pid, signal.SIGCONT)
        w.kill()


def scenario_sigkill(gilspy, python):
    w = Workload(python, "cpu_threads.py", 30, 2)
    try:
        d = tempfile.mkdtemp(prefix="gilspy-rec-")
        p = subprocess.Popen([gilspy, "record", "-p", str(w.pid), "-o", d], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        time.sleep(2)
        p.kill()
        p.wait()
    finally:
        w.kill()
    partial = os.path.join(d, f"GIL_{w.pid}_rank_0.json.partial")
    check(os.path.exists(partial), f"no {partial} after SIGKILL: {os.listdir(d)}")
    check(not os.path.exists(partial[:-len(".partial")]), "a final file exists though the recording was killed")
    out_path = os.path.join(d, "recovered.trace.json")
    out = run_gilspy(gilspy, "convert", "-i", partial, "-o", out_path, check_rc=0)
    check("recover" in out.stderr.lower(), f"convert did not say it recovered: {out.stderr!r}")
    doc = json.load(open(out_path))
    holds = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["name"] == "hold_gil"]
    check(len(holds) > 50, f"only {len(holds)} holds recovered from 2 s of recording")
    check_trace(out_path, None)


def scenario_convert_bad_input(gilspy, python):
    d = tempfile.mkdtemp(prefix="gilspy-bad-")
    good_dir = tempfile.mkdtemp(prefix="gilspy-rec-")
    run_gilspy(gilspy, "record", "--no-trace", "-o", good_dir, "--", python,
               os.path.join(WORKLOADS, "cpu_threads.py"), 0.5, 2, env=workload_env(), check_rc=0)
    good = open(single_raw(good_dir), "rb").read()
    cases = {
        "empty.json": b"",
        "garbage.json": b"hello, this is not JSON at all\n",
        "array.json": b"[1, 2, 3]\n",
        "other.json": b'{"a": 1}\n',
        "wrong_format.json": b'{"format":"something-else","meta":{}}\n',
        "cut_in_meta.json": good[:60],
        "binary.json": bytes(range(256)) * 4,
    }
    for name, data in cases.items():
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(data)
        out = run_gilspy(gilspy, "convert", "-i", path, "-o", os.path.join(d, "out.json"))
        one_line_error(out, name)
        check(not os.path.exists(os.path.join(d, "out.json")), f"{name}: an output file was left behind")
    out = run_gilspy(gilspy, "convert", "-i", os.path.join(d, "missing.json"), "-o", os.path.join(d, "o.json"))
    one_line_error(out, "missing.json")
    # --no-stacks (no frame slices in a trace) says nothing to folded stacks: refused, not ignored.
    out = run_gilspy(gilspy, "convert", "-i", single_raw(good_dir), "--format", "collapsed", "--no-stacks")
    one_line_error(out, "--no-stacks")
    check(out.returncode == 2, f"--no-stacks with --format collapsed: exit {out.returncode}, expected 2")
    # The output is an input (itself, or through a link): refused, the recording left as it was.
    rec = os.path.join(d, "rec.json")
    with open(rec, "wb") as f:
        f.write(good)
    os.symlink(rec, os.path.join(d, "link.json"))
    for given in ("rec.json", "link.json"):
        out = run_gilspy(gilspy, "convert", "-i", os.path.join(d, given), "-o", rec)
        one_line_error(out, "also an input", given)
        check(open(rec, "rb").read() == good, f"-i {given} -o rec.json: the recording was changed")
    out = run_gilspy(gilspy, "convert", "-i", rec, "--merge-into", rec, "-o", rec)
    one_line_error(out, "also an input")
    # --format collapsed writes no trace: refused with --merge-into (it was ignored), nothing written.
    out = run_gilspy(gilspy, "convert", "-i", rec, "--merge-into", os.path.join(d, "p.json"), "--format",
                     "collapsed", "-o", os.path.join(d, "m.json"))
    one_line_error(out, "--format collapsed", "--merge-into")
    check(not os.path.exists(os.path.join(d, "m.json")), "--format collapsed --merge-into wrote a file")
    # A FIFO nobody writes to would block a reader for ever; a folder is not a recording.
    fifo = os.path.join(d, "fifo.json")
    os.mkfifo(fifo)
    out = run_gilspy(gilspy, "convert", "-i", fifo, "-o", os.path.join(d, "o.json"), timeout=20)
    one_line_error(out, "fifo.json", "not a regular file")
    out = run_gilspy(gilspy, "convert", "-i", good_dir, "-o", os.path.join(d, "o.json"))
    one_line_error(out, "is a folder")
    # PyTorch's legacy profiler's trace (a bare array, pid "CPU functions", µs after the profiler started):
    # refused in one line naming --align-at without it; with it, the lanes go into "CPU functions".
    start_ns = Raw(rec).meta["clock"]["realtime_ns"]
    legacy = os.path.join(d, "legacy.json")
    with open(legacy, "w") as f:
        f.write('[{"name": "step", "ph": "X", "ts": 0.5, "dur": 600000000.0, "tid": 1, "pid": "CPU functions", '
                '"args": {}}]')
    merged = os.path.join(d, "legacy.merged.json")
    out = run_gilspy(gilspy, "convert", "-i", rec, "--merge-into", legacy, "-o", merged)
    one_line_error(out, "legacy.json", "--align-at NS")
    check(not os.path.exists(merged), "a legacy trace without --align-at: a file was written")
    out = run_gilspy(gilspy, "convert", "-i", rec, "--merge-into", legacy, "-o", merged, "--align-at",
                     f"step@{start_ns - 1000}", check_rc=0)
    check('in process "CPU functions"' in out.stdout and "--align-at" in out.stdout,
          f"the legacy merge does not say where the lanes went and on what times: {out.stdout!r}")
    run_trace_checker("--merged", merged)
    added = json.load(open(merged))[1:]
    check(added and {e["pid"] for e in added} == {"CPU functions"}, "legacy merge: GIL events outside CPU functions")
    holds = [e for e in added if e["ph"] == "X" and e["name"] == "hold_gil"]
    check(holds and min(e["ts"] for e in holds) >= 0.5, f"legacy merge: holds before the aligned step: {holds[:1]}")


def scenario_bad_pid(gilspy, python):
    # a command that does not exist: one line naming it and every command there is, usage error (2)
    out = run_gilspy(gilspy, "recrod", "-p", 1)
    one_line_error(out, "recrod")
    for command in ("info", "dump", "record", "top", "convert", "check"):
        check(command in out.stderr, f"the unknown-command error lists '{command}': {out.stderr!r}")
    check(out.returncode == 2, f"an unknown command is a usage error (2), got {out.returncode}")
    for command in ("info", "dump"):
        out = run_gilspy(gilspy, command, "-p", 999999999)
        one_line_error(out, "999999999")
    out = run_gilspy(gilspy, "record", "-p", 999999999, "-d", 1, "-o", tempfile.mkdtemp())
    one_line_error(out, "999999999")
    out = run_gilspy(gilspy, "record", "-p", "12,abc", "-d", 1)
    one_line_error(out, "abc")
    check(out.returncode == 2, f"a malformed PID list is a usage error (2), got {out.returncode}")
    out = run_gilspy(gilspy, "record", "-p", "12,12", "-d", 1)
    one_line_error(out, "twice")
    # no -p and no program records every Python process; flags that need named targets are usage errors
    out = run_gilspy(gilspy, "record", "--subprocesses", "-d", 1)
    one_line_error(out, "-p")
    check(out.returncode == 2, f"--subprocesses without targets is a usage error (2), got {out.returncode}")
    out = run_gilspy(gilspy, "record", "-p", "1", "--no-follow", "-d", 1)
    one_line_error(out, "--no-follow")
    check(out.returncode == 2, f"--no-follow with -p is a usage error (2), got {out.returncode}")
    out = run_gilspy(gilspy, "record", "-o", tempfile.mkdtemp(), "--", "/nonexistent/python3", "x.py")
    one_line_error(out, "/nonexistent/python3")
    # top: the same errors and exit codes as record
    out = run_gilspy(gilspy, "top", "-p", 999999999)
    one_line_error(out, "999999999")
    check(out.returncode == 1, f"top -p on no process: exit {out.returncode}, expected 1")
    out = run_gilspy(gilspy, "top", "-p", "12,abc")
    one_line_error(out, "abc")
    check(out.returncode == 2, f"top: a malformed PID list is a usage error (2), got {out.returncode}")
    for args in (["--subprocesses"], ["-p", "1", "--", "python3"], ["-p", "1", "--interval", "0"], ["-p", "1", "-n", "0"]):
        out = run_gilspy(gilspy, "top", *args)
        one_line_error(out)
        check(out.returncode == 2, f"top {args}: exit {out.returncode}, expected 2")
    out = run_gilspy(gilspy, "top", "--", "/nonexistent/python3", "x.py")
    one_line_error(out, "/nonexistent/python3")


def scenario_not_python(gilspy, python):
    p = subprocess.Popen(["sleep", "100"])
    try:
        time.sleep(0.2)
        for args in (["info", "-p", p.pid], ["dump", "-p", p.pid], ["record", "-p", p.pid, "-d", 1, "-o", tempfile.mkdtemp()],
                     ["top", "-p", p.pid, "-n", 1]):
            one_line_error(run_gilspy(gilspy, *args), "not a CPython")
    finally:
        p.kill()
        p.wait()
    # A process that has exited and is not reaped yet (a zombie maps nothing): said to have exited, not to be
    # "not a CPython process (no _PyRuntime in no executable or library mapped)".
    z = subprocess.Popen(["true"])
    try:
        time.sleep(0.3)  # exited by now; not waited for
        one_line_error(run_gilspy(gilspy, "info", "-p", z.pid), f"process {z.pid} exited")
    finally:
        z.wait()


def scenario_long_switch_interval(gilspy, python):
    """sys.setswitchinterval(1000) is a legal setting, not a sign of a wrong layout: recorded (the raw file
    keeps it) with a note saying so, and shown by info; it used to be refused as not plausible."""
    p = subprocess.Popen([python, "-c", "import sys, time; sys.setswitchinterval(1000); print('ready', flush=True); "
                          "time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        check(p.stdout.readline().strip() == "ready", "the target did not start")
        d = tempfile.mkdtemp(prefix="gilspy-interval-")
        out = run_gilspy(gilspy, "record", "-p", p.pid, "-d", 0.5, "--no-status", "-o", d, check_rc=0)
        check("switch interval is 1000000000 µs" in out.stderr, f"no note about the interval: {out.stderr!r}")
        meta = Raw(single_raw(d)).meta
        check(meta["switch_interval_us"] == 1_000_000_000, f"switch_interval_us {meta['switch_interval_us']}")
        out = run_gilspy(gilspy, "info", "-p", p.pid, check_rc=0)
        check("switch interval 1000000000" in out.stdout, f"info: {out.stdout!r}")
    finally:
        p.kill()
        p.wait()


def scenario_old_python(gilspy, python):
    p = subprocess.Popen([python, os.path.join(WORKLOADS, "sleeper.py"), "30"])
    try:
        time.sleep(0.5)
        # One message of one shape for every version gilspy does not read (2.7 and 3.6 have no _PyRuntime, 3.7
        # has no layout table): the pid, the version, and what is supported.
        v = subprocess.run([python, "-V"], capture_output=True, text=True)  # Python 2 says it on stderr
        version = (v.stdout + v.stderr).strip().split()[-1]
        minor = ".".join(version.split(".")[:2])
        for args in (["info", "-p", p.pid], ["record", "-p", p.pid, "-d", 1, "-o", tempfile.mkdtemp()]):
            out = run_gilspy(gilspy, *args)
            one_line_error(out, f"process {p.pid} runs Python {minor}", "which gilspy does not support",
                           "it supports CPython 3.8")
    finally:
        p.kill()
        p.wait()


def scenario_exiting(gilspy, python):
    """A target that exits while gilspy reads it: every run ends cleanly, with 0 or one error line."""
    outcomes = set()
    for _ in range(3):
        p = subprocess.Popen([python, os.path.join(WORKLOADS, "cpu_threads.py"), "0.4", "2"],
                             env=dict(os.environ, PYTHONPATH=WORKLOADS))
        while p.poll() is None:
            out = run_gilspy(gilspy, "info", "-p", p.pid, "--json", "--wait", 0)
            check(out.returncode in (0, 1), f"info exited {out.returncode}: {out.stderr!r}")
            if out.returncode == 1:
                one_line_error(out)
            outcomes.add(out.returncode)
        p.wait()
    check(0 in outcomes, "never managed to read the target while it ran")


def scenario_no_permission(gilspy, python):
    p = subprocess.Popen([python, os.path.join(WORKLOADS, "sleeper.py"), "30"])
    try:
        time.sleep(0.5)
        # The checkout may live where uid 65534 cannot reach (/root/...): run a world-readable copy.
        copy_dir = tempfile.mkdtemp(prefix="gilspy-bin-")
        os.chmod(copy_dir, 0o755)
        binary = shutil.copy(gilspy, os.path.join(copy_dir, "gilspy"))
        os.chmod(binary, 0o755)
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", binary, "info", "-p", str(p.pid)]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        if "setpriv:" in out.stderr:
            raise Failure(f"cannot run gilspy as an unprivileged user: {out.stderr.strip()}")
        one_line_error(out, "permission")
        # With CAP_SYS_PTRACE on the binary, any user who can run it could read any process: it refuses another
        # user's unless --any-user. (A target whose files that user can read: Debian's /usr/bin/python3.11.)
        capped = shutil.copy(gilspy, os.path.join(copy_dir, "gilspy-capped"))
        os.chmod(capped, 0o755)
        r = subprocess.run(["setcap", "cap_sys_ptrace+ep", capped], capture_output=True, text=True)
        if r.returncode != 0:
            raise Failure(f"setcap cap_sys_ptrace+ep {capped}: {r.stderr.strip()}")
        system_python = "/usr/bin/python3.11"
        target = p if not os.path.exists(system_python) else subprocess.Popen(
            [system_python, os.path.join(WORKLOADS, "sleeper.py"), "30"])
        try:
            time.sleep(0.5)
            as_nobody_cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", capped, "info", "-p",
                             str(target.pid)]
            out = subprocess.run(as_nobody_cmd, capture_output=True, text=True, timeout=30)
            one_line_error(out, "another user (uid 0)", "--any-user")
            if target is not p:
                out = subprocess.run(as_nobody_cmd + ["--any-user"], capture_output=True, text=True, timeout=30)
                check(out.returncode == 0 and "GIL 0x" in out.stdout,
                      f"--any-user with CAP_SYS_PTRACE: exit {out.returncode}, {out.stderr.strip()!r}")
        finally:
            if target is not p:
                target.kill()
                target.wait()
    finally:
        p.kill()
        p.wait()


def scenario_python_api(gilspy, python):
    """The Python API with the seed's parameters, from inside the recorded process (tests/workloads/python_api.py):
    pid_list=[itself, a dead pid] with duration=2 records the contention inside its window only, ends by itself
    and names the dead pid; the defaults (every Python process, until stop) record it too."""
    d = tempfile.mkdtemp(prefix="gilspy-api-")
    out = subprocess.run([python, os.path.join(WORKLOADS, "python_api.py"), d], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, GILSPY_BIN=gilspy, PYTHONPATH=WORKLOADS))
    check(out.returncode == 0, f"python_api.py exited {out.returncode}: {out.stderr}")
    info = json.loads(out.stdout.strip().splitlines()[-1])
    pid = info["pid"]
    # 1. duration=2, pid_list=[pid, dead]: files per pid (JSON keys are strings), the dead one named.
    timed = info["timed"]
    check(list(timed) == [str(pid)], f"duration=2 recording: files for {list(timed)}, expected only {pid}")
    check(str(info["dead"]) in info["timed_skipped"], f"the dead pid {info['dead']} is not named: {info['timed_skipped']}")
    check(info["timed_exit"] == 1, f"a pid of the list was not recorded: exit {info['timed_exit']}, expected 1")
    files = timed[str(pid)]
    raw = Raw(files["raw"])
    check(raw.meta["pid"] == pid, f"recorded pid {raw.meta['pid']}, expected {pid}")
    check(raw.summary["stop_reason"] == "duration", f"stop reason {raw.summary['stop_reason']}, expected duration")
    check(1.9e9 <= raw.summary["duration_ns"] <= 2.3e9, f"duration {raw.summary['duration_ns']} ns for duration=2")
    for tid in info["inside"]:
        t = raw.thread(tid)
        check(t["holds"] > 10 and t["hold_share"] > 0.15 and t["wait_share"] > 0.15,
              f"CPU thread {tid} inside the window: {t['holds']} holds, held {t['hold_share']:.0%}, "
              f"waited {t['wait_share']:.0%}")
    for tid in info["before"] + info["after"]:
        check(tid not in raw.threads, f"thread {tid} ran outside the recording's window but is in it")
    assert_no_overlapping_holds(raw)
    check_trace(files["trace"], raw)
    check(files["summary"] == raw.summary, "stop()'s summary is not the raw file's")
    check(files["rank"] == 0 and files["stop_reason"] == "duration", f"stop()'s entry: {files}")
    # 2. The defaults: every Python process, this one among them, until stop.
    files = info["all"].get(str(pid))
    check(files is not None, f"pid_list=None did not record this process: {sorted(info['all'])}")
    raw = Raw(files["raw"])
    check(raw.summary["stop_reason"] == "SIGINT", f"stop reason {raw.summary['stop_reason']}")
    for tid in info["inside_all"]:
        check(raw.thread(tid)["holds"] > 10, f"CPU thread {tid}: only {raw.thread(tid)['holds']} holds recorded")
    for tid in info["inside"]:
        check(tid not in raw.threads, f"thread {tid} ended before the second recording but is in it")
    check_trace(files["trace"], raw)
    # A bad output_dir is the API's own error, not a bare OSError.
    bad = subprocess.run([python, "-c", "import gilspy\ntry:\n    gilspy.gil_trace_record_start(output_dir='/dev/null/x')\n"
                          "except gilspy.GilspyError as e:\n    print('GilspyError:', e)\n"],
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, GILSPY_BIN=gilspy,
                                  PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(WORKLOADS)), "python")))
    check(bad.returncode == 0 and bad.stdout.startswith("GilspyError: cannot use /dev/null/x"),
          f"bad output_dir: {bad.returncode} {bad.stdout!r} {bad.stderr!r}")


# --- issue 7: gilspy top -------------------------------------------------------------------------------------

def top_json_lines(out):
    check(out.returncode == 0, f"top exited {out.returncode}: {out.stderr!r}")
    lines = [l for l in out.stdout.splitlines() if l.strip()]
    return [json.loads(l) for l in lines]


def scenario_top_batch(gilspy, python):
    """Batch JSON: 3 CPU threads share the GIL, a sleeper barely holds it; -n stops after exactly COUNT."""
    w = Workload(python, "cpu_and_sleeper.py", 30, 3)
    try:
        cpu, sleeper = w.info["cpu"], w.info["sleeper"]
        snaps = top_json_lines(run_gilspy(gilspy, "top", "-p", w.pid, "--json", "-n", 3, timeout=60))
        check(len(snaps) == 3, f"-n 3 printed {len(snaps)} snapshots")
        for s in snaps:
            check(len(s["processes"]) == 1 and s["processes"][0]["pid"] == w.pid, f"processes {s['processes']}")
            check(0.9 <= s["interval_s"] <= 1.1, f"a snapshot covers {s['interval_s']} s for --interval 1")
        p = snaps[-1]["processes"][0]
        check(not p["ended"], "the process is shown as ended")
        threads = {t["tid"]: t for t in p["threads"]}
        check(set(cpu) | {sleeper, w.info["main"]} <= set(threads),
              f"threads {sorted(threads)}, expected cpu {cpu}, sleeper {sleeper}, main {w.info['main']}")
        check(2.5 <= snaps[-1]["totals_s"] <= 3.5, f"totals over {snaps[-1]['totals_s']} s after 3 snapshots")
        for tid in cpu:
            hold = threads[tid]["total"]["hold"]
            check(0.20 <= hold <= 0.50, f"CPU thread {tid} held {hold:.1%} over 3 snapshots, expected 20-50 %")
        s_hold = threads[sleeper]["total"]["hold"]
        check(s_hold < 0.05, f"sleeper held {s_hold:.1%}, expected < 5 %")
        check(p["total"]["gil_busy"] > 0.8, f"GIL busy {p['total']['gil_busy']:.1%} with 3 CPU threads")
        print(f"top {p['python_version']}: " + ", ".join(f"cpu {threads[t]['total']['hold']:.1%}" for t in cpu) +
              f", sleeper {s_hold:.2%}; busy {p['total']['gil_busy']:.1%}, {p['total']['poll_rate_hz']:.0f} polls/s")
        # By function: the CPU threads hold the GIL in spin_until (own time, the innermost frame), under cpu
        # (total); the sleeper waits in sleeper. Holds are credited as their stacks are read: most of the time.
        functions = {f["function"].split(" (")[0]: f for f in snaps[-1]["functions"]}
        spin = functions.get("spin_until", {})
        check(spin.get("own_hold_s", 0) >= 0.6 * snaps[-1]["interval_s"],
              f"spin_until held {spin.get('own_hold_s')} s of {snaps[-1]['interval_s']}: {list(functions)[:6]}")
        check(functions.get("cpu", {}).get("total_hold_s", 0) >= spin["own_hold_s"] * 0.99 and
              functions.get("cpu", {}).get("own_hold_s", 1) < 0.1 * spin["own_hold_s"],
              f"cpu's own and total hold: {functions.get('cpu')}")
        check(functions.get("sleeper", {}).get("own_wait_s", 0) > 0, f"sleeper's waits: {functions.get('sleeper')}")

        t0 = time.monotonic()
        snaps = top_json_lines(run_gilspy(gilspy, "top", "-p", w.pid, "--json", "-n", 2, "--interval", 0.5))
        took = time.monotonic() - t0
        check(len(snaps) == 2, f"-n 2 printed {len(snaps)} snapshots")
        check(took < 4, f"-n 2 --interval 0.5 took {took:.1f} s")

        out = run_gilspy(gilspy, "top", "-p", w.pid, "-n", 1, check_rc=0)  # not a terminal: batch text
        check("\x1b" not in out.stdout, "batch text holds an escape code")
        check(f"pid {w.pid}" in out.stdout and "HOLD%" in out.stdout and str(cpu[0]) in out.stdout,
              f"batch text lacks the process, the heading or a thread: {out.stdout!r}")
        out = run_gilspy(gilspy, "top", "-p", w.pid, "-n", 1, "--functions", check_rc=0)
        table = out.stdout[out.stdout.find("OWN HOLD"):]
        check("OWN HOLD" in out.stdout and re.search(r"^\s+\d+\.\d\s+\S+\s+\S+\s+\S+\s+\S+\s+spin_until \(common\.py:",
                                                     table.split("\n")[1] if "\n" in table else "", re.M),
              f"--functions: the function table does not start with spin_until: {table[:400]!r}")
    finally:
        w.kill()


class Pty:
    """gilspy in a pseudo-terminal that is its controlling terminal (so Ctrl+C raises SIGINT), 160x50."""

    def __init__(self, args, env=None):
        import fcntl
        import pty
        import struct
        import termios
        import threading
        self.master, self.slave = pty.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
        self.stty_before = self.stty()

        def controlling_tty():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(args, stdin=self.slave, stdout=self.slave, stderr=self.slave,
                                     preexec_fn=controlling_tty, env=dict(os.environ, **(env or {})))
        self.data = b""
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self.lock:
                self.data += chunk

    def stty(self):
        return subprocess.run(["stty", "-a"], stdin=self.slave, capture_output=True, text=True).stdout

    def text(self):
        with self.lock:
            return self.data.decode(errors="replace")

    def frame(self):
        """The last complete frame drawn, as plain lines."""
        import re
        frames = self.text().split("\x1b[H")
        for f in reversed(frames):
            if "\x1b[J" in f:
                f = re.sub(r"\x1b\[[0-9;]*m", "", f.split("\x1b[J")[0])
                return [l.lstrip("\r\n") for l in f.split("\x1b[K")]
        return []

    def wait_frame(self, pred, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            f = self.frame()
            if f and pred(f):
                return f
            time.sleep(0.05)
        raise Failure(f"no frame with {what} within {timeout} s; last frame: {self.frame()}")

    def send(self, data):
        os.write(self.master, data)

    def finish(self, timeout):
        t0 = time.monotonic()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise Failure(f"gilspy top did not exit within {timeout} s; last frame: {self.frame()}")
        took = time.monotonic() - t0
        time.sleep(0.2)  # the reader takes the last output
        return rc, took

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.slave)
        os.close(self.master)


def thread_rows(frame):
    """TIDs of the thread rows of the first process, in screen order."""
    tids, in_table = [], False
    for line in frame:
        if line.lstrip().startswith("TID "):
            in_table = True
            continue
        if in_table:
            parts = line.split()
            if not parts or not parts[0].isdigit():
                break
            tids.append(int(parts[0]))
    return tids


def check_restored(t, what):
    after = t.stty()
    check(after == t.stty_before, f"{what}: terminal modes not restored:\nbefore {t.stty_before}\nafter {after}")
    text = t.text()
    check(text.rfind("\x1b[?1049l") > text.rfind("\x1b[?1049h") >= 0, f"{what}: the alternate screen was not left")
    check(text.rfind("\x1b[?25h") > text.rfind("\x1b[?25l"), f"{what}: the cursor was not shown again")


def scenario_top_interactive(gilspy, python):
    """The live screen in a real pseudo-terminal: rows, sort keys, q / Ctrl+C / SIGTERM restore the terminal."""
    w = Workload(python, "cpu_and_sleeper.py", 60, 3)
    try:
        cpu, main_tid = set(w.info["cpu"]), w.info["main"]
        t = Pty([gilspy, "top", "-p", str(w.pid)])
        try:
            t0 = time.monotonic()
            f = t.wait_frame(lambda f: cpu <= set(thread_rows(f)), 8, "the CPU threads' rows")
            shown_after = time.monotonic() - t0
            check(any("h sort" in l or "q quit" in l for l in f), f"no help line: {f}")
            rows = thread_rows(f)
            check(rows[0] in cpu and rows.index(main_tid) > max(rows.index(c) for c in cpu),
                  f"sorted by HOLD%, a CPU thread should come first and the main thread after them: {rows}")
            t.send(b"i")
            f = t.wait_frame(lambda f: "sorted by TID" in f[0], 2, "'sorted by TID' after the key i")
            rows = thread_rows(f)
            check(rows == sorted(rows) and rows[0] == main_tid, f"sorted by TID, rows are {rows}")
            t.send(b"t")
            t.wait_frame(lambda f: "totals over" in f[0], 2, "totals after the key t")
            # f: the function view, sorted by own hold (h) the CPU threads' spin_until first; f again: the threads.
            t.send(b"hf")
            f = t.wait_frame(lambda f: any("OWN HOLD" in l for l in f), 2, "the function table after the key f")
            heading = next(i for i, l in enumerate(f) if "OWN HOLD" in l)
            check("spin_until (common.py:" in f[heading + 1], f"the first function is not spin_until: {f[heading:heading + 3]}")
            t.send(b"f")
            t.wait_frame(lambda f: cpu <= set(thread_rows(f)), 2, "the thread rows again after f")
            t.send(b"q")
            rc, took = t.finish(5)
            check(rc == 0, f"q: exit {rc}")
            check(took < 1.0, f"q: took {took:.2f} s to exit")
            check_restored(t, "q")
        finally:
            t.close()
        print(f"top: rows after {shown_after:.1f} s, h and i orders right, q exited 0 in {took:.2f} s")

        for how in ("Ctrl+C", "SIGTERM"):
            t = Pty([gilspy, "top", "-p", str(w.pid)])
            try:
                t.wait_frame(lambda f: cpu <= set(thread_rows(f)), 8, "the CPU threads' rows")
                if how == "Ctrl+C":
                    t.send(b"\x03")
                else:
                    t.proc.send_signal(signal.SIGTERM)
                rc, took = t.finish(5)
                check(rc == 0, f"{how}: exit {rc}")
                check_restored(t, how)
            finally:
                t.close()

        # Bad input on a terminal: one error line, the terminal never touched.
        t = Pty([gilspy, "top", "-p", "999999999"])
        try:
            rc, _ = t.finish(10)
            check(rc == 1, f"top -p 999999999 on a terminal exited {rc}")
            check("\x1b[?1049h" not in t.text() and "gilspy: error: " in t.text(), f"output {t.text()!r}")
            check(t.stty() == t.stty_before, "an error changed the terminal modes")
        finally:
            t.close()
    finally:
        w.kill()


def scenario_top_target_exits(gilspy, python):
    """The target exits: the live screen's last frame stays, with a note, and top exits 0; batch says ended."""
    t = Pty([gilspy, "top", "--", python, os.path.join(WORKLOADS, "cpu_threads.py"), "2.5", "2"],
            env=workload_env())
    try:
        rc, _ = t.finish(30)
        check(rc == 0, f"top exited {rc} when the launched program exited 0")
        check_restored(t, "target exit")
        after = t.text().split("\x1b[?1049l")[-1]
        check("exited" in after and "[ended]" in after and "MainThread" in after,
              f"the last screen was not left on the terminal: {after!r}")
    finally:
        t.close()

    w = Workload(python, "cpu_threads.py", 2.5, 2)
    try:
        snaps = top_json_lines(run_gilspy(gilspy, "top", "-p", w.pid, "--json", "--interval", 0.5, timeout=30))
        check(len(snaps) >= 2, f"only {len(snaps)} snapshots before the exit")
        last = snaps[-1]["processes"][0]
        check(last["ended"], f"the last snapshot does not show the process ended: {last}")
        check(all(t["ended"] for t in last["threads"]), "threads of an exited process not ended")
        check(not any(p["processes"][0]["ended"] for p in snaps[:-1]), "ended before the last snapshot")
    finally:
        w.kill()

    # Launch mode with --json: the program's own prints stay off gilspy's stdout (they go to its stderr), and
    # the last snapshot keeps the last real interval, not the few ms between the last tick and the exit.
    program = ("import threading, time\n"
               "print('a line from the program', flush=True)\n"
               "def spin():\n"
               "    end = time.monotonic() + 2.2\n"
               "    while time.monotonic() < end: pass\n"
               "ts = [threading.Thread(target=spin) for _ in range(2)]\n"
               "[t.start() for t in ts]; [t.join() for t in ts]\n"
               "print('the program ends', flush=True)\n")
    out = run_gilspy(gilspy, "top", "--json", "--interval", 0.5, "--", python, "-c", program, timeout=30)
    snaps = top_json_lines(out)  # every stdout line parses as JSON
    check("a line from the program" in out.stderr and "the program ends" in out.stderr,
          f"the program's stdout did not reach gilspy's stderr: {out.stderr!r}")
    check(len(snaps) >= 3, f"only {len(snaps)} snapshots of a 2.2 s program at --interval 0.5")
    last = snaps[-1]
    check(last["processes"][0]["ended"], "the last snapshot does not show the program ended")
    check(last["interval_s"] >= 0.1, f"the last snapshot covers {last['interval_s']} s: an empty interval")
    busiest = max(t["interval"]["hold"] for t in last["processes"][0]["threads"])
    check(busiest > 0.2, f"the last snapshot's interval has no holder ({busiest:.1%}): not the last real interval")
    d = tempfile.mkdtemp(prefix="gilspy-json-")
    out = run_gilspy(gilspy, "record", "--json", "-o", d, "--", python, "-c", program, timeout=30, check_rc=0)
    lines = [json.loads(l) for l in out.stdout.splitlines() if l.strip()]
    check(len(lines) >= 2, f"record --json printed {len(lines)} lines")
    check("a line from the program" in out.stderr, f"record: the program's stdout is not on stderr: {out.stderr!r}")


# --- hardening: shared output folders, concurrent recorders, corrupt input, a full disk -----------------------

NOBODY = 65534


def need_root():
    if os.geteuid() != 0:
        print("SKIPPED: this scenario runs gilspy as root against another user's planted files")
        sys.exit(77)


def as_nobody(*cmd):
    out = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *cmd],
                         capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise Failure(f"as uid {NOBODY}: {' '.join(cmd)}: {out.stderr.strip()}")


def file_state(path):
    st = os.stat(path)
    return (open(path, "rb").read(), st.st_mtime_ns, st.st_mode, st.st_uid)


def scenario_output_links(gilspy, python):
    """Root records with -o in a folder another user can write to, where that user planted links at every name
    gilspy may use: the links' targets stay untouched; gilspy writes its files or fails with one clear line."""
    need_root()
    w = Workload(python, "cpu_threads.py", 60, 2)
    try:
        victims_dir = tempfile.mkdtemp(prefix="gilspy-victims-")
        good_dir = tempfile.mkdtemp(prefix="gilspy-rec-")
        run_gilspy(gilspy, "record", "--no-trace", "-p", w.pid, "-d", 0.5, "-o", good_dir, check_rc=0)
        good_raw = single_raw(good_dir)
        # Sticky like /tmp (the kernel's protected_symlinks also guards it), and merely world-writable (it does not).
        for mode in (0o1777, 0o777):
            d = tempfile.mkdtemp(prefix="gilspy-shared-")
            os.chmod(d, mode)
            base = os.path.join(d, f"GIL_{w.pid}_rank_0")
            names = [base + ".json.partial", base + ".json", base + ".trace.json", base + ".json.tmp",
                     base + ".trace.json.tmp", base + ".json.partial.tmp", os.path.join(d, "out.trace.json"),
                     os.path.join(d, "out.trace.json.tmp")]
            victims = {}
            for i, name in enumerate(names):
                victim = os.path.join(victims_dir, f"victim{mode:o}_{i}")
                with open(victim, "w") as f:
                    f.write(f"precious {i}\n")
                os.chmod(victim, 0o644)
                victims[name] = victim
                as_nobody("ln", "-s", victim, name)
            before = {v: file_state(v) for v in victims.values()}

            def check_victims(what):
                for v, state in before.items():
                    check(file_state(v) == state, f"{what} (folder mode {mode:o}): {v} was changed through a link")

            removed = set()

            def unplant(name):
                as_nobody("rm", name)
                removed.add(name)

            def links_intact():
                for name, victim in victims.items():
                    if name not in removed:
                        check(os.path.islink(name) and os.readlink(name) == victim, f"{name} was replaced")

            # Every name planted: refused at once, in one line naming the link.
            out = run_gilspy(gilspy, "record", "-p", w.pid, "-d", 1, "-o", d)
            one_line_error(out, "symbolic link")
            check_victims("record, every name planted")
            links_intact()
            # The .partial freed: the final names are still links, refused before recording anything.
            unplant(names[0])
            out = run_gilspy(gilspy, "record", "-p", w.pid, "-d", 1, "-o", d)
            one_line_error(out, "symbolic link", f"GIL_{w.pid}_rank_0.")
            check(not os.path.lexists(names[0]), "a refused recording left its .partial")
            check_victims("record, final names planted")
            links_intact()
            # convert's -o: refused while a link is there; with only its old fixed .tmp name planted, it works.
            out = run_gilspy(gilspy, "convert", "-i", good_raw, "-o", names[6])
            one_line_error(out, "symbolic link")
            unplant(names[6])
            run_gilspy(gilspy, "convert", "-i", good_raw, "-o", names[6], check_rc=0)
            check(not os.path.islink(names[6]) and os.stat(names[6]).st_mode & 0o777 == 0o600,
                  "convert's output is not a 0600 file of its own")
            json.load(open(names[6]))
            check_victims("convert")
            # All links gone but the .tmp ones (no longer used): a recording writes its own files, 0600.
            for name in names[1:3]:
                unplant(name)
            run_gilspy(gilspy, "record", "-p", w.pid, "-d", 1, "-o", d, check_rc=0)
            for path in (base + ".json", base + ".trace.json"):
                st = os.lstat(path)
                check(not os.path.islink(path) and st.st_uid == 0 and st.st_mode & 0o777 == 0o600,
                      f"{path}: not a root-owned 0600 file (mode {st.st_mode:o}, uid {st.st_uid})")
            raw = Raw(base + ".json")
            check_trace(base + ".trace.json", raw)
            check_victims("record into the cleaned folder")
            links_intact()
            left = sorted(os.listdir(d))
            check(not any(n.endswith(".partial") for n in left), f"a .partial was left: {left}")
            # -o itself through a link the other user planted (to a folder of root's), or deeper through it, or
            # a folder of that user's: refused in one line, nothing written or created there.
            target_dir = tempfile.mkdtemp(prefix="gilspy-target-")
            as_nobody("ln", "-s", target_dir, os.path.join(d, "out"))
            as_nobody("mkdir", os.path.join(d, "theirs"))
            for o, needle in ((os.path.join(d, "out"), "symbolic link of another user"),
                              (os.path.join(d, "out", "sub"), "symbolic link of another user"),
                              (os.path.join(d, "theirs"), "belongs to another user")):
                out = run_gilspy(gilspy, "record", "-p", w.pid, "-d", 0.5, "-o", o)
                one_line_error(out, needle)
                out = run_gilspy(gilspy, "convert", "-i", good_raw, "-o", os.path.join(o, "x.trace.json"))
                one_line_error(out, needle)
            check(os.listdir(target_dir) == [], f"written through -o's link: {os.listdir(target_dir)}")
            check(os.listdir(os.path.join(d, "theirs")) == [], "written into another user's folder")
    finally:
        w.kill()


def scenario_two_recorders(gilspy, python):
    """Two recorders started together on one pid and folder: one records, the other refuses in one line; every
    file left parses and no .partial remains."""
    w = Workload(python, "cpu_threads.py", 60, 2)
    try:
        for attempt in range(3):
            d = tempfile.mkdtemp(prefix="gilspy-rec-")
            args = [gilspy, "record", "-p", str(w.pid), "-d", "2", "-o", d]
            procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for _ in range(2)]
            results = [(p.wait(timeout=60), *p.communicate()) for p in procs]
            codes = sorted(rc for rc, _, _ in results)
            check(codes == [0, 1], f"attempt {attempt}: exit codes {codes}, expected one 0 and one 1: {results}")
            refused = [r for r in results if r[0] == 1][0]
            err = refused[2].strip()
            check(err.count("\n") == 0 and err.startswith("gilspy: error: ") and
                  f"pid {w.pid} is already being recorded into {d}" in err,
                  f"attempt {attempt}: the refused recorder should say why in one line, said {err!r}")
            left = sorted(os.listdir(d))
            check(not any(n.endswith(".partial") or n.endswith(".tmp") for n in left),
                  f"attempt {attempt}: left {left}")
            check(len(left) == 2, f"attempt {attempt}: expected one raw file and one trace, found {left}")
            raw = Raw(single_raw(d))
            check(raw.summary["stop_reason"] == "duration", f"stop reason {raw.summary['stop_reason']}")
            check_trace(single_raw(d).replace(".json", ".trace.json"), raw)
    finally:
        w.kill()


def scenario_convert_corrupt(gilspy, python):
    """A finished raw file with one bad byte in the middle is refused as corrupt (offset given, nothing written);
    --salvage converts what precedes the damage and says how much; a cut file is still recovered."""
    d = tempfile.mkdtemp(prefix="gilspy-bad-")
    good_dir = tempfile.mkdtemp(prefix="gilspy-rec-")
    run_gilspy(gilspy, "record", "--no-trace", "-o", good_dir, "--", python,
               os.path.join(WORKLOADS, "cpu_threads.py"), 1, 2, env=workload_env(), check_rc=0)
    good = open(single_raw(good_dir), "rb").read()
    lines = good.count(b"\n")
    check(lines > 100, f"only {lines} lines recorded")
    at = good.index(b"\n[", len(good) // 2) + 1
    bad = good[:at] + b"#" + good[at + 1:]
    path = os.path.join(d, "bad.json")
    open(path, "wb").write(bad)
    out_path = os.path.join(d, "out.json")
    out = run_gilspy(gilspy, "convert", "-i", path, "-o", out_path)
    one_line_error(out, "bad.json", "corrupt", f"byte offset {at} of {len(bad)}", "--salvage")
    check(os.listdir(d) == ["bad.json"], f"a refused conversion left {os.listdir(d)}")
    out = run_gilspy(gilspy, "convert", "--salvage", "-i", path, "-o", out_path, check_rc=0)
    check("corrupt" in out.stderr and f"byte offset {at}" in out.stderr and "salvaged" in out.stderr,
          f"--salvage did not say what it did: {out.stderr!r}")
    doc = json.load(open(out_path))
    holds = sum(1 for e in doc["traceEvents"] if e["ph"] == "X" and e["name"] == "hold_gil")
    all_holds = good.count(b'["H"')
    check(0 < holds < all_holds, f"{holds} holds salvaged from a file with {all_holds}")
    # Deep nesting in the summary: refused, no crash, nothing left.
    deep = good.replace(b'"summary":', b'"summary":' + b"[" * 60000)
    open(path, "wb").write(deep)
    os.remove(out_path)
    out = run_gilspy(gilspy, "convert", "-i", path, "-o", out_path)
    one_line_error(out, "nested")
    check(os.listdir(d) == ["bad.json"], f"deep nesting left {os.listdir(d)}")
    # A cut (a killed recording) is not corruption: recovered, exit 0, and the offset is the file's length.
    cut = good[:good.index(b'["F"]') - 10]
    open(path, "wb").write(cut)
    out = run_gilspy(gilspy, "convert", "-i", path, "-o", out_path, check_rc=0)
    check(f"cut short after {len(cut)} bytes" in out.stdout, f"convert of a cut file said {out.stdout!r}")


def check_full_to_the_end(gilspy, w, d):
    """A disk that stays full to the end: the summary is printed all the same, with exactly what the .partial
    lacks (counted here from its complete event lines), then one error line and a non-zero exit."""
    sub = os.path.join(d, "full")
    os.mkdir(sub)
    st = os.statvfs(d)
    with open(os.path.join(d, "filler2"), "wb") as f:
        f.write(b"\0" * (st.f_bavail * st.f_frsize - 8192))
    out = run_gilspy(gilspy, "record", "-p", w.pid, "-d", 2, "-o", sub)
    os.remove(os.path.join(d, "filler2"))
    check(out.returncode == 1, f"exit {out.returncode} with the disk full to the end: {out.stderr!r}")
    last = out.stderr.strip().splitlines()[-1]
    check(last.startswith("gilspy: error: cannot write") and "no space left on device" in last,
          f"the last line should say why: {out.stderr!r}")
    m = re.search(r"raw data: INCOMPLETE, (\S+) holds (\d+) of the (\d+) events recorded \((\d+) lost\)", out.stdout)
    check(m is not None, f"no summary saying what the raw file lacks: {out.stdout!r}")
    check("HOLD %" in out.stdout and "trace:    not written" in out.stdout, f"summary: {out.stdout!r}")
    partial, held, recorded, lost = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
    check(partial.endswith(".json.partial") and os.path.exists(partial), f"no {partial}")
    # Event lines: ',' + newline before each; the last one may be cut by the full disk (not an event).
    lines = open(partial, "rb").read().split(b"\n")
    whole = 0
    for line in lines[2:]:  # the format line and the meta line first
        try:
            json.loads(line.rstrip(b",") or b"x")
            whole += 1
        except ValueError:
            pass
    check(held == whole and held > 0, f"the summary says {held} events in the file; it holds {whole}")
    check(recorded > held and lost == recorded - held, f"recorded {recorded}, in the file {held}, lost {lost}")


def scenario_disk_full(gilspy, python):
    """The output folder fills up during a recording: said at once in one line, events wait in memory, are written
    when there is room again, and the file ends complete. A read-only folder is called read-only."""
    need_root()
    d = tempfile.mkdtemp(prefix="gilspy-full-")
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", d], capture_output=True,
                         text=True)
    if out.returncode != 0:
        print(f"SKIPPED: cannot mount a small tmpfs: {out.stderr.strip()}")
        sys.exit(77)
    w = Workload(python, "cpu_threads.py", 60, 2)
    try:
        filler = os.path.join(d, "filler")
        st = os.statvfs(d)
        with open(filler, "wb") as f:
            f.write(b"\0" * (st.f_bavail * st.f_frsize - 8192))
        err_path = os.path.join(tempfile.mkdtemp(prefix="gilspy-err-"), "stderr")
        with open(err_path, "w") as err:
            p = subprocess.Popen([gilspy, "record", "-p", str(w.pid), "-d", "5", "-o", d], stdout=subprocess.PIPE,
                                 stderr=err, text=True)
            deadline = time.monotonic() + 4
            said = ""
            while time.monotonic() < deadline and "no space left on device" not in said:
                time.sleep(0.1)
                said = open(err_path).read()
            check("no space left on device" in said and said.startswith("gilspy: warning: ") and
                  said.count("\n") == 1,
                  f"a full disk was not said at once, in one line: {said!r}")
            check(p.poll() is None, "gilspy stopped when the disk filled up")
            os.remove(filler)
            p.communicate(timeout=60)
        said = open(err_path).read()
        check(p.returncode == 0, f"exit {p.returncode} after the disk had room again: {said!r}")
        check("being written again; no event was lost" in said, f"the recovery was not said: {said!r}")
        raw = Raw(single_raw(d))
        check(raw.summary["dropped_events"] == 0, f"dropped_events {raw.summary['dropped_events']}")
        check(len(raw.holds) > 50, f"only {len(raw.holds)} holds")
        check_trace(single_raw(d).replace(".json", ".trace.json"), raw)
        check_full_to_the_end(gilspy, w, d)
        # Read-only: said so, not "permission denied".
        subprocess.run(["mount", "-o", "remount,ro", d], check=True)
        out = run_gilspy(gilspy, "record", "-p", w.pid, "-d", 1, "-o", d)
        one_line_error(out, "read-only file system")
        out = run_gilspy(gilspy, "convert", "-i", single_raw(d), "-o", os.path.join(d, "again.json"))
        one_line_error(out, "read-only file system")
    finally:
        w.kill()
        subprocess.run(["umount", d])


SCENARIOS = {
    "info": scenario_info,
    "info_early": scenario_info_early,
    "record_launch": scenario_record_launch,
    "record_pid": scenario_record_pid,
    "record_multi": scenario_record_multi,
    "pid_namespace": scenario_pid_namespace,
    "long_c_call": scenario_long_c_call,
    "churn": scenario_churn,
    "target_exits": scenario_target_exits,
    "signals": scenario_signals,
    "sigkill": scenario_sigkill,
    "signals_all": scenario_signals_all,
    "target_execs": scenario_target_execs,
    "target_stopped": scenario_target_stopped,
    "convert_bad_input": scenario_convert_bad_input,
    "long_switch_interval": scenario_long_switch_interval,
    "bad_pid": scenario_bad_pid,
    "not_python": scenario_not_python,
    "old_python": scenario_old_python,
    "exiting": scenario_exiting,
    "no_permission": scenario_no_permission,
    "python_api": scenario_python_api,
    "top_batch": scenario_top_batch,
    "top_interactive": scenario_top_interactive,
    "top_target_exits": scenario_top_target_exits,
    "output_links": scenario_output_links,
    "two_recorders": scenario_two_recorders,
    "convert_corrupt": scenario_convert_corrupt,
    "disk_full": scenario_disk_full,
}

SCENARIOS.update(scenarios_summary.SCENARIOS)
SCENARIOS.update(scenarios_jobs.SCENARIOS)
SCENARIOS.update(scenarios_gc.SCENARIOS)
SCENARIOS.update(scenarios_hostile.SCENARIOS)
SCENARIOS.update(scenarios_stacks.SCENARIOS)
SCENARIOS.update(scenarios_counters.SCENARIOS)
SCENARIOS.update(scenarios_exact.SCENARIOS)

if __name__ == "__main__":
    main(SCENARIOS)
