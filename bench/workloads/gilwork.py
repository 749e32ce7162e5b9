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
import json
import os
import signal
import sys
import threading
import time

WORKLOADS = {
    "a": ["cpu", "cpu", "sleep1ms", "sleep0"],
    "b": ["cpu"] * 4,
    "c": ["write", "cpu"],
    "d": ["cpu"] * 6 + ["sleep1ms"] * 4 + ["sleep0"] * 4 + ["write"] * 2,
    "cal": ["write"],  # calibration (compare.py): one release-heavy thread alone, never contended
}


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

    bodies = {"cpu": cpu, "sleep1ms": sleep1ms, "sleep0": sleep0, "write": write}

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
