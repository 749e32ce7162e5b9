"""Garbage collections whose ground truth the workload logs itself (issue 9): every collection's start and stop
(CLOCK_MONOTONIC, the clock gilspy uses) and generation from gc.callbacks, gc.get_count() at known instants, a
run-time gc.disable() / gc.enable(), and a full collection of a large heap while another thread waits for the
GIL (its start callback hands the GIL to that thread first).

usage: gc_timeline.py main|disabled
  main:     after the file named by GILSPY_TEST_GO appears: forced gc.collect(0/1/2), automatic collections from
            an allocation loop, a contended full collection, gc.disable() for 150 ms; then the report.
  disabled: gc.disable() before anything else, then allocates reference cycles (which would trigger hundreds of
            collections) until killed: no collection may be reported.
Both announce their roles (common.announce) first and wait for the go file; the report (common.report) holds
the marks, the callback log and the counts.
"""
import gc
import os
import sys
import threading
import time

from common import announce, native_id, report

mode = sys.argv[1] if len(sys.argv) > 1 else "main"
if mode == "disabled":
    gc.disable()


class Node:
    __slots__ = ("value", "ring")

    def __init__(self, value):
        self.value = value
        self.ring = [self]  # a reference cycle: only the collector frees it


def wait_for_go():
    path = os.environ.get("GILSPY_TEST_GO")
    while path and not os.path.exists(path):
        time.sleep(0.01)


def now():
    return time.monotonic_ns()


if mode == "disabled":
    announce({"main": native_id(), "enabled": gc.isenabled()})
    wait_for_go()
    t0 = now()
    made = 0
    while now() - t0 < 2.5e9:
        for i in range(200):
            Node(i)
        made += 200
        time.sleep(0.002)
    report({"main": native_id(), "made": made, "start_ns": t0, "end_ns": now(), "enabled": gc.isenabled()})
    time.sleep(120)  # the test kills it: no interpreter shutdown (whose final collection ignores gc.disable())
    sys.exit(0)

heap = [Node(i) for i in range(100_000)]  # a full collection of this takes tens of ms
gc.collect()
log = []  # [phase, monotonic ns, generation]


busy_start_callback = []  # set for the contended collection: its start callback runs Python for 12 ms


def callback(phase, info):
    log.append([phase, time.monotonic_ns(), info["generation"]])
    if phase == "start" and busy_start_callback:
        # Longer than the switch interval (5 ms) with the spinner waiting: the interpreter hands the GIL to the
        # spinner inside the callback, with `collecting` already 1, and the collector waits to get it back
        # before the collection proper. gilspy must still name the main thread as the collector.
        end = time.monotonic_ns() + 12_000_000
        while time.monotonic_ns() < end:
            pass


marks = {}
counts = []  # [monotonic ns, [count0, count1, count2]]: read, then nothing allocates for 60 ms


def snapshot():
    c = gc.get_count()
    counts.append([now(), list(c)])
    time.sleep(0.06)


spinning = threading.Event()
stop_spinning = threading.Event()
spinner_tid = []


def spin():
    spinner_tid.append(native_id())
    spinning.set()
    while not stop_spinning.is_set():
        for _ in range(1000):
            pass


gc.callbacks.append(callback)
announce({"main": native_id(), "enabled": gc.isenabled()})
wait_for_go()
marks["start_ns"] = now()
time.sleep(0.1)
snapshot()
for g in (0, 1, 2, 0, 1, 2):
    gc.collect(g)
    time.sleep(0.03)
snapshot()
# Automatic collections: garbage cycles, a few ms of allocation at a time.
t0 = now()
while now() - t0 < 0.5e9:
    for i in range(300):
        Node(i)
    time.sleep(0.0005)
snapshot()
# A full collection while another thread wants the GIL: it waits through the whole collection.
t = threading.Thread(target=spin)
t.start()
spinning.wait()
time.sleep(0.05)
marks["contended_ns"] = now()
busy_start_callback.append(True)
gc.collect(2)
busy_start_callback.clear()
marks["contended_end_ns"] = now()
stop_spinning.set()
t.join()
time.sleep(0.05)
snapshot()
marks["disable_ns"] = now()
gc.disable()
time.sleep(0.15)
marks["enable_ns"] = now()
gc.enable()
time.sleep(0.1)
snapshot()
marks["end_ns"] = now()
gc.callbacks.remove(callback)
report({"main": native_id(), "spinner": spinner_tid[0], "marks": marks, "log": log, "counts": counts,
        "heap": len(heap)})
time.sleep(0.2)
