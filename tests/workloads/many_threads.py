"""A process with many threads, few of them busy: BUSY CPU-bound threads share the GIL while the others sleep
on an Event (they hold nothing). Each thread names itself (prctl PR_SET_NAME: the OS name gilspy shows),
"busy-<i>" or "idle-<i>", so a test can tell which rows a summary shows.

usage: many_threads.py SECONDS [THREADS] [BUSY]  (300 threads, 3 of them busy, by default)
"""
import ctypes
import sys
import threading
import time

from common import announce, native_id, report, seconds_arg, spin_until

PR_SET_NAME = 15
libc = ctypes.CDLL(None, use_errno=True)

duration = seconds_arg(sys.argv, 5.0)
count = int(sys.argv[2]) if len(sys.argv) > 2 else 300
busy = int(sys.argv[3]) if len(sys.argv) > 3 else 3
lock = threading.Lock()
tids = {"busy": [], "idle": []}
started = threading.Barrier(count + 1)
done = threading.Event()


def set_os_name(name):
    libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def worker(kind, i):
    set_os_name(f"{kind}-{i}")
    with lock:
        tids[kind].append(native_id())
    started.wait()
    if kind == "busy":
        spin_until(stop)
    else:
        done.wait()


stop = time.monotonic() + duration
threads = [threading.Thread(target=worker, args=("busy" if i < busy else "idle", i)) for i in range(count)]
for t in threads:
    t.start()
started.wait()
info = {"main": native_id(), **tids}
announce(info)
time.sleep(max(0.0, stop - time.monotonic()))
done.set()
for t in threads:
    t.join()
report(info)
