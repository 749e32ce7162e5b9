"""N CPU-bound threads (2 by default) and 1 thread looping time.sleep(0.001): the sleeper holds the GIL only for
a moment after each nap, then waits for it behind the CPU threads' switch interval.

usage: cpu_and_sleeper.py SECONDS [N]
"""
import sys
import threading
import time

from common import announce, native_id, report, seconds_arg, spin_until

duration = seconds_arg(sys.argv, 5.0)
count = int(sys.argv[2]) if len(sys.argv) > 2 else 2
roles = {}
lock = threading.Lock()
started = threading.Barrier(count + 2)


def cpu(name):
    with lock:
        roles.setdefault("cpu", []).append(native_id())
    started.wait()
    marks = []
    done = spin_until(stop, marks)
    with lock:
        roles.setdefault("work", {})[str(native_id())] = done
        roles.setdefault("cpu_marks", {})[str(native_id())] = marks


def sleeper():
    with lock:
        roles["sleeper"] = native_id()
    started.wait()
    naps = 0
    while time.monotonic() < stop:
        time.sleep(0.001)
        naps += 1
    roles["naps"] = naps


stop = time.monotonic() + duration
threads = [threading.Thread(target=cpu, args=(i,)) for i in range(count)] + [threading.Thread(target=sleeper)]
for t in threads:
    t.start()
started.wait()
roles["main"] = native_id()
announce(roles)
for t in threads:
    t.join()
report(roles)
