"""A thread whose OS name is terminal control: ESC sequences that would clear the screen and set the window
title, a BEL and a newline (prctl PR_SET_NAME; 15 bytes at most), and whose Python name (threading.Thread.name)
holds one too, "h ESC[2J". It and the main thread take turns on the GIL.

usage: hostile_names.py SECONDS
"""
import ctypes
import sys
import threading
import time

from common import announce, native_id, report, seconds_arg, spin_until

PR_SET_NAME = 15
NAME = b"\x1b]0;pw\x07\n\x1b[2J"  # 12 bytes: title "pw", newline, clear screen

duration = seconds_arg(sys.argv, 5.0)
ready = threading.Event()
tid = []


def worker():
    ctypes.CDLL(None).prctl(PR_SET_NAME, ctypes.c_char_p(NAME), 0, 0, 0)
    tid.append(native_id())
    ready.set()
    spin_until(stop)


stop = time.monotonic() + duration
t = threading.Thread(target=worker, name="h\x1b[2J")
t.start()
ready.wait()
info = {"main": native_id(), "hostile": tid[0]}
announce(info)
spin_until(stop)
t.join()
report(info)
