"""A parent that starts multiprocessing workers mid-run (as a DataLoader does), each with 2 CPU-bound threads.

usage: mp_workers.py DELAY_S WORKERS WORK_S [START_METHOD]  (start method: fork by default)
The parent waits DELAY_S, starts the workers, reports their pids, and waits for them.
"""
import multiprocessing as mp
import os
import sys
import threading
import time

from common import announce, native_id, report, spin_until


def worker(seconds):
    stop = time.monotonic() + seconds
    threads = [threading.Thread(target=spin_until, args=(stop,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    delay, count, work = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    mp.set_start_method(sys.argv[4] if len(sys.argv) > 4 else "fork")
    announce({"main": native_id(), "pid": os.getpid()})
    time.sleep(delay)
    procs = [mp.Process(target=worker, args=(work,)) for _ in range(count)]
    for p in procs:
        p.start()
    info = {"main": native_id(), "pid": os.getpid(), "workers": [p.pid for p in procs]}
    for p in procs:
        p.join()
    report(info)
