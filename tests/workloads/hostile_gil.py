"""A target that corrupts its own GIL state while it is recorded (issue 34, items 1 and 11): once armed it adds
2^62 to the GIL's switch_number every 100 ms (the running sum of hand-offs would overflow int64 within two of
them), and every 5 ms it writes a pointer to nowhere into last_holder and keeps the GIL 1 ms so a poller reads
it there. Three CPU threads share the GIL meanwhile. CPython never dereferences last_holder (it only compares
it), and switch_number only counts, so the target itself runs on unharmed.

usage: hostile_gil.py SECONDS ARM_FILE
ARM_FILE: the test writes the GIL's address there (from `gilspy info --json`); the workload starts corrupting
when it reads it, and creates ARM_FILE.armed after the first corruption.
"""
import ctypes
import os
import sys
import threading
import time

from common import announce, native_id, report, spin_until

SWITCH_NUMBER = 24  # offsetof(struct _gil_runtime_state, switch_number) on every CPython 3.8-3.13 (64-bit)
LAST_HOLDER = 8
NOWHERE = 0x10

duration = float(sys.argv[1])
arm_file = sys.argv[2]
stop = time.monotonic() + duration
tids = []


def cpu():
    tids.append(native_id())
    spin_until(stop)


def corrupt(gil):
    switch_number = ctypes.c_uint64.from_address(gil + SWITCH_NUMBER)
    last_holder = ctypes.c_uint64.from_address(gil + LAST_HOLDER)
    jumps = forged = 0
    next_jump = 0.0
    while time.monotonic() < stop:
        if time.monotonic() >= next_jump:
            switch_number.value = (switch_number.value + (1 << 62)) % (1 << 64)
            jumps += 1
            next_jump = time.monotonic() + 0.1
        last_holder.value = NOWHERE
        forged += 1
        if jumps == 1 and forged == 1:
            open(arm_file + ".armed", "w").close()
        spin_until(time.monotonic() + 0.001)
        time.sleep(0.004)
    return jumps, forged


workers = [threading.Thread(target=cpu) for _ in range(3)]
for t in workers:
    t.start()
while len(tids) < 3:
    time.sleep(0.001)
info = {"main": native_id(), "cpu": list(tids)}
announce(info)
while not os.path.exists(arm_file) or os.path.getsize(arm_file) == 0:
    if time.monotonic() > stop:
        sys.exit("never armed")
    time.sleep(0.005)
with open(arm_file) as f:
    gil = int(f.read().strip(), 16)
info["jumps"], info["forged"] = corrupt(gil)
for t in workers:
    t.join()
report(info)
