"""The benchmark's workloads: threads with known GIL behaviour, counting their own iterations.

usage: python gilwork.py WORKLOAD SECONDS [--progress SECONDS]
SIGTERM or SIGINT end the run early (the result is still printed).

WORKLOAD is one of
  a  2 CPU-bound threads + 1 thread looping time.sleep(0.001) + 1 thread doing a tiny computation between
     time.sleep(0) calls
  b  4 CPU-bound threads
  c  1 release-heavy thread (tight os.write(devnull, b"x") loop: one drop_gil + take_gil per call) beside
     1 CPU-bound thread
  d  16 threads mixing all of those: 6 cpu, 4 sleep1ms, 4 sleep0, 2 write
  e  microsecond releases: 3 threads hashing 4 KiB buffers in a loop (hashlib drops the GIL for each digest
     of 2 KiB or more: a few microseconds without it per call, then a wait for it of as long)
  f  sub-millisecond naps: 2 threads sleeping 0.2-0.5 ms (random) in a loop beside 1 hashing thread
  g  a queue hand-off: 2 threads passing one item back and forth through two queue.Queue (each wakes the
     other: microsecond waits for the GIL at every hand-off)
  h  1 CPU-bound thread beside e, f and g's kinds: cpu, hash x2, nap, ping, pong
  (beside a CPU-bound thread the others wait out its 5 ms switch interval at every turn: e, f and g keep
  the hand-offs at microseconds, h has both)
  cal  one os.write thread alone (compare.py measures the uretprobe's own cost on it)

Every line on stdout is one JSON object:
  {"ready": {...}}      once every worker runs: pid, the workload, each thread's tid and role
  {"p": [t_ns, cpu_ns, n0, n1, ...]}   with --progress: CLOCK_MONOTONIC ns, the process's CPU time (ns) and
                        each worker's iterations so far, every
                        SECONDS (printed by the main thread, which otherwise naps in 50 ms steps so that it
                        takes and drops the GIL now and then and every tracer sees it)
  {"result": {...}}     at the end: per thread its role, iterations and iterations/s over the run

The scripts a.py, b.py, c.py and d.py beside this file run one workload each. Standard library only, Python 3.8+.
"""
import hashlib
import json
import os
import queue
import random
import signal
import sys
import threading
import time

WORKLOADS = {
    "a": ["cpu", "cpu", "sleep1ms", "sleep0"],
    "b": ["cpu"] * 4,
    "c": ["write", "cpu"],
    "d": ["cpu"] * 6 + ["sleep1ms"] * 4 + ["sleep0"] * 4 + ["write"] * 2,
    "e": ["hash", "hash", "hash"],
    "f": ["nap", "nap", "hash"],
    "g": ["ping", "pong"],
    "h": ["cpu", "hash", "hash", "nap", "ping", "pong"],
    "cal": ["write"],  # calibration (compare.py): one release-heavy thread alone, never contended
}


# Python work between the GIL releases of e-h (one spin iteration: ~25 ns on 3.11, ~50 on 3.8). It keeps each
# process at a few thousand hand-offs a second: at the 20-35 000 a second that bare loops reach, the uprobes'
# own cost (2-7 us per probe hit, three hits per take and drop) is 10-30 % of every thread's time, and there
# is no ground truth left to compare with (bench/README.md, "Microsecond workloads").
SPIN_HASH = 8000
SPIN_NAP = 1000
SPIN_QUEUE = 8000


def spin(n):
    x = 0
    for _ in range(n):
        x += 1
    return x


class Worker:
    def __init__(self, index, role):
        self.index = index
        self.role = role
        self.tid = 0
        self.n = 0
        self.t0 = 0
        self.t1 = 0


