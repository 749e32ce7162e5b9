"""Which code: thread names and the Python stacks of the holder and the waiters, on a workload whose code is
known (tests/workloads/stacks.py), one recording per interpreter with `top --json` watching at the same time:

- names: lanes, summary, KN records and top carry threading.Thread.name (A, B, churn-N, a rename);
- phase 1: A's holds name hog, on lines inside hog's 30-line body (several of them); B's waits name the
  sleep line of sleeper; folded stacks weighted by contention put >= 90 % under hog; the summary's top holder
  is hog and its top wait site sleeper; top shows A in hog;
- phase 2: qualified names of a method, a nested function, a lambda, a generator, an asyncio coroutine (3.11+
  co_qualname; the plain name before), a 200-deep recursion cut at 64 frames and marked, unwinding fast while
  read: no garbage (every frame name and file plausible, every line positive), drops counted;
- the trace: hold slices name their function in args, frames nest under them (gilspy_trace_check);
- all_threads: record --all-threads on threads blocked in a C call and asleep (tests/workloads/blocked_io.py).
"""
import json
import os
import re
import subprocess
import tempfile
import time

from harness import Failure, Raw, Workload, check, check_trace, run_gilspy, single_raw

NAME = re.compile(r"^[A-Za-z_<][\w<>.\-]*$")


def version_of(python):
    out = subprocess.run([python, "-c", "import sys; print(sys.version_info[1])"], capture_output=True, text=True)
    return int(out.stdout.strip())


class Stacks:
    """The stack records of a raw file."""

    def __init__(self, raw):
        ev = raw.events
        self.frames = {e[1]: {"qualname": e[3], "file": e[4], "line": e[5], "first_line": e[6]}
                       for e in ev if e[0] == "F" and len(e) > 1}
        self.stacks = {e[1]: {"truncated": bool(e[3]), "frames": e[4]} for e in ev if e[0] == "FS"}
        self.samples = [{"tid": e[1], "ts": e[2], "since": e[3], "role": e[4], "stack": e[5]} for e in ev if e[0] == "K"]
        self.names = [(e[1], e[3], e[4] if len(e) > 4 else "") for e in ev if e[0] == "KN"]

    def innermost(self, sample):
        return self.frames[self.stacks[sample["stack"]]["frames"][0]]

    def of(self, tid, role):
        return [s for s in self.samples if s["tid"] == tid and s["role"] == role]


def folded(gilspy, raw_path, weight, d):
    out_path = os.path.join(d, f"{weight}.folded")
    run_gilspy(gilspy, "convert", "-i", raw_path, "--format", "collapsed", "--weight", weight, "-o", out_path,
               check_rc=0)
    lines = []
    with open(out_path) as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            check(stack and n.isdigit(), f"{weight}: not a folded line: {line!r}")
            lines.append((stack.split(";"), int(n)))
    check(lines, f"--weight {weight}: nothing folded")
    return lines


