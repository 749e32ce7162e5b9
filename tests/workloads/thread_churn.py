"""Threads started and joined continuously, each doing a little Python work, beside one CPU-bound thread.

usage: thread_churn.py SECONDS
"""
import sys
import threading
import time

from common import announce, native_id, report, seconds_arg, spin_until

duration = seconds_arg(sys.argv, 3.0)
stop = time.monotonic() + duration
seen = []


lives = {}  # tid -> [CLOCK_MONOTONIC ns at its start, at its end]


def short_lived():
    seen.append(native_id())
    lives[native_id()] = [time.monotonic_ns()]
    spin_until(time.monotonic() + 0.002)
    lives[native_id()].append(time.monotonic_ns())


def background():
    seen.append(native_id())
    spin_until(stop)


bg = threading.Thread(target=background)
bg.start()
announce({"main": native_id()})
count = 0
while time.monotonic() < stop:
    batch = [threading.Thread(target=short_lived) for _ in range(4)]
    for t in batch:
        t.start()
    for t in batch:
        t.join()
    count += len(batch)
bg.join()
report({"main": native_id(), "started": count, "tids": seen, "lives": lives})
