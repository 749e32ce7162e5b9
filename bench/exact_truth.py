"""gilspy --exact as compare.py's ground truth (compare.py --truth exact): a second gilspy on the same process,
its probes on take_gil / drop_gil, its H / W intervals clipped to the window and shaped like uprobe_gil's result
so that compare.py judges the sampler against it the same way. bpftrace can still run beside it as the
independent referee (--referee): then the two truths' own agreement is reported too."""
import time

import benchlib

# From `gilspy record --exact`'s start to its probes being in: it calibrates the probe cost first (~0.3 s) and
# attaches like any recording. Measured on the bench VM at 0.5-0.9 s; the window is checked afterwards anyway.
ATTACH_S = 1.5


def start(gilspy, pid):
    return benchlib.Gilspy(gilspy, pid, None, extra=["--exact"])


def window_after_attach(lead, window):
    S = benchlib.monotonic_ns() + int((ATTACH_S + lead) * 1e9)
    return S, S + int(window * 1e9)


def wait_until(E):
    time.sleep(max(0.0, (E - benchlib.monotonic_ns()) / 1e9 + 0.05))


def truth_of(ex, S, E):
    """The exact recording `ex` (a stopped benchlib.Gilspy) clipped to [S, E], shaped like
    uprobe_gil.UprobeTracer.result(); raises ValueError when it is missing or does not cover the window."""
    path = ex.raw_path()
    if not path:
        raise ValueError(f"gilspy --exact wrote no raw file (exit {ex.rc}): {ex.stderr.strip()[-300:]}")
    raw = benchlib.Raw(path)
    ex.cleanup()
    if raw.meta.get("mode") != "exact":
        raise ValueError(f"gilspy --exact recorded in mode {raw.meta.get('mode')!r}: {ex.stderr.strip()[-300:]}")
    if raw.start_ns > S or raw.end_ns < E:
        raise ValueError("gilspy --exact's recording does not cover the window (its probes came late?)")
    threads = {}
    takes = drops = 0
    for tid in set(raw.holds) | set(raw.waits):
        hold_ns, holds = benchlib.clip(raw.holds.get(tid, []), S, E)
        wait_ns, waits = benchlib.clip(raw.waits.get(tid, []), S, E)
        takes += sum(1 for a, _ in raw.holds.get(tid, []) if S <= a < E)
        drops += sum(1 for _, b in raw.holds.get(tid, []) if S <= b < E)
        short = [(a, b) for a, b in raw.holds.get(tid, []) if S <= a and b <= E and b - a < 100_000]
        threads[tid] = {"hold_ns": hold_ns, "wait_ns": wait_ns, "holds": holds, "waits": waits, "waits_long": 0,
                        "holds_short": len(short), "holds_short_ns": sum(b - a for a, b in short)}
    x = raw.summary.get("exact", {})
    lost = x.get("lost", 0)
    return {"threads": threads, "tids_seen": sorted(raw.threads), "takes_in_window": takes,
            "drops_in_window": drops, "switches": takes, "calls_take": x.get("takes", 0),
            "calls_drop": x.get("takes", 0), "hold_unknown_start": 0, "wait_unknown_start": 0,
            "hold_lost_start": lost, "wait_lost_start": 0, "hold_lost_end": 0, "wait_lost_end": 0,
            "attached_ns": raw.start_ns}


def calibrate(gilspy, pid, tid):
    """compare.calibrate()'s {"wait_ns": ...} for this truth: the mean time inside take_gil, under gilspy
    --exact's probes, of the lone never-contended thread `tid` (natively ~0.1 µs); None when there were none."""
    ex = start(gilspy, pid)
    time.sleep(ATTACH_S)
    ex.stop()
    path = ex.raw_path()
    if not path:
        return None
    raw = benchlib.Raw(path)
    ex.cleanup()
    waits = raw.waits.get(tid, [])
    if raw.meta.get("mode") != "exact" or not waits:
        return None
    return {"wait_ns": sum(b - a for a, b in waits) / len(waits)}


def agreement(exact, referee, W):
    """The two ground truths against each other: the worst |Δ| over threads, hold and wait, in pp."""
    worst_hold = worst_wait = 0.0
    for tid in set(exact["threads"]) | set(referee["threads"]):
        e = exact["threads"].get(tid, {})
        r = referee["threads"].get(tid, {})
        worst_hold = max(worst_hold, abs(e.get("hold_ns", 0) - r.get("hold_ns", 0)) / W * 100)
        worst_wait = max(worst_wait, abs(e.get("wait_ns", 0) - r.get("wait_ns", 0)) / W * 100)
    return {"max_hold_pp": worst_hold, "max_wait_pp": worst_wait}
