"""A parent that forks short-lived Python children one after another: each runs Python code for
CHILD_SECONDS and exits; a new one starts every GAP_SECONDS. Reports the children's pids and when each
started and ended (CLOCK_MONOTONIC ns).

usage: short_forks.py COUNT CHILD_SECONDS GAP_SECONDS
"""
import os
import sys
import time

from common import report, spin_until

count, child_s, gap_s = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
info = {"pid": os.getpid(), "children": []}
for _ in range(count):
    start = time.monotonic_ns()
    pid = os.fork()
    if pid == 0:
        spin_until(time.monotonic() + child_s)
        os._exit(0)
    info["children"].append({"pid": pid, "start_ns": start})
    time.sleep(gap_s)
for child in info["children"]:
    os.waitpid(child["pid"], 0)
report(info)
