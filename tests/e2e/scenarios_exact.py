"""Scenarios for --exact (uprobes on take_gil / drop_gil, defined in tracefs, opened as perf events): the holds and waits of
threads whose GIL behaviour is known, every short-lived thread traced from its first take (the probes are
inherited by new threads), nothing left in the target when gilspy is killed, and a stripped interpreter
recorded by sampling with one line that says why. Each skips (77) where this machine cannot place uprobes."""
import json
import os
import re
import signal
import subprocess
import tempfile
import time

from harness import (WORKLOADS, Raw, Workload, assert_no_overlapping_holds, check, check_trace, cpu_time_in_window,
                     run_gilspy, single_raw, workload_env)

SKIP = 77


def uprobes_possible():
    """None when this machine can place uprobes through perf_event_open, else why not."""
    if os.geteuid() != 0:
        return "not root"
    if not any(os.path.exists(d + "/uprobe_events") for d in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")):
        return "no tracefs with uprobe_events (mount -t tracefs nodev /sys/kernel/tracing)"
    return None


def skip_unless_uprobes():
    why = uprobes_possible()
    if why:
        print(f"SKIPPED: --exact cannot work here: {why}")
        raise SystemExit(SKIP)


def tracefs_groups():
    """gilspy's uprobe definition groups now in tracefs (gilspy_<its pid>_<target pid>)."""
    events = "/sys/kernel/tracing/events"
    return [g for g in os.listdir(events) if g.startswith("gilspy_")] if os.path.isdir(events) else []


def check_exact_summary(raw):
    check(raw.meta.get("mode") == "exact", f"meta mode {raw.meta.get('mode')!r}, expected 'exact'")
    check(raw.summary.get("mode") == "exact", f"summary mode {raw.summary.get('mode')!r}, expected 'exact'")
    x = raw.summary["exact"]
    check(x["takes"] > 0 and x["probe_hits"] >= 2 * x["takes"], f"exact figures {x}")
    check(x["lost_hits"] == 0 and x["undecoded_hits"] == 0, f"hits lost or not decoded: {x}")
    for t in raw.summary["threads"]:
        check(t["hold_share_ci95"] in (0, 0.0), f"thread {t['tid']}: ±95 {t['hold_share_ci95']}, exact is exact")
    return x


def scenario_exact_cpu_and_sleeper(gilspy, python):
    """Two CPU threads and a 1 ms sleeper, launched and recorded until they exit: each CPU thread's holds cover
    the CPU time it computed (it cannot compute without the GIL; exact holds need no slack for poll timing),
    the sleeper holds for microseconds per nap and waits behind the switch interval, and the holds of all
    threads never overlap (not even by a nanosecond)."""
    skip_unless_uprobes()
    d = tempfile.mkdtemp(prefix="gilspy-exact-")
    report = os.path.join(d, "report.json")
    out = run_gilspy(gilspy, "record", "--exact", "-o", d, "--", python,
                     os.path.join(WORKLOADS, "cpu_and_sleeper.py"), 3, env=workload_env(report), check_rc=0)
    check("exact: every take and drop" in out.stdout, f"no exact line in the summary:\n{out.stdout}")
    check(re.search(r"their price: [\d.]+ us per take and drop", out.stdout) is not None,
          f"the summary does not state the probes' price:\n{out.stdout}")
    raw = Raw(single_raw(d))
    x = check_exact_summary(raw)
    roles = json.load(open(report))
    # Each CPU thread's own CPU time inside the recording (its marks, 10 ms apart, interpolated) against its
    # holds there: exact holds need no slack for poll timing, only for the marks' interpolation at both ends.
    start = raw.to_monotonic(0)
    end = raw.to_monotonic(raw.summary["duration_ns"])
    for tid in roles["cpu"]:
        t = raw.thread(tid)
        cpu_ns = cpu_time_in_window(roles["cpu_marks"][str(tid)], start, end)
        check(t["hold_ns"] >= cpu_ns - 20e6,
              f"CPU thread {tid}: {t['hold_ns'] / 1e6:.1f} ms held, {cpu_ns / 1e6:.1f} ms computed")
        check(t["wait_share"] > 0.2, f"CPU thread {tid} waited {t['wait_share']:.1%}, expected > 20 %")
    s = raw.thread(roles["sleeper"])
    check(s["hold_share"] < 0.05 and s["wait_share"] > 0.3, f"sleeper: {s}")
    check(s["holds"] >= roles["naps"] * 0.9, f"sleeper: {s['holds']} holds for {roles['naps']} naps")
    assert_no_overlapping_holds(raw)
    busy = raw.summary["gil_busy_share"]
    check(0.8 <= busy <= 1.0, f"GIL busy {busy:.3f}")
    check_trace(single_raw(d).replace(".json", ".trace.json"), raw)
    print(f"exact {raw.meta['python_version']}: {x['takes']} takes, {x['handoffs']} hand-offs, "
          f"{x['take_cost_ns'] + x['drop_cost_ns']:.0f} ns per take and drop; sleeper {s['holds']} holds for "
          f"{roles['naps']} naps")


def scenario_top_exact(gilspy, python):
    """top --exact, batch JSON: marked exact; 3 CPU threads share the GIL exactly (holds that never overlap add up
    to at most the interval: the GIL busy share <= 100 %), each near a third; the sleeper holds almost nothing;
    and the probes are gone when top ends (no tracefs definition of this gilspy left)."""
    skip_unless_uprobes()
    w = Workload(python, "cpu_and_sleeper.py", 30, 3)
    try:
        out = run_gilspy(gilspy, "top", "-p", w.pid, "--exact", "--json", "-n", 2, timeout=60)
        check(out.returncode == 0, f"top --exact exited {out.returncode}: {out.stderr!r}")
        snaps = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
        check(len(snaps) == 2, f"-n 2 printed {len(snaps)} snapshots")
        p = snaps[-1]["processes"][0]
        check(p.get("mode") == "exact", f"top --exact's process mode {p.get('mode')!r}, expected 'exact'")
        threads = {t["tid"]: t for t in p["threads"]}
        for tid in w.info["cpu"]:
            hold = threads[tid]["total"]["hold"]
            check(0.20 <= hold <= 0.50, f"CPU thread {tid} held {hold:.1%} under top --exact, expected about a third")
        s_hold = threads[w.info["sleeper"]]["total"]["hold"]
        check(s_hold < 0.05, f"sleeper held {s_hold:.1%}, expected < 5 %")
        busy = p["total"]["gil_busy"]
        check(0.8 < busy <= 1.0 + 1e-9, f"GIL busy {busy:.4f}: exact holds never overlap and 3 CPU threads fill it")
        left = [g for g in tracefs_groups() if g.endswith(f"_{w.pid}")]
        check(not left, f"uprobe definitions left after top --exact ended: {left}")
        print(f"top --exact: cpu " + ", ".join(f"{threads[t]['total']['hold']:.1%}" for t in w.info["cpu"]) +
              f", sleeper {s_hold:.2%}, busy {busy:.1%}")
    finally:
        w.kill()


def scenario_exact_churn(gilspy, python):
    """Threads started and joined all the time: every one of them is traced from its first take, by inheritance
    (the probes of the thread that started it), though the sampler finds some of them late or never; and no
    probe definition is left in tracefs after the recording."""
    skip_unless_uprobes()
    d = tempfile.mkdtemp(prefix="gilspy-exact-")
    report = os.path.join(d, "report.json")
    run_gilspy(gilspy, "record", "--exact", "-o", d, "--", python, os.path.join(WORKLOADS, "thread_churn.py"),
               2, env=workload_env(report), check_rc=0)
    raw = Raw(single_raw(d))
    check_exact_summary(raw)
    info = json.load(open(report))
    held = {tid for tid, _, _ in raw.holds}
    # Those that lived inside the recording (it begins when the probes are in, after the program started).
    start = raw.to_monotonic(raw.summary["start_ns"])
    end = raw.to_monotonic(raw.summary["start_ns"] + raw.summary["duration_ns"])
    inside = [int(tid) for tid, (born, died) in info["lives"].items() if born >= start and died <= end]
    missing = [tid for tid in inside if tid not in held]
    check(len(inside) > 40, f"only {len(inside)} of {len(info['tids'])} short-lived threads lived inside the recording")
    check(not missing, f"{len(missing)} of {len(inside)} short-lived threads have no hold: {missing[:10]}")
    assert_no_overlapping_holds(raw)
    left = tracefs_groups()
    check(not left, f"probe definitions left in tracefs: {left}")
    print(f"exact churn: all {len(inside)} short-lived threads that lived inside the recording held the GIL "
          f"(the sampler announced {len(raw.threads)})")


WRITER = """
import os, sys, threading, time
stop = time.monotonic() + float(sys.argv[1])
fd = os.open(os.devnull, os.O_WRONLY)
def writer():
    while time.monotonic() < stop:
        os.write(fd, b"x")  # drops and takes the GIL at every call
threads = [threading.Thread(target=writer) for _ in range(2)]
for t in threads: t.start()
for t in threads: t.join()
"""


def scenario_exact_many_hits(gilspy, python):
    """Two threads dropping and taking the GIL at every os.write, for 3 s: far more probe hits than the rings
    hold (16 384 per CPU), so they must be read while recording; none lost, holds never overlapping, the GIL
    never more than 100 % busy."""
    skip_unless_uprobes()
    d = tempfile.mkdtemp(prefix="gilspy-exact-")
    run_gilspy(gilspy, "record", "--exact", "--no-trace", "-q", "-o", d, "--", python, "-c", WRITER, 3, check_rc=0)
    raw = Raw(single_raw(d))
    x = check_exact_summary(raw)
    rings = 16384 * os.cpu_count()
    check(x["probe_hits"] > rings, f"{x['probe_hits']} probe hits: fewer than the rings hold ({rings}), the test "
                                   "proves nothing on this machine")
    assert_no_overlapping_holds(raw)
    check(raw.summary["gil_busy_share"] <= 1.0, f"GIL busy {raw.summary['gil_busy_share']:.3f}")
    print(f"exact many hits: {x['probe_hits']} hits ({x['takes']} takes), none lost")


def scenario_check(gilspy, python):
    """gilspy check on 14 CPU threads and a sleeper (16 threads with main): one JSON object with every thread both
    ways; the sampler and the probes agree on what the workload is known to do (each CPU thread holds a
    fourteenth of the GIL, give or take; the sleeper holds almost nothing), and on each other within 3 pp (the
    sampler's bench accuracy is 1 pp; the probes slow the threads they trap, which both sides see, and 3 s at
    ~500 polls a second leaves ±1.3 pp of sampling error); nothing is written; a pid that is gone is one line."""
    skip_unless_uprobes()
    w = Workload(python, "cpu_and_sleeper.py", 30, 14)
    try:
        before = set(os.listdir("."))
        out = run_gilspy(gilspy, "check", "-p", w.pid, "-d", 3, "--json", check_rc=0)
        check(set(os.listdir(".")) == before, "check wrote files into the current folder")
        doc = json.loads(out.stdout)
        rows = {t["tid"]: t for t in doc["threads"]}
        for tid in w.info["cpu"] + [w.info["sleeper"], w.pid]:
            check(tid in rows and rows[tid]["seen_by_sampler"], f"thread {tid} missing from the check: {sorted(rows)}")
        for tid in w.info["cpu"]:
            r = rows[tid]
            for side in ("sampled", "exact"):
                check(0.03 <= r[side]["hold_share"] <= 0.12,
                      f"CPU thread {tid}: {side} hold {r[side]['hold_share']:.3f}, expected about 1/14")
            check(abs(r["hold_diff_pp"]) <= 3 and abs(r["wait_diff_pp"]) <= 3, f"CPU thread {tid}: {r}")
        s = rows[w.info["sleeper"]]
        check(s["exact"]["hold_share"] < 0.02 and s["sampled"]["hold_share"] < 0.02, f"sleeper: {s}")
        check(doc["threads_judged"] >= 15 and doc["cost"]["exact_takes"] > 0, f"check summary: {doc}")
        # Measured in the target: CPU-bound threads under one GIL do Python work one at a time, so its user-mode
        # CPU is about one CPU untraced and in the window alike (0.3-1.3: a 2-CPU machine shared with gilspy).
        m = doc["cost"].get("measured")
        check(m is not None, f"check measured nothing in the target: {doc['cost']}")
        for k in ("untraced_user_cpus", "window_user_cpus"):
            check(0.3 <= m[k] <= 1.3, f"measured {k} {m[k]:.3f}, expected about one CPU: {m}")
        check(abs(m["progress_change"]) < 0.5 and m["progress_change_ci95"] > 0, f"measured: {m}")
        print(f"check: interval held for {doc['intervals_held']} of {doc['threads_judged']} threads; worst hold "
              f"{max(abs(t['hold_diff_pp']) for t in doc['threads']):.2f} pp, wait "
              f"{max(abs(t['wait_diff_pp']) for t in doc['threads']):.2f} pp; progress "
              f"{100 * m['progress_change']:+.1f} % ±{100 * m['progress_change_ci95']:.1f}")
    finally:
        w.kill()
    gone = run_gilspy(gilspy, "check", "-p", w.pid, "-d", 1)
    lines = gone.stderr.strip().splitlines()
    check(gone.returncode != 0 and len(lines) == 1 and str(w.pid) in lines[0],
          f"check on a gone pid: exit {gone.returncode}, stderr {gone.stderr!r}")


def probe_address(pid, function):
    """Where `function` (take_gil) of pid's interpreter binary lies in its memory, and the file's byte there."""
    lib = None
    with open(f"/proc/{pid}/maps") as f:
        maps = [line.split() for line in f]
    for m in maps:
        if len(m) >= 6 and re.search(r"/libpython3\.\d+[a-z]*\.so", m[5]):
            lib = m[5]
    lib = lib or os.path.realpath(f"/proc/{pid}/exe")
    nm = subprocess.run(["nm", lib], capture_output=True, text=True).stdout
    value = next(int(v, 16) for v, kind, name in (line.split() for line in nm.splitlines() if len(line.split()) == 3)
                 if name == function and kind in "tT")
    segments = subprocess.run(["readelf", "-lW", lib], capture_output=True, text=True).stdout
    for line in segments.splitlines():
        w = line.split()
        if w[:1] == ["LOAD"]:
            offset, vaddr, filesz = int(w[1], 16), int(w[2], 16), int(w[4], 16)
            if vaddr <= value < vaddr + filesz:
                file_offset = offset + value - vaddr
                break
    for m in maps:
        if len(m) >= 6 and m[5] == lib:
            start, end = (int(x, 16) for x in m[0].split("-"))
            moff = int(m[2], 16)
            if moff <= file_offset < moff + (end - start):
                with open(lib, "rb") as f:
                    f.seek(file_offset)
                    return start + file_offset - moff, f.read(1)
    raise AssertionError(f"{function} of {lib} is not mapped")


def byte_at(pid, address):
    with open(f"/proc/{pid}/mem", "rb") as f:
        f.seek(address)
        return f.read(1)


def scenario_exact_killed(gilspy, python):
    """While --exact records, take_gil's first byte in the target is the kernel's breakpoint (int3, 0xcc); once
    gilspy is killed with SIGKILL (no cleanup of its own runs), it is the file's byte again: the probes die with
    gilspy's descriptors and leave nothing in the target."""
    skip_unless_uprobes()
    w = Workload(python, "cpu_and_sleeper.py", 30)
    try:
        address, original = probe_address(w.pid, "take_gil")
        check(byte_at(w.pid, address) == original, "take_gil is probed before gilspy started")
        d = tempfile.mkdtemp(prefix="gilspy-exact-")
        g = subprocess.Popen([gilspy, "record", "--exact", "-p", str(w.pid), "-o", d, "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started = g.stdout.readline()
        if '"started"' not in started:
            g.kill()
            check(False, f"gilspy did not start: {started} {g.stderr.read()}")
        deadline = time.monotonic() + 5
        while byte_at(w.pid, address) != b"\xcc" and time.monotonic() < deadline:
            time.sleep(0.05)
        check(byte_at(w.pid, address) == b"\xcc", "take_gil carries no breakpoint while --exact records")
        g.send_signal(signal.SIGKILL)
        g.wait(10)
        deadline = time.monotonic() + 5
        while byte_at(w.pid, address) != original and time.monotonic() < deadline:
            time.sleep(0.05)
        check(byte_at(w.pid, address) == original,
              f"take_gil still starts with {byte_at(w.pid, address).hex()} after gilspy was killed "
              f"(the file has {original.hex()})")
        check(w.proc.poll() is None, "the target did not survive gilspy's death")
        print(f"exact killed: take_gil at {address:#x}: {original.hex()} -> cc while recording -> "
              f"{byte_at(w.pid, address).hex()} after SIGKILL")
    finally:
        w.kill()


def scenario_exact_stripped(gilspy, python):
    """A stripped interpreter (Debian's) has no take_gil / drop_gil symbols: one line says --exact is not
    possible and why, and the process is recorded by sampling (exit 0, mode 'sampled')."""
    skip_unless_uprobes()
    w = Workload(python, "cpu_and_sleeper.py", 30)
    try:
        d = tempfile.mkdtemp(prefix="gilspy-exact-")
        out = run_gilspy(gilspy, "record", "--exact", "-p", w.pid, "-d", 1, "-o", d, check_rc=0)
        lines = [line for line in out.stderr.splitlines() if "--exact" in line]
        check(len(lines) == 1 and "stripped" in lines[0] and "sampling" in lines[0],
              f"expected one line saying the binary is stripped and it samples instead:\n{out.stderr}")
        raw = Raw(single_raw(d))
        check(raw.meta.get("mode") == "sampled" and raw.summary.get("mode") == "sampled",
              f"modes {raw.meta.get('mode')} / {raw.summary.get('mode')}")
        check(len(raw.holds) > 0, "nothing was recorded")
        print(f"exact stripped: {lines[0]}")
    finally:
        w.kill()


SCENARIOS = {
    "exact_cpu_and_sleeper": scenario_exact_cpu_and_sleeper,
    "exact_churn": scenario_exact_churn,
    "exact_many_hits": scenario_exact_many_hits,
    "check": scenario_check,
    "exact_killed": scenario_exact_killed,
    "exact_stripped": scenario_exact_stripped,
    "top_exact": scenario_top_exact,
}