def scenario_stacks(gilspy, python):
    minor = version_of(python)
    qualified = minor >= 11
    w = Workload(python, "stacks.py", 2.0, 1.5, timeout=60)
    d = tempfile.mkdtemp(prefix="gilspy-stacks-")
    try:
        info = w.info
        a, b, c = info["A"], info["B"], info["C"]
        total = info["pause"] + info["phase1"] + info["phase2"] + 0.3  # the workload lives 1 s longer
        # top watches phase 1 meanwhile (its own poll thread, its own reads).
        top = subprocess.Popen([gilspy, "top", "-p", str(w.pid), "--json", "-n", "2", "--interval", "0.7"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out = run_gilspy(gilspy, "record", "-p", w.pid, "-d", total, "-o", d, check_rc=0)
        top_out, top_err = top.communicate(timeout=60)
        raw_path = single_raw(d)
        raw = Raw(raw_path)
        st = Stacks(raw)
        summary = raw.summary
        costs = summary["stacks"]

        # Names, from Python: KN records, the summary, the lanes.
        by_tid = {}
        for tid, name, _ in st.names:
            by_tid.setdefault(tid, []).append(name)
        check(by_tid.get(a) == ["A"] and by_tid.get(b) == ["B"], f"names of A and B: {by_tid.get(a)}, {by_tid.get(b)}")
        check("C-renamed" in by_tid.get(c, []), f"C's rename not seen: {by_tid.get(c)}")
        churn = [n for names in by_tid.values() for n in names if n.startswith("churn-")]
        check(len(churn) >= 5, f"only {len(churn)} churn threads named: {sorted(churn)[:8]}")
        for names in by_tid.values():
            for n in names:
                check(re.match(r"^(MainThread|A|B|churn|churn-\d+|C-shapes|C-renamed)$", n), f"unexpected name {n!r}")
        names = {t["tid"]: t["name"] for t in summary["threads"]}
        check(names[a] == "A" and names[b] == "B" and names[c] == "C-renamed", f"summary names {names}")
        check(re.search(r"^\s+\d+\s+A\s", out.stdout, re.M), f"the summary table does not name A:\n{out.stdout}")

        # Phase 1: A holds in hog, inside its lines; B waits in sleeper, at the sleep.
        first, last = info["hog_first_line"], info["hog_last_line"]
        a_holds = st.of(a, "h")
        check(len(a_holds) >= 20, f"only {len(a_holds)} stack samples of A's holds")
        inner = [st.innermost(s) for s in a_holds]
        in_hog = [f for f in inner if f["qualname"] == "hog"]
        check(len(in_hog) >= 0.9 * len(inner), f"A's holds: {len(in_hog)} of {len(inner)} in hog: "
              f"{sorted({f['qualname'] for f in inner})}")
        lines = sorted({f["line"] for f in in_hog})
        check(all(first <= l <= last for l in lines), f"hog lines {lines} outside {first}..{last}")
        check(len(lines) >= 5, f"A's holds show only lines {lines} of hog's 30")
        check(all(f["first_line"] == first and f["file"].endswith("stacks.py") for f in in_hog),
              f"hog's frames name {in_hog[0]}")
        b_waits = st.of(b, "w")
        check(len(b_waits) >= 10, f"only {len(b_waits)} stack samples of B's waits")
        sleeps = [st.innermost(s) for s in b_waits]
        at_sleep = [f for f in sleeps if f["qualname"] == "sleeper"]
        check(len(at_sleep) >= 0.9 * len(sleeps), f"B's waits: {len(at_sleep)} of {len(sleeps)} in sleeper")
        check(len({f["line"] for f in at_sleep}) == 1, f"B waits on lines {sorted({f['line'] for f in at_sleep})}")

        # Folded stacks: contention under hog; waits at sleeper.
        # Of the contention whose holder's stack was read: holds that ended before there was time to read them
        # (more of them on a loaded machine: 2-4 % idle, more in CI) say nothing about which code held.
        contention = folded(gilspy, raw_path, "contention", d)
        all_weight = sum(n for _, n in contention)
        unread = sum(n for stack, n in contention if "[no stack sample]" in stack)
        hog_weight = sum(n for stack, n in contention if any(fr.startswith("hog (") for fr in stack))
        check(unread <= 0.5 * all_weight, f"contention: {unread} of {all_weight} us with no stack read")
        check(hog_weight >= 0.9 * (all_weight - unread),
              f"contention: {hog_weight} of {all_weight - unread} us with a stack under hog ({unread} us unread)")
        wait = folded(gilspy, raw_path, "wait", d)
        top_wait = max(wait, key=lambda x: x[1])
        check(top_wait[0][-1].startswith("sleeper ("), f"the heaviest wait site is {top_wait[0][-1]}")
        hold = folded(gilspy, raw_path, "hold", d)
        check(sum(n for _, n in hold) >= hog_weight, "hold weight below the contention weight")
        holders = costs["top_holders"]
        check(holders and holders[0]["function"] == "hog", f"top holder {holders[:1]}")
        check(costs["wait_sites"] and costs["wait_sites"][0]["function"] == "sleeper", f"wait sites {costs['wait_sites'][:1]}")
        check("top GIL holders while others waited" in out.stdout and "where threads wait" in out.stdout,
              f"no stack sections in the summary:\n{out.stdout}")

        # Phase 2: qualified names, the cut recursion, nothing garbled.
        c_names = {st.innermost(s)["qualname"] for s in st.of(c, "h")}
        want = (["Shapes.method", "outer.<locals>.nested", "<lambda>", "gen_work", "coro_work", "deep"] if qualified
                else ["method", "nested", "<lambda>", "gen_work", "coro_work", "deep"])
        missing = [q for q in want if q not in c_names]
        # Each shape runs about as long as the others (3 ms turns, ~20 samples each in the phase), so none may
        # go unseen, but the recursive lambda: its innermost frame changes every few hundred ns, so its reads are
        # often torn and dropped (seen: 1-16 samples of it in ~140, each other shape 11 or more).
        check(not [q for q in missing if q != "<lambda>"], f"C's samples lack {missing} (saw {sorted(c_names)})")
        cut = [s for s in st.stacks.values() if s["truncated"]]
        check(cut, "no stack was marked truncated (the recursion is 200 deep, the limit 64)")
        # The innermost 64 frames: deep() all the way, but for a read caught 61-63 calls down (its way down or
        # up takes microseconds; seen once, 3.10 in CI): then the thread's outer frames close the list.
        outer = {"shapes", "run", "Thread.run", "_bootstrap_inner", "Thread._bootstrap_inner", "_bootstrap",
                 "Thread._bootstrap"}
        for s in cut:
            check(len(s["frames"]) == 64, f"a truncated stack has {len(s['frames'])} frames")
            names = [st.frames[f]["qualname"] for f in s["frames"]]
            k = next((i for i, n in enumerate(names) if n != "deep"), len(names))
            check(k >= 61 and all(n in outer for n in names[k:]), f"a truncated stack is not deep() inside: {names}")
        for f in st.frames.values():
            check(NAME.match(f["qualname"]), f"garbage frame name {f['qualname']!r}")
            check(f["line"] >= 1 and f["first_line"] >= 0, f"impossible line in {f}")
            check(f["file"].startswith("<") or os.path.isabs(f["file"]), f"garbage file {f['file']!r}")
        check(costs["samples"] == len(st.samples), f"{costs['samples']} samples counted, {len(st.samples)} written")

        # The trace: function in args, frames nested (the checker), lanes named from Python.
        trace = check_trace(os.path.join(d, os.path.basename(raw_path).replace(".json", ".trace.json")), raw)
        events = trace["traceEvents"]
        lanes = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
        check(lanes.get(a) == "A" and lanes.get(b) == "B", f"lanes of A and B: {lanes.get(a)!r}, {lanes.get(b)!r}")
        a_slices = [e for e in events if e["ph"] == "X" and e["tid"] == a and e["name"] == "hold_gil" and "args" in e]
        check(a_slices and sum(e["args"]["function"] == "hog" for e in a_slices) >= 0.9 * len(a_slices),
              "A's hold_gil slices do not name hog")
        frames = [e for e in events if e["ph"] == "X" and e.get("cat") == "stack" and e["tid"] == a]
        check(any(e["name"] == "hog" for e in frames), "no hog frame slice under A's holds")

        # top: each thread's current function.
        snaps = [json.loads(l) for l in top_out.splitlines() if l.strip()]
        check(top.returncode == 0 and len(snaps) == 2, f"top exited {top.returncode}: {top_err!r}")
        rows = {t["tid"]: t for s in snaps for t in s["processes"][0]["threads"]}
        check(rows[a]["name"] == "A", f"top names A {rows[a]['name']!r}")
        check((rows[a]["function"] or "").startswith("hog ("), f"top shows A in {rows[a]['function']!r}")

        print(f"stacks {raw.meta['python_version']}: {costs['samples']} samples ({costs['samples_per_s']:.0f}/s, "
              f"{costs['bytes_per_stack']:.0f} B each), torn {costs['torn']}, invalid {costs['invalid']}, skipped "
              f"{costs['skipped']}; hog lines {lines}; contention under hog {hog_weight / all_weight:.1%}; "
              f"C: {sorted(c_names)}")
    finally:
        w.kill()


def scenario_dump(gilspy, python):
    """dump on a hung service (tests/workloads/hung_regex.py): a thread inside a regex that never releases the
    GIL, two threads that want it, one asleep. The holder is named first with its stack down to the regex
    call, the GIL did not change hands while watched, the workers wait, the sleeper is blocked in its sleep
    call; every thread has its threading name. Text and --json say the same."""
    w = Workload(python, "hung_regex.py", timeout=60)
    try:
        stuck, workers, sleeper = w.info["stuck"], set(w.info["workers"]), w.info["sleeper"]
        waiting_seen = {tid: 0 for tid in workers}
        # Announcing wrote a file, which let the GIL go: the stuck thread takes it back behind the workers'
        # forced switches, then keeps it.
        settle = time.monotonic() + 10
        while time.monotonic() < settle:
            g = json.loads(run_gilspy(gilspy, "dump", "-p", w.pid, "--json", check_rc=0).stdout)["gil"]
            if g["holder_tid"] == stuck and g["held_throughout"]:
                break
        for _ in range(3):
            d = json.loads(run_gilspy(gilspy, "dump", "-p", w.pid, "--json", check_rc=0).stdout)
            g = d["gil"]
            check(g["holder_tid"] == stuck and g["held_throughout"] and g["handoffs_while_watched"] == 0,
                  f"the stuck thread {stuck} did not hold the GIL throughout the watch: {g}")
            threads = d["threads"]
            first = threads[0]
            check(first["tid"] == stuck and first["role"] == "holding" and first["name"] == "stuck",
                  f"the holder is not listed first: {threads[0]}")
            functions = [f["function"] for f in first["stack"]]
            check(functions[:2] == ["catastrophic_match", "stuck"],
                  f"the holder's stack does not end in the regex call: {functions}")
            check(all(f["line"] > 0 and f["file"] for f in first["stack"]), f"frames without a place: {first}")
            by_tid = {t["tid"]: t for t in threads}
            check(set(by_tid) == workers | {stuck, sleeper, w.info["main"]}, f"threads {sorted(by_tid)}")
            for tid in workers:
                t = by_tid[tid]
                check(t["role"] in ("waiting", "released") and t["name"].startswith("worker-"), f"worker {t}")
                check(any(f["function"] == "worker" for f in t["stack"]), f"worker's stack {t['stack']}")
                waiting_seen[tid] += t["role"] == "waiting"
            s = by_tid[sleeper]
            check(s["role"] == "released" and s["name"] == "sleeper" and
                  s.get("syscall") in ("clock_nanosleep", "nanosleep", "select", "pselect6"),
                  f"the sleeper is not shown blocked in its sleep: {s}")
            check(s["stack"] and s["stack"][0]["function"] == "sleeper", f"the sleeper's stack {s['stack']}")
            check(by_tid[w.info["main"]]["main"] and by_tid[w.info["main"]]["name"] == "MainThread",
                  f"main thread {by_tid[w.info['main']]}")
        # A waiter between two timed waits reads "running" for microseconds every 5 ms: not every dump can
        # catch both waiting, but most must.
        check(all(n >= 2 for n in waiting_seen.values()), f"workers seen waiting in {waiting_seen} of 3 dumps")
        text = run_gilspy(gilspy, "dump", "-p", w.pid, check_rc=0).stdout
        check(f"GIL: held by thread {stuck} \"stuck\" throughout" in text, f"dump's GIL line: {text}")
        thread_lines = [line for line in text.splitlines() if line.startswith("Thread ")]
        check(thread_lines and thread_lines[0].startswith(f"Thread {stuck} \"stuck\": holds the GIL"),
              f"dump's first thread: {thread_lines[:1]}")
        # --native: the holder's C stack, in the regex engine where the interpreter's symbols say so (pyenv's
        # builds keep .symtab; Debian's static, stripped one has only the exported names); each thread stopped
        # briefly, and let go (the GIL keeps moving among the others afterwards: the target was not hurt).
        d = json.loads(run_gilspy(gilspy, "dump", "-p", w.pid, "--json", "--native", check_rc=0).stdout)
        holder = d["threads"][0]
        native = holder.get("native", {})
        frames = native.get("frames", [])
        check(holder["tid"] == stuck and len(frames) >= 3 and native["stopped_us"] > 0,
              f"the holder's native stack: {native}")
        names = [f["function"] for f in frames]
        if "debian" not in python:
            check(any("sre" in n for n in names[:4]), f"the holder's native stack is not in the regex engine: {names}")
        check(all(t.get("native", {}).get("frames") or t.get("native", {}).get("error") for t in d["threads"]),
              f"a thread without a native stack or a reason: {[t.get('native') for t in d['threads']]}")
        text = run_gilspy(gilspy, "dump", "-p", w.pid, "--native", check_rc=0).stdout
        check("native, innermost first" in text and "Native stacks: read after the Python ones" in text,
              f"dump --native's text: {text[:600]}")
        check(w.proc.poll() is None, "the target died after dump --native")
        print(f"dump: holder {stuck} first with {len(functions)} frames down to the regex; workers waiting in "
              f"{waiting_seen} of 3 dumps; sleeper in {s.get('syscall')}; native: {names[:2]}, "
              f"stopped {native['stopped_us']} us")
    finally:
        w.kill()


def check_speedscope(gilspy, raw_path, d, views):
    """convert --format speedscope: the file passes speedscope's own schema (tests/viewer/check_speedscope.mjs,
    the schema its npm package ships) and each profile weighs what --format collapsed gives that view."""
    out_path = os.path.join(d, "profile.speedscope.json")
    run_gilspy(gilspy, "convert", "-i", raw_path, "--format", "speedscope", "-o", out_path, check_rc=0)
    checker = os.path.join(os.path.dirname(__file__), "..", "viewer", "check_speedscope.mjs")
    res = subprocess.run(["node", checker, out_path], capture_output=True, text=True, timeout=60)
    check(res.returncode == 0, f"speedscope's schema refuses {out_path}: {res.stdout} {res.stderr}")
    totals = json.loads(res.stdout.strip().splitlines()[-1])["profiles"]
    check(set(totals) == set(views), f"speedscope profiles {sorted(totals)}, expected {sorted(views)}")
    for name, weight in views.items():
        folded_total = sum(n for _, n in folded(gilspy, raw_path, weight, d))
        check(totals[name] == folded_total, f"speedscope's {name!r} weighs {totals[name]} us, collapsed {folded_total}")


def workload_line(script, marker):
    """The number of the line of tests/workloads/SCRIPT that holds MARKER (a comment)."""
    with open(os.path.join(os.path.dirname(__file__), "..", "workloads", script)) as f:
        return next(n for n, line in enumerate(f, 1) if marker in line)


def scenario_all_threads(gilspy, python):
    """record --all-threads (tests/workloads/blocked_io.py): a thread blocked in socket.recv throughout, one
    napping in time.sleep(0.05), one spinning. The receiver's time without the GIL is at its recv line for
    >= 90 % of the recording (a thread without the GIL runs no Python: one read covers its stretch), the
    napper's at its sleep line for >= 60 % (each nap is read when it begins, from the budget holders and waiters
    leave); the summary, --weight released and the trace's without_gil slices say so. Without the option,
    nothing of it: no such sample, no such table."""
    recv_line = workload_line("blocked_io.py", "blocked here")
    nap_line = workload_line("blocked_io.py", "the nap line")
    w = Workload(python, "blocked_io.py", 6.0, timeout=60)
    d = tempfile.mkdtemp(prefix="gilspy-all-threads-")
    try:
        receiver, napper = w.info["receiver"], w.info["napper"]
        out = run_gilspy(gilspy, "record", "--all-threads", "-p", w.pid, "-d", 2, "-o", d, check_rc=0)
        raw_path = single_raw(d)
        raw = Raw(raw_path)
        st = Stacks(raw)
        duration = raw.summary["duration_ns"]
        for tid, line in ((receiver, recv_line), (napper, nap_line)):
            samples = st.of(tid, "r")
            check(samples, f"no stack of thread {tid} without the GIL")
            places = {(st.innermost(s)["qualname"], st.innermost(s)["line"]) for s in samples}
            check(any(p[1] == line for p in places), f"thread {tid} read at {places}, not at line {line}")
        sites = {(s["function"], s["line"]): s for s in raw.summary["stacks"].get("released_sites", [])}
        recv_ns = sites.get(("receiver", recv_line), {}).get("released_ns", 0)
        nap_ns = sites.get(("napper", nap_line), {}).get("released_ns", 0)
        check(recv_ns >= 0.9 * duration, f"receiver at recv for {recv_ns} of {duration} ns: {list(sites)}")
        check(nap_ns >= 0.6 * duration, f"napper at its sleep for {nap_ns} of {duration} ns: {list(sites)}")
        check("without the GIL" in out.stdout and f"receiver (" in out.stdout,
              f"the summary has no 'without the GIL' table naming the receiver:\n{out.stdout}")
        released = folded(gilspy, raw_path, "released", d)
        at_recv = sum(n for stack, n in released if stack[-1].startswith(f"receiver ("))
        check(at_recv * 1000 >= 0.9 * duration, f"--weight released: {at_recv} us under receiver: {released}")
        check_speedscope(gilspy, raw_path, d, {"held while others waited": "contention", "held": "hold",
                                               "waited": "wait", "without the GIL": "released"})
        trace = raw_path.replace(".json", ".trace.json")
        doc = check_trace(trace, raw)
        lane = [e for e in doc["traceEvents"] if e.get("name") == "without_gil" and e["tid"] == receiver]
        covered = sum(e["dur"] for e in lane) * 1000
        check(lane and lane[0]["args"]["function"] == "receiver" and covered >= 0.9 * duration,
              f"the receiver's without_gil slices cover {covered} of {duration} ns: {lane[:1]}")
        plain = tempfile.mkdtemp(prefix="gilspy-plain-")
        run_gilspy(gilspy, "record", "-p", w.pid, "-d", 0.5, "-o", plain, "--no-trace", check_rc=0)
        plain_raw = Raw(single_raw(plain))
        check(not [s for s in Stacks(plain_raw).samples if s["role"] == "r"], "released samples without --all-threads")
        check("released_sites" not in plain_raw.summary["stacks"], "released sites without --all-threads")
        print(f"all_threads: receiver at recv {recv_ns / duration:.1%}, napper at sleep {nap_ns / duration:.1%} of "
              f"{duration / 1e9:.2f} s; {len(lane)} without_gil slices on the receiver's lane")
    finally:
        w.kill()


SCENARIOS = {"stacks": scenario_stacks, "dump": scenario_dump, "all_threads": scenario_all_threads}
