"""Drives gilspy's Python API from inside the recorded process: start, 2 CPU threads for a while, stop.

usage: python_api.py OUTPUT_DIR   (prints the files as JSON, with the CPU threads' TIDs)
"""
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "python"))
import gilspy  # noqa: E402

from common import native_id, spin_until  # noqa: E402

tids = []


def cpu():
    tids.append(native_id())
    spin_until(time.monotonic() + 1.0)


gilspy.gil_trace_record_start(output_dir=sys.argv[1])
threads = [threading.Thread(target=cpu) for _ in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
files = gilspy.gil_trace_record_stop()
print(json.dumps({"files": files, "cpu": tids, "pid": os.getpid()}))
