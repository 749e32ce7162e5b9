"""About 1 000 new threads a second, each living ~30 ms (it sleeps, then does a little Python work): a server's
thread per request, long enough for gilspy to see (bench/README, "Threads ever seen").

usage: churn_1000.py SECONDS
"""
import sys
import threading
import time


def work():
    time.sleep(0.03)
    sum(range(2000))


def main():
    stop = time.monotonic() + float(sys.argv[1])
    started = 0
    deadline = time.monotonic()
    while time.monotonic() < stop:
        threading.Thread(target=work, daemon=True).start()
        started += 1
        deadline += 0.001  # absolute deadlines: the rate does not drift with the loop's own time
        time.sleep(max(0.0, deadline - time.monotonic()))
    print(f"{started} threads started", file=sys.stderr)


main()
