"""The garbage collector on the timeline (issue 9), against the ground truth the workload logs itself
(workloads/gc_timeline.py: gc.callbacks with CLOCK_MONOTONIC, gc.get_count() at known instants, a run-time
gc.disable()). One recording per interpreter of two processes, a few seconds: one runs forced and automatic
collections, a contended full collection and a disable/enable; the other has the GC disabled from its start.

The poll rate is fixed (-r 5000, a 200 us period) so that "within 2 poll periods" has one meaning; the adaptive
schedule's accuracy is measured in bench/ instead (it polls densely while a collection runs, not before one
starts). Each bound below is 2 poll periods plus the recording's p99 poll lateness (from its own summary): a
poll that comes late widens the bracket around an edge by that much, and the summary says how late polls came.
"""
import json
import os
import subprocess
import tempfile
import time

from harness import Failure, Raw, Workload, check, check_trace

RATE = 5000
PERIOD_NS = 1e9 / RATE


# How much later than `collecting` = 1 the start callback may read its clock (see check_main).
CALLBACK_LAG_NS = 1_500_000


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise Failure(f"timed out waiting for {what}")


def gc_events(raw):
    mono = raw.to_monotonic
    timed = [dict(tid=e[1], start=mono(e[2]), end=mono(e[2] + e[3]), gen=e[4], collected=e[5], waiters=e[7],
                  wait_ns=e[8], hold_lead=e[9], held_dur=e[10], held_from=e[11]) for e in raw.events if e[0] == "G"]
    # "from" and "to": the two polls around the window it ran in (none read it running).
    untimed = [{"at": mono(e[1] + e[2] // 2), "from": mono(e[1]), "to": mono(e[1] + e[2]), "gen": e[3], "n": e[4]}
               for e in raw.events if e[0] == "GI"]
    counts = [(mono(e[1]), e[2:5]) for e in raw.events if e[0] == "GC"]
    settings = [(mono(e[1]), e[2]) for e in raw.events if e[0] == "GS"]
    return timed, untimed, counts, settings


def callback_collections(log):
    """(start, stop, generation) of each collection the workload's gc.callbacks saw, in order."""
    out, start = [], None
    for phase, t, gen in log:
        if phase == "start":
            start = (t, gen)
        elif start is not None:
            out.append((start[0], t, gen))
            start = None
    return out


def check_main(raw, rep, tol):
    marks = rep["marks"]
    lo, hi = marks["start_ns"], marks["end_ns"]
    timed, untimed, counts, settings = gc_events(raw)
    truth = [c for c in callback_collections(rep["log"]) if lo <= c[1] <= hi]
    check(any(c[1] - c[0] > 10e6 and c[2] == 2 for c in truth), f"no full collection of tens of ms: {truth[:5]}")

    # Every collection counted once, per generation, exactly.
    in_window = [c for c in timed if lo <= c["start"] <= hi]
    check(all(c["gen"] >= 0 for c in in_window), f"a collection with no generation: {in_window}")
    got = [sum(1 for c in in_window if c["gen"] == g) + sum(u["n"] for u in untimed if u["gen"] == g and lo <= u["at"] <= hi)
           for g in range(3)]
    want = [sum(1 for c in truth if c[2] == g) for g in range(3)]
    check(got == want, f"collections per generation: gilspy {got} ({len(in_window)} timed), gc.callbacks {want}")

    # Collections longer than 1 ms: start and duration within 2 poll periods (+ p99 lateness) of the callbacks'.
    # Not the contended one: its callbacks are Python code that hands the GIL to the waiting spinner (a switch
    # interval, 5 ms) before it can read the clock, so their times are late; it is checked for its waiters below.
    c0, c1 = marks["contended_ns"], marks["contended_end_ns"]
    long_ones = [c for c in truth if c[1] - c[0] > 1e6 and not c0 <= c[0] <= c1]
    check(len(long_ones) >= 2, f"only {len(long_ones)} collections longer than 1 ms")
    worst = [0, 0]
    brackets = []
    in_gaps = []
    for s, e, g in long_ones:
        cands = [c for c in in_window if c["gen"] == g and min(c["end"], e) - max(c["start"], s) > 0]
        best = max(cands, key=lambda c: min(c["end"], e) - max(c["start"], s), default=None)
        if best is None:
            # No poll read it running: on a loaded machine gilspy itself can be off a CPU for longer than a
            # short collection (seen: a 4 ms gap over a 1.9 ms gen 0 one, Debian 3.14 in CI). Then the only
            # honest record is an untimed one whose window (the two polls around the gap) holds it whole;
            # the callbacks run while `collecting` is 1, so the real collection holds [s, e].
            gaps = [u for u in untimed if u["gen"] == g and u["from"] <= s and e <= u["to"]]
            check(gaps, f"the gen {g} collection at {s} ({(e - s) / 1e6:.1f} ms) was neither timed nor in a poll "
                        f"gap: timed near it {[c for c in in_window if abs(c['start'] - s) < 10e6]}, untimed "
                        f"{[u for u in untimed if abs(u['at'] - s) < 10e6]}")
            in_gaps.append((s, e, g))
            continue
        # An edge lies between two polls, the estimate at their midpoint: the poll after it (where gilspy writes
        # the counts, at every start and end) says how wide that bracket was. A poll that came late (a loaded
        # machine) widens it: the bound is 2 poll periods, or the bracket where it was wider.
        def half_bracket(edge):
            after = [ts for ts, _ in counts if ts > edge]
            return after[0] - edge if after else PERIOD_NS / 2
        b0, b1 = half_bracket(best["start"]), half_bracket(best["end"])
        brackets.append(2 * b0)
        t0, t1 = max(tol, 2 * b0), max(tol, 2 * b1)
        # The "start" callback runs after the interpreter set `collecting`, so its clock read can lag the real
        # start (seen: 854 us once, Debian 3.15 on this loaded 2-core VM): gilspy may start that much earlier,
        # and last that much longer; never later or shorter than the brackets allow.
        lag = CALLBACK_LAG_NS if best["start"] < s else 0
        ds, dd = abs(best["start"] - s), abs((best["end"] - best["start"]) - (e - s))
        worst = [max(worst[0], ds), max(worst[1], dd)]
        check(ds <= t0 + lag and dd <= t0 + t1 + lag,
              f"gen {g} collection of {(e - s) / 1e6:.2f} ms: gilspy starts {(best['start'] - s) / 1e3:+.0f} us off and "
              f"lasts {(best['end'] - best['start'] - (e - s)) / 1e3:+.0f} us off (bounds {t0 / 1e3:.0f} and "
              f"{(t0 + t1) / 1e3:.0f} us; poll brackets {2 * b0 / 1e3:.0f} and {2 * b1 / 1e3:.0f} us)")
    # Most are timed, or the test would time nothing: at most one in a gap, and two timed at least.
    check(len(in_gaps) <= 1 and len(brackets) >= 2,
          f"{len(brackets)} long collections timed, {len(in_gaps)} in poll gaps: {in_gaps}")
    # The rate asked for is the one used around collection starts: the lower median of the brackets (with two
    # timed, the narrower; one poll that came late, beyond the p99, widens one bracket, seen: 464 us). Where the
    # machine made the polls late (CI once, 3.11-3.15 in a row: p99 lateness 1-2 ms, 1 300-3 500 missed polls)
    # the bracket is wider by that much, the recording says so, and the bound takes it: a slower schedule
    # than asked would still show (at 1 kHz, brackets of 1-2 ms against ~0.5 ms on a quiet machine).
    brackets.sort()
    p99 = raw.summary["p99_lateness_ns"]
    check(brackets[(len(brackets) - 1) // 2] <= 2 * PERIOD_NS + p99,
          f"polls around collection starts were {brackets} ns apart (bound {2 * PERIOD_NS + p99:.0f}: two periods "
          f"and the recording's p99 lateness {p99})")

    # The contended full collection: the spinner waited through it, on the timeline too.
    full = max((c for c in in_window if c["gen"] == 2), key=lambda c: min(c["end"], c1) - max(c["start"], c0))
    check(min(full["end"], c1) - max(full["start"], c0) > 0, f"no collection inside [{c0}, {c1}]")
    check(full["waiters"] >= 1 and full["wait_ns"] > 0, f"the contended collection shows no waiter: {full}")
    # While the collector held the GIL (its part [held_from, held_from + held_dur]: its start and stop
    # callbacks, Python code, may hand the GIL over to the spinner), the spinner waited. How much of that time
    # depends on the machine: a spinner that dropped the GIL and was preempted before it slept on the GIL's
    # condition is running, not waiting, until it gets a CPU again (a loaded 2-core machine: several ms).
    spinner = rep["spinner"]
    anchor = raw.meta["clock"]["monotonic_ns"]
    h0 = full["start"] + full["held_from"] - anchor
    h1 = h0 + full["held_dur"]
    waited = sum(max(0, min(e, h1) - max(s, h0)) for tid, s, e in raw.waits if tid == spinner)
    check(waited > 0 or h1 - h0 < 1e6,
          f"the spinner never waited in the {(h1 - h0) / 1e6:.1f} ms the collector held the GIL")
    # The collector, even when its start callback handed the GIL to the spinner before the collection proper
    # (and its stop callback may again): its part on its lane is the collection proper, the same work as the
    # uncontended full collections (at least half as long as the shortest of them, against a machine's noise).
    proper = min(e - s for s, e, g in truth if g == 2 and not c0 <= s <= c1)
    check(full["tid"] == rep["main"] and full["hold_lead"] >= 0 and full["held_dur"] >= proper / 2,
          f"the collector should be the main thread, holding the GIL through the collection proper "
          f"(an uncontended one: {proper / 1e6:.1f} ms): {full}")

    # gc.disable() / gc.enable() at known times.
    changes = [(t, en) for t, en in settings[1:] if lo <= t <= hi]
    check([en for _, en in changes] == [0, 1], f"enabled changes {changes}")
    # A change is dated at the midpoint of the window between the two readings around it: at most half a
    # window off, and a window is at most two periods (a reading skipped) and the latest poll's lateness long.
    # (CI once: -0.97 ms, past the p99-based bound, from one late poll.)
    stol = max(tol, PERIOD_NS + raw.summary["max_lateness_ns"] / 2)
    check(abs(changes[0][0] - marks["disable_ns"]) <= stol and abs(changes[1][0] - marks["enable_ns"]) <= stol,
          f"enabled 0 at {changes[0][0] - marks['disable_ns']:+.0f} ns, 1 at {changes[1][0] - marks['enable_ns']:+.0f} "
          f"ns from the calls")

    # The counts track against gc.get_count() read at known instants (nothing allocates for 60 ms after).
    for t, c in rep["counts"]:
        seen = [v for ts, v in counts if ts <= t + 55e6]
        check(seen, f"no counts recorded before {t}")
        v = seen[-1]
        check(v[1:] == c[1:] and abs(v[0] - c[0]) <= 8, f"gc.get_count() {c} at {t}; gilspy's track {v}")
    return got, worst, full


def check_trace_gc(path, raw, main_tid, spinner, full):
    doc = check_trace(path, raw)
    ev = doc["traceEvents"]
    pid = raw.meta["pid"]
    gc_lane = [e for e in ev if e["ph"] == "X" and e["name"] == "gc" and e["tid"] == 4194305]
    gc_thread = [e for e in ev if e["ph"] == "X" and e["name"] == "gc" and e["tid"] != 4194305]
    instants = [e for e in ev if e["ph"] == "I" and e["name"] == "gc"]
    g = [e for e in raw.events if e[0] == "G"]
    check(len(gc_lane) == len(g), f"{len(gc_lane)} gc slices on the GC lane for {len(g)} G records")
    # On its thread's lane a collection is whole or not there (gilspy_trace_check: the same times as on the GC
    # lane): where the frames sampled meanwhile cross its ends, it is left to the GC lane (10 of 89 here).
    held = sum(1 for e in g if e[9] >= 0 and e[10] > 0)
    check(0.5 * held <= len(gc_thread) <= held, f"{len(gc_thread)} gc slices on thread lanes for {held} held")
    check(len(instants) == sum(1 for e in raw.events if e[0] == "GI"), "gc instants for the GI records")
    holds = [e for e in ev if e["ph"] == "X" and e["name"] == "hold_gil"]
    for s in gc_thread:
        check(any(h["tid"] == s["tid"] and h["ts"] <= s["ts"] and s["ts"] + s["dur"] <= h["ts"] + h["dur"] for h in holds),
              f"gc slice {s} lies in no hold_gil of its lane")
    # The contended collection on the GC lane, overlapped by the spinner's take_gil slices.
    base = doc["baseTimeNanoseconds"]
    start_us = (full["start"] - raw.meta["clock"]["monotonic_ns"] + raw.meta["clock"]["realtime_ns"] - base) / 1e3
    slice_ = min(gc_lane, key=lambda e: abs(e["ts"] - start_us))
    takes = [e for e in ev if e["ph"] == "X" and e["name"] == "take_gil" and e["tid"] == spinner]
    check(any(t["ts"] < slice_["ts"] + slice_["dur"] and slice_["ts"] < t["ts"] + t["dur"] for t in takes),
          "no take_gil of the spinner overlaps the contended gc slice")
    check(slice_["args"]["waiters"] >= 1 and slice_["args"]["generation"] == 2, f"gc slice args {slice_['args']}")
    check(any(e["ph"] == "C" and e["name"] == "gc_enabled" and e["args"]["enabled"] == 0 for e in ev), "no gc_enabled 0")
    check(any(e["ph"] == "C" and e["name"] == "gc_count" for e in ev), "no gc_count counter")


def scenario_gc_timeline(gilspy, python):
    d = tempfile.mkdtemp(prefix="gilspy-gc-")
    go = os.path.join(d, "go")
    main = Workload(python, "gc_timeline.py", "main", env={"GILSPY_TEST_GO": go})
    off = Workload(python, "gc_timeline.py", "disabled", env={"GILSPY_TEST_GO": go})
    p = None
    try:
        out_dir = os.path.join(d, "out")
        os.mkdir(out_dir)
        p = subprocess.Popen([gilspy, "record", "-p", f"{main.pid},{off.pid}", "-r", str(RATE), "-o", out_dir,
                              "--gc-threshold-ms", "10", "--no-status"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        partial = {w: os.path.join(out_dir, f"GIL_{w.pid}_rank_0.json.partial") for w in (main, off)}

        def reading_gc():  # both recordings have read the GC state once
            try:
                return all('["GS",' in open(f).read() for f in partial.values())
            except OSError:
                return False
        wait_for(reading_gc, 30, "gilspy to read both GC states")
        open(go, "w").close()
        wait_for(lambda: main.proc.poll() is not None and os.path.exists(off.report_path), 60, "the workloads")
        off.kill()
        stdout, stderr = p.communicate(timeout=60)
        check(p.returncode == 0, f"gilspy exited {p.returncode}: {stderr}")
        check("error" not in stderr.lower() and "warning" not in stderr.lower(), f"gilspy said: {stderr!r}")
        raw = Raw(os.path.join(out_dir, f"GIL_{main.pid}_rank_0.json"))
        tol = 2 * PERIOD_NS + raw.summary["p99_lateness_ns"]
        got, worst, full = check_main(raw, main.report(), tol)
        check_trace_gc(os.path.join(out_dir, f"GIL_{main.pid}_rank_0.trace.json"), raw, main.report()["main"],
                       main.report()["spinner"], full)
        s = raw.summary["gc"]
        check(s["collections"][2] >= 3 and s["longest_ns"] > 10e6 and s["wait_share"] > 0, f"summary gc {s}")
        check("GC collections of 10.0 ms or longer" in stdout, f"no list of long collections in {stdout}")

        # GC disabled from the start: nothing collected, nothing wrong, the counts still read.
        raw_off = Raw(os.path.join(out_dir, f"GIL_{off.pid}_rank_0.json"))
        t_off, u_off, counts_off, settings_off = gc_events(raw_off)
        check(not t_off and not u_off, f"a process with GC disabled shows collections: {t_off[:3]} {u_off[:3]}")
        check(settings_off and all(en == 0 for _, en in settings_off), f"its enabled track {settings_off}")
        check(max(v[0] for _, v in counts_off) > 1000, f"its gen0 count never grew: {counts_off[-3:]}")
        check(raw_off.summary["gc"]["collections"] == [0, 0, 0], f"summary {raw_off.summary['gc']}")
        check_trace(os.path.join(out_dir, f"GIL_{off.pid}_rank_0.trace.json"), raw_off)
        print(f"gc {raw.meta['python_version']}: collections {got} per generation as gc.callbacks, "
              f"{len([e for e in raw.events if e[0] == 'G'])} timed; worst start {worst[0] / 1e3:.0f} us, duration "
              f"{worst[1] / 1e3:.0f} us off (bound {tol / 1e3:.0f} us); contended full collection "
              f"{(full['end'] - full['start']) / 1e6:.1f} ms, {full['waiters']} waiter(s), the main thread's part from "
              f"+{full['held_from'] / 1e6:.1f} ms; disabled process: none")
    finally:
        main.kill()
        off.kill()
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()


SCENARIOS = {"gc_timeline": scenario_gc_timeline}
