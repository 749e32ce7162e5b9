"""A thread blocked in socket.recv (a C call that lets go of the GIL) for the whole run, a thread napping in
time.sleep(0.05), and a CPU-bound thread: with --all-threads, gilspy shows where the first two spend their
time without the GIL (the recv and the sleep lines), beside the CPU thread's holds.

usage: blocked_io.py SECONDS
"""
import socket
import sys
import threading
import time

from common import announce, native_id, report, seconds_arg, spin_until

duration = seconds_arg(sys.argv, 5.0)
roles = {}
started = threading.Barrier(4)
near, far = socket.socketpair()


def receiver():
    roles["receiver"] = native_id()
    started.wait()
    while near.recv(64):  # blocked here until the end: far closes
        pass


def napper():
    roles["napper"] = native_id()
    started.wait()
    while time.monotonic() < stop:
        time.sleep(0.05)  # the nap line


def cpu():
    roles["cpu"] = native_id()
    started.wait()
    spin_until(stop)


stop = time.monotonic() + duration
threads = [threading.Thread(target=f, name=f.__name__) for f in (receiver, napper, cpu)]
for t in threads:
    t.start()
started.wait()
roles["main"] = native_id()
announce(roles)
threads[1].join()
threads[2].join()
far.close()
threads[0].join()
report(roles)
