"""N CPU-bound threads share the GIL while the main thread sleeps (holds no GIL).

usage: cpu_threads.py SECONDS [N] [SWITCH_INTERVAL_S]  (N defaults to 3; the interval to Python's default, 5 ms:
a shorter one gives more hand-offs per second)
"""
import sys
import threading
import time

from common import announce, native_id, report, seconds_arg, spin_until

duration = seconds_arg(sys.argv, 5.0)
count = int(sys.argv[2]) if len(sys.argv) > 2 else 3
if len(sys.argv) > 3:
    sys.setswitchinterval(float(sys.argv[3]))
tids = []
lock = threading.Lock()
started = threading.Barrier(count + 1)


def worker():
    with lock:
        tids.append(native_id())
    started.wait()
    spin_until(stop)


stop = time.monotonic() + duration
threads = [threading.Thread(target=worker) for _ in range(count)]
for t in threads:
    t.start()
started.wait()
info = {"main": native_id(), "cpu": tids}
announce(info)
for t in threads:
    t.join()  # blocks without the GIL until the workers end: the main thread never takes it meanwhile
report(info)
