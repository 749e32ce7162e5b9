"""A hung service: one thread ("stuck") is inside a regular expression whose backtracking takes far longer
than any test (the regex engine never releases the GIL), two threads ("worker-N") want the GIL for Python
code, and one ("sleeper") sleeps. Announces each role's thread id just before the regex starts.

usage: hung_regex.py [SECONDS_OF_BACKTRACKING_IN_LOG2]   (default 40: hours)
"""
import re
import sys
import threading
import time

from common import announce, native_id

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
info = {"workers": []}
lock = threading.Lock()
ready = threading.Barrier(4)


def worker():
    with lock:
        info["workers"].append(native_id())
    ready.wait()
    n = 0
    while True:
        n += 1


def sleeper():
    info["sleeper"] = native_id()
    ready.wait()
    time.sleep(3600)


# (a+)+$ against a run of a's ending in b backtracks through every split of the run: 2**steps tries. Compiled
# here: compiling runs Python code, which would hand the GIL over while the test watches.
pattern = re.compile(r"(a+)+$")
subject = "a" * steps + "b"


def catastrophic_match():
    return pattern.match(subject)


def stuck():
    info["stuck"] = native_id()
    ready.wait()
    time.sleep(0.2)  # the others are running by now
    info["main"] = main_tid
    announce(info)
    catastrophic_match()


main_tid = native_id()
threads = [threading.Thread(target=worker, name=f"worker-{i}", daemon=True) for i in range(2)]
threads += [threading.Thread(target=sleeper, name="sleeper", daemon=True),
            threading.Thread(target=stuck, name="stuck", daemon=True)]
for t in threads:
    t.start()
threads[-1].join()
