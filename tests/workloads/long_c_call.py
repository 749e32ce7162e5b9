"""One thread holds the GIL through one long C call (sorting a big list never releases it) while 2 other
threads try to run Python code. Reports when the sort ran (CLOCK_MONOTONIC ns) so a test can find that hold.

usage: long_c_call.py [SECONDS_BEFORE_SORT]
"""
import random
import sys
import threading
import time

from common import announce, native_id, report, seconds_arg, spin_until

lead = seconds_arg(sys.argv, 0.5)
info = {"spinners": []}
lock = threading.Lock()
data = [random.random() for _ in range(1_500_000)]
started = threading.Barrier(4)
done = threading.Event()


def spinner():
    with lock:
        info["spinners"].append(native_id())
    started.wait()
    while not done.is_set():
        spin_until(time.monotonic() + 0.01)


def sorter():
    info["sorter"] = native_id()
    started.wait()
    time.sleep(lead)
    t0, c0 = time.monotonic_ns(), time.thread_time_ns()
    data.sort()
    c1, t1 = time.thread_time_ns(), time.monotonic_ns()
    # [t0, t1] may include waits for the GIL around the sort; the CPU time of the thread is the sort alone
    # (plus a few bytecodes), which the thread did while holding the GIL.
    info["sort_start_ns"], info["sort_end_ns"], info["sort_cpu_ns"] = t0, t1, c1 - c0
    time.sleep(0.3)
    done.set()


threads = [threading.Thread(target=spinner) for _ in range(2)] + [threading.Thread(target=sorter)]
for t in threads:
    t.start()
started.wait()
info["main"] = native_id()
announce(info)
for t in threads:
    t.join()
report(info)