def run(workload, seconds, progress=0.0):
    roles = WORKLOADS[workload]
    workers = [Worker(i, r) for i, r in enumerate(roles)]
    counts = [0] * len(workers)  # written by each worker after every iteration, read by the progress printer
    started = threading.Barrier(len(workers) + 1)
    stop = [False]
    devnull = os.open(os.devnull, os.O_WRONLY)

    def cpu(w):
        n = 0
        i = w.index
        while not stop[0]:
            x = 0
            for _ in range(100):  # one iteration: ~2-4 µs of pure bytecode
                x += 1
            n += 1
            counts[i] = n
        return n

    def sleep1ms(w):
        n = 0
        i = w.index
        while not stop[0]:
            time.sleep(0.001)
            n += 1
            counts[i] = n
        return n

    def sleep0(w):
        n = 0
        i = w.index
        while not stop[0]:
            sum(range(20))
            time.sleep(0)
            n += 1
            counts[i] = n
        return n

    def write(w):
        n = 0
        i = w.index
        fd = devnull
        wr = os.write
        while not stop[0]:
            wr(fd, b"x")
            n += 1
            counts[i] = n
        return n

    def hash_(w):
        n = 0
        i = w.index
        buf = bytes(4096)  # >= 2 KiB: hashlib releases the GIL for the digest
        sha = hashlib.sha256
        while not stop[0]:
            sha(buf).digest()
            spin(SPIN_HASH)
            n += 1
            counts[i] = n
        return n

    def nap(w):
        n = 0
        i = w.index
        rnd = random.Random(w.index)
        while not stop[0]:
            time.sleep(rnd.uniform(0.0002, 0.0005))
            spin(SPIN_NAP)
            n += 1
            counts[i] = n
        return n

    # ping and pong pass one item back and forth: ping puts on `there` and waits on `back`, pong the other
    # way round. A get() that times out lets either end when the run stops.
    there, back = queue.Queue(), queue.Queue()

    def ping(w):
        n = 0
        i = w.index
        while not stop[0]:
            there.put(n)
            try:
                back.get(timeout=0.05)
            except queue.Empty:
                continue
            spin(SPIN_QUEUE)
            n += 1
            counts[i] = n
        return n

    def pong(w):
        n = 0
        i = w.index
        while not stop[0]:
            try:
                item = there.get(timeout=0.05)
            except queue.Empty:
                continue
            spin(SPIN_QUEUE)
            back.put(item)
            n += 1
            counts[i] = n
        return n

    bodies = {"cpu": cpu, "sleep1ms": sleep1ms, "sleep0": sleep0, "write": write, "hash": hash_, "nap": nap,
              "ping": ping, "pong": pong}

    def main(w):
        w.tid = threading.get_native_id()
        started.wait()
        w.t0 = time.monotonic_ns()
        w.n = bodies[w.role](w)
        w.t1 = time.monotonic_ns()

    threads = [threading.Thread(target=main, args=(w,), name=f"{w.role}-{w.index}") for w in workers]
    for t in threads:
        t.start()
    started.wait()
    t_start = time.monotonic_ns()
    emit({"ready": {"pid": os.getpid(), "workload": workload, "python": sys.version.split()[0],
                    "main_tid": threading.get_native_id(), "t_ns": t_start,
                    "threads": [{"tid": w.tid, "role": w.role, "index": w.index} for w in workers]}})
    deadline = t_start + int(seconds * 1e9)
    ended = [False]

    def end_now(signum, frame):
        ended[0] = True

    signal.signal(signal.SIGTERM, end_now)  # SIGTERM ends the run early, result still printed
    signal.signal(signal.SIGINT, end_now)
    step = progress if progress > 0 else 0.05
    next_print = t_start
    while True:
        now = time.monotonic_ns()
        if progress > 0 and now >= next_print:
            emit({"p": [now, time.process_time_ns()] + list(counts)})
            next_print += int(progress * 1e9)
        if now >= deadline or ended[0]:
            break
        time.sleep(min(step, max(0.0, (deadline - now) / 1e9)))
    stop[0] = True
    for t in threads:
        t.join()
    os.close(devnull)
    emit({"result": {"workload": workload, "seconds": seconds, "threads": [
        {"tid": w.tid, "role": w.role, "index": w.index, "iterations": w.n,
         "rate": w.n / max(1e-9, (w.t1 - w.t0) / 1e9)} for w in workers]}})


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main(argv, workload=None):
    args = list(argv[1:])
    progress = 0.0
    if "--progress" in args:
        i = args.index("--progress")
        progress = float(args[i + 1])
        del args[i:i + 2]
    if workload is None:
        if not args or args[0] not in WORKLOADS:
            sys.exit(__doc__)
        workload = args.pop(0)
    seconds = float(args[0]) if args else 10.0
    run(workload, seconds, progress)


if __name__ == "__main__":
    main(sys.argv)
