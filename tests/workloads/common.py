"""Shared by the e2e workloads: readiness and the report a test reads back.

A workload tells the test which OS thread plays which role. It writes one JSON line to the file named by
GILSPY_TEST_READY (a FIFO the test waits on) once every thread runs, and the same JSON (plus what it measured)
to GILSPY_TEST_REPORT at the end. Both are optional, so the scripts also run by hand.
"""
import json
import os
import threading
import time


def native_id():
    return threading.get_native_id()


def announce(info):
    path = os.environ.get("GILSPY_TEST_READY")
    if path:
        with open(path, "w") as f:
            f.write(json.dumps(info) + "\n")


def report(info):
    path = os.environ.get("GILSPY_TEST_REPORT")
    if path:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(info, f)
        os.replace(tmp, path)


def seconds_arg(argv, default):
    return float(argv[1]) if len(argv) > 1 else default


def spin_until(deadline, marks=None):
    """Counts loop iterations until `deadline`. With a list `marks`, appends [CLOCK_MONOTONIC ns, this thread's
    CPU time ns, iterations] about every 10 ms and at the end, so a test can take the CPU time inside any window
    (a recording's) rather than over the thread's life."""
    n = 0
    next_mark = 0
    while True:
        now = time.monotonic_ns()
        if marks is not None and now >= next_mark:
            marks.append([now, time.thread_time_ns(), n])
            next_mark = now + 10_000_000
        if now >= deadline * 1e9:
            break
        for _ in range(500):
            n += 1
    if marks is not None:
        marks.append([time.monotonic_ns(), time.thread_time_ns(), n])
    return n
