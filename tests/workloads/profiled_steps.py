"""A program with its own "framework profiler": it writes the trace a PyTorch profiler (Kineto) would, from the
same clock (CLOCK_REALTIME, time.time_ns()), so a test can merge gilspy's GIL lanes into it and see them line up.

Two worker threads each run three "step" slices of 0.25 s of pure Python (they contend for the GIL), with a
0.15 s "io_wait" slice asleep between steps (no GIL); the main thread waits for them asleep inside a
"main_wait" slice. The trace is a Kineto-shaped object (schemaVersion and distributedInfo before traceEvents,
"rank": 0 spelled as Kineto does, baseTimeNanoseconds at the end, ts in µs after it with 3 decimals), written
gzip-compressed when its name ends in .gz.

usage: profiled_steps.py TRACE.json[.gz]   (GILSPY_TEST_REPORT gets the pid and the workers' tids)
"""
import gzip
import os
import sys
import threading
import time

from common import native_id, report, spin_until

STEP_S, GAP_S, STEPS = 0.25, 0.15, 3

time.sleep(0.4)  # gilspy attaches to the launched interpreter meanwhile
pid = os.getpid()
base_ns = time.time_ns() // 1_000_000_000 * 1_000_000_000 - 5_000_000_000  # Kineto's base is a little earlier
events = []
lock = threading.Lock()


def us(ns):
    return "%d.%03d" % divmod(ns - base_ns, 1000)


def slice_event(name, tid, start_ns, end_ns):
    with lock:
        events.append('{"ph": "X", "cat": "user_annotation", "name": "%s", "pid": %d, "tid": %d, "ts": %s, '
                      '"dur": %s, "args": {"External id": %d}}'
                      % (name, pid, tid, us(start_ns), "%d.%03d" % divmod(end_ns - start_ns, 1000), len(events)))


tids = []


def worker():
    tid = native_id()
    with lock:
        tids.append(tid)
    for _ in range(STEPS):
        t0 = time.time_ns()
        spin_until(time.monotonic() + STEP_S)
        slice_event("step", tid, t0, time.time_ns())
        t0 = time.time_ns()
        time.sleep(GAP_S)
        slice_event("io_wait", tid, t0, time.time_ns())


threads = [threading.Thread(target=worker) for _ in range(2)]
t0 = time.time_ns()
for t in threads:
    t.start()
time.sleep(STEPS * (STEP_S + GAP_S) + 0.1)
slice_event("main_wait", pid, t0, time.time_ns())
for t in threads:
    t.join()

start_us = us(t0)
meta = ['{"ph": "M", "name": "process_name", "pid": %d, "tid": 0, "ts": %s, "args": {"name": "python3"}}' % (pid, start_us),
        '{"ph": "M", "name": "process_labels", "pid": %d, "tid": 0, "ts": %s, "args": {"labels": "CPU"}}' % (pid, start_us)]
for tid in [pid] + tids:
    meta.append('{"ph": "M", "name": "thread_name", "pid": %d, "tid": %d, "ts": %s, "args": {"name": "thread %d (python3)"}}'
                % (pid, tid, start_us, tid))
    meta.append('{"ph": "M", "name": "thread_sort_index", "pid": %d, "tid": %d, "ts": %s, "args": {"sort_index": %d}}'
                % (pid, tid, start_us, tid))
flows = ['{"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": %s}' % us(time.time_ns())]
text = ('{\n  "schemaVersion": 1,\n  "distributedInfo": {"backend": "gloo", "rank": 0, "world_size": 1},\n'
        '  "traceEvents": [\n  ' + ",\n  ".join(meta + events + flows) + '\n  ],\n  "traceName": "steps",\n'
        '  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": %d\n}\n' % base_ns)
path = sys.argv[1]
with (gzip.open(path, "wt") if path.endswith(".gz") else open(path, "w")) as f:
    f.write(text)
report({"pid": pid, "workers": tids, "base_ns": base_ns})
