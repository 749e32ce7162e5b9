"""A contended multi-threaded workload for gilspy's README example.

Three CPU-bound threads share the GIL, one thread sleeps in short naps (holds no GIL while asleep, waits for
it after each nap) and the main thread waits for them. Runs for SECONDS (default 3) seconds.
"""
import sys
import threading
import time

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
stop = time.monotonic() + SECONDS


def spin():
    n = 0
    while time.monotonic() < stop:
        for _ in range(1000):
            n += 1


def napper():
    while time.monotonic() < stop:
        time.sleep(0.001)


threads = [threading.Thread(target=spin, name=f"spin-{i}") for i in range(3)]
threads.append(threading.Thread(target=napper, name="napper"))
for t in threads:
    t.start()
for t in threads:
    t.join()
