"""A target that forges its thread ids (issue 34, item 3): a thread rewrites the OS thread id in its own
PyThreadState every millisecond (a new, never-reused value each time), so a reader of the thread list sees a
new thread every millisecond, while 2 CPU threads share the GIL. The field is found by its value: the thread's
own id (threading.get_native_id) in the first 1 KB of its PyThreadState; CPython only keeps it for debuggers.
Before 3.11 there is no such field, and the pthread_t is forged instead.

usage: forged_tids.py SECONDS
"""
import ctypes
import sys
import threading
import time

from common import announce, native_id, report, seconds_arg, spin_until

duration = seconds_arg(sys.argv, 10.0)
stop = time.monotonic() + duration
ready = threading.Event()
info = {}


def forger():
    get = ctypes.pythonapi.PyThreadState_Get
    get.restype = ctypes.c_void_p
    ts = get()
    me = native_id()
    words = [ctypes.c_uint64.from_address(ts + off) for off in range(0, 1024, 8)]
    field = next((w for w in words if w.value == me), None)
    if field is not None:
        real = me
        fake = lambda n: 5_000_000 + n  # past the kernel's largest pid (2^22): never a real thread
    else:
        # 3.8-3.10 keep no OS id: the pthread_t (threading.get_ident()), from which a reader finds it, is
        # forged instead, as addresses that map nothing.
        real = threading.get_ident()
        field = next(w for w in words if w.value == real)
        fake = lambda n: 0x100000 + 0x1000 * n
    info["forger"] = me
    info["forged_field"] = "native_thread_id" if real == me else "thread_id"
    ready.set()
    forged = 0
    while time.monotonic() < stop:
        forged += 1
        field.value = fake(forged)
        spin_until(time.monotonic() + 0.0002)
        time.sleep(0.0008)
    field.value = real
    info["forged"] = forged


cpu_tids = []


def cpu():
    cpu_tids.append(native_id())
    spin_until(stop)


workers = [threading.Thread(target=cpu) for _ in range(2)]
f = threading.Thread(target=forger)
for t in workers + [f]:
    t.start()
ready.wait()
while len(cpu_tids) < 2:
    time.sleep(0.001)
info["main"] = native_id()
info["cpu"] = cpu_tids
announce(info)
for t in workers + [f]:
    t.join()
report(info)
