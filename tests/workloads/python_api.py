"""Drives gilspy's Python API from inside the recorded process, with the seed's parameters:

1. two CPU threads contend (0.3 s) before any recording;
2. gil_trace_record_start(pid_list=[os.getpid(), <a dead pid>], duration=2): two threads contend for 0.8 s,
   then the recording ends by itself at 2 s while this process waits; two more contend after it (0.2 s);
   gil_trace_record_stop() returns the files per pid, the dead pid named as skipped;
3. gil_trace_record_start() with the defaults (every Python process, until stop): two threads contend 0.5 s.

usage: python_api.py OUTPUT_DIR   (prints one JSON line: the files of both recordings and the phases' TIDs)
"""
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "python"))
import gilspy  # noqa: E402

from common import native_id, spin_until  # noqa: E402


def contend(seconds, n=2):
    """n CPU-bound threads for `seconds`; returns their TIDs once they have ended."""
    tids = []

    def cpu():
        tids.append(native_id())
        spin_until(time.monotonic() + seconds)

    threads = [threading.Thread(target=cpu) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tids


out = sys.argv[1]
before = contend(0.3)

dead = subprocess.Popen(["true"])
dead.wait()
rec = gilspy.gil_trace_record_start(pid_list=[os.getpid(), dead.pid], duration=2,
                                    output_dir=os.path.join(out, "timed"))
started = time.monotonic()
inside = contend(0.8)
time.sleep(max(0.0, started + 2.3 - time.monotonic()))  # the recording ends by itself at 2 s, meanwhile
after = contend(0.2)
timed = gilspy.gil_trace_record_stop()

gilspy.gil_trace_record_start(output_dir=os.path.join(out, "all"))
inside_all = contend(0.5)
everything = gilspy.gil_trace_record_stop()

print(json.dumps({"pid": os.getpid(), "dead": dead.pid, "timed": timed, "timed_skipped": rec.skipped,
                  "timed_exit": rec.exit_status, "all": everything, "before": before, "inside": inside,
                  "after": after, "inside_all": inside_all}))
