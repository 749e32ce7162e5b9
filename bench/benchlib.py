"""Shared by compare.py and cost.py: interpreters, workload processes, running gilspy, reading its raw files."""
import atexit
import glob
import json
import shlex
import shutil
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKLOADS = os.path.join(HERE, "workloads")
WORKLOAD_NAMES = {
    "a": "2 cpu + sleep(1ms) + sleep(0)",
    "b": "4 cpu",
    "c": "os.write loop + cpu",
    "d": "16 threads mixed",
    "e": "3 hashing 4 KiB (us releases)",
    "f": "2 nap 0.2-0.5 ms + 1 hashing",
    "g": "queue ping-pong",
    "h": "cpu + 2 hashing + nap + ping-pong",
    "cal": "1 os.write thread alone",
    "server": "http.server, thread per request, loopback clients",
}



def stop_on_sigterm():
    """A bench killed with SIGTERM (kill, timeout) unwinds like Ctrl+C: its `finally` blocks stop the workloads and
    gilspy it started, instead of leaving them spinning a core under the next measurement."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))

def monotonic_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


# One way to find pyenv for the tests and the bench: the e2e harness's.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "e2e"))
from harness import pyenv_root  # noqa: E402


def find_python(spec):
    """'3.11' -> newest pyenv 3.11.x python; a path -> itself. None when absent."""
    if os.sep in spec:
        return spec if os.access(spec, os.X_OK) else None
    pattern = os.path.join(pyenv_root(), "versions", spec + ".*", "bin", "python" + spec)
    found = sorted((p for p in glob.glob(pattern) if os.access(p, os.X_OK)),
                   key=lambda p: [int(x) if x.isdigit() else x for x in p.split("/")[-3].split(".")])
    return found[-1] if found else None


def parse_modes(text):
    """'label=args,label2=args2' -> [(label, kind, words)]; kind: gilspy (args are gilspy's, empty = its
    defaults), poller (args start with 'poller': tools/poller.c's), uprobes (args 'uprobes')."""
    out = []
    for item in filter(None, (x.strip() for x in text.split(","))):
        label, eq, spec = item.partition("=")
        if not eq:
            die(f"--modes: '{item}' is not label=args")
        label = label.strip()
        if any(label == o[0] for o in out):
            die(f"--modes: label '{label}' given twice")
        words = shlex.split(spec)
        if words[:1] == ["poller"]:
            out.append((label, "poller", words[1:]))
        elif words == ["uprobes"]:
            out.append((label, "uprobes", []))
        else:
            out.append((label, "gilspy", words))
    return out


def default_gilspy():
    for cand in (os.environ.get("GILSPY"), os.path.join(ROOT, "build", "cli", "gilspy")):
        if cand and os.path.exists(cand):
            return cand
    return None


_snapshots = {}


def snapshot_gilspy(path, wait_s=120):
    """A private copy of the gilspy binary, so that a rebuild of build/ in the middle of a long benchmark
    (relinking makes the file briefly unreadable or half-written) cannot break or change the run."""
    if path in _snapshots:
        return _snapshots[path]
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if os.access(path, os.X_OK):
                before = os.stat(path)
                d = tempfile.mkdtemp(prefix="gilspy-bench-bin-")
                copy = os.path.join(d, "gilspy")
                shutil.copy2(path, copy)
                after = os.stat(path)
                if (before.st_mtime_ns, before.st_size) == (after.st_mtime_ns, after.st_size) and \
                        subprocess.run([copy, "--version"], capture_output=True).returncode == 0:
                    atexit.register(shutil.rmtree, d, True)
                    _snapshots[path] = copy
                    return copy
                shutil.rmtree(d, True)
        except OSError:
            pass
        if time.monotonic() > deadline:
            die(f"{path} is not a runnable gilspy (still being rebuilt?)")
        time.sleep(1)


class Workload:
    """One bench/workloads/gilwork.py process; stdout lines are parsed by a reader thread."""

    def __init__(self, python, workload, seconds=600, progress=0.0, timeout=30, script_args=None):
        args = script_args or [python, os.path.join(WORKLOADS, "gilwork.py"), workload, str(seconds)]
        if progress:
            args += ["--progress", str(progress)]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.ready = None
        self.result = None
        self.progress = []  # [t_ns, n0, n1, ...]
        self._lock = threading.Lock()
        self._ready_ev = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready_ev.wait(timeout) or self.ready is None:
            self.kill()
            raise RuntimeError(f"workload {workload} on {python} did not start: "
                               f"{self.proc.stderr.read().decode(errors='replace')[-2000:]}")
        self.pid = self.ready["pid"]
        self.roles = {t["tid"]: f"{t['role']}" for t in self.ready["threads"]}
        self.roles[self.ready["main_tid"]] = "main"

    def _read(self):
        for raw in self.proc.stdout:
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if "ready" in obj:
                self.ready = obj["ready"]
                self._ready_ev.set()
            elif "p" in obj:
                with self._lock:
                    self.progress.append(obj["p"])
            elif "result" in obj:
                self.result = obj["result"]
        self._ready_ev.set()

    def helper_cpu_ns(self):
        """CPU time of the workload's helper processes (none here; the server's load generator)."""
        return 0

    def counts_at(self, t_ns, after=True):
        """The progress sample nearest t_ns: the first at or after it (after=True) or the last at or before."""
        with self._lock:
            samples = list(self.progress)
        if after:
            for s in samples:
                if s[0] >= t_ns:
                    return s
        else:
            for s in reversed(samples):
                if s[0] <= t_ns:
                    return s
        return None

    def stop(self, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._reader.join(5)
        return self.result

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class ServerWorkload(Workload):
    """workloads/server.py (thread per request) under load from workloads/loadgen.py, another process.
    The server's own progress lines count the requests it answered (one "requests" role); the load generator's
    count of completed requests and errors is kept in .load_result."""

    def __init__(self, python, seconds=600, progress=0.0, clients=4, timeout=30):
        super().__init__(python, "server", seconds, progress, timeout,
                         script_args=[python, os.path.join(WORKLOADS, "server.py"), str(seconds)])
        self.load = subprocess.Popen([python, os.path.join(WORKLOADS, "loadgen.py"), str(self.ready["port"]),
                                      "--clients", str(clients), "--seconds", str(seconds), "--progress", "1"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.load_result = None
        # Wait for the first answered requests, so that the first measured phase is already under load.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not (self.progress and self.progress[-1][-1] > 0):
            time.sleep(0.05)

    def helper_cpu_ns(self):
        """CPU time the load generator (its main process and client processes) has used so far."""
        pids = [self.load.pid]
        try:
            with open(f"/proc/{self.load.pid}/task/{self.load.pid}/children") as f:
                pids += [int(x) for x in f.read().split()]
        except OSError:
            pass
        return sum(cpu_ns(p) or 0 for p in pids)

    def stop(self, timeout=30):
        if self.load.poll() is None:
            self.load.send_signal(signal.SIGTERM)
        try:
            out, _ = self.load.communicate(timeout=timeout)
            for line in out.decode(errors="replace").splitlines():
                if line.startswith('{"result"'):
                    self.load_result = json.loads(line)["result"]
        except subprocess.TimeoutExpired:
            self.load.kill()
            self.load.wait()
        return super().stop(timeout)

    def kill(self):
        if getattr(self, "load", None) is not None and self.load.poll() is None:
            self.load.kill()
            self.load.wait()
        super().kill()


def start_workload(python, workload, seconds=600, progress=0.0, clients=4):
    if workload == "server":
        return ServerWorkload(python, seconds, progress, clients)
    return Workload(python, workload, seconds, progress)


def cpu_ns(pid):
    """CPU time (user + system, all live threads) process pid has used so far, from schedstat (ns); None if
    it is gone."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
    except (OSError, ValueError):
        return None
    return total


def machine_busy_ns():
    """CPU time the whole machine has been busy (all CPUs, everything but idle and iowait), from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal ...
    return (v[0] + v[1] + v[2] + v[5] + v[6]) * 1e9 / os.sysconf("SC_CLK_TCK")


class Gilspy:
    """`gilspy record -p PID` until stop() (SIGINT) or its -d; keeps the child's rusage."""

    def __init__(self, gilspy, pid, rate, busy=False, duration=None, extra=(), prefix=()):
        """rate None: gilspy's own default (whatever the binary's default is), or what extra says."""
        self.dir = tempfile.mkdtemp(prefix="gilspy-bench-")
        args = [*prefix, gilspy, "record", "-p", str(pid), "--no-trace", "-o", self.dir, "-q", "--no-status"]
        if rate:  # None or 0: gilspy's default (adaptive) schedule
            args += ["-r", str(rate)]
        if busy:
            args.append("--busy")
        if duration:
            args += ["-d", str(duration)]
        args += list(extra)
        self.t_start = monotonic_ns()
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.rusage = None
        self.rc = None

    def cpu_ns(self):
        """CPU time (user + system, all threads) the running gilspy has used so far, from schedstat (ns)."""
        return cpu_ns(self.proc.pid)

    def stop(self, timeout=60):
        if self.proc.poll() is None and self.rc is None:
            self.proc.send_signal(signal.SIGINT)
        return self.wait(timeout)

    def wait(self, timeout=60):
        if self.rc is None:
            deadline = time.monotonic() + timeout
            while True:
                if self.proc.returncode is not None:  # stop()'s poll() reaped it (gilspy refused its options)
                    self.rc = self.proc.returncode
                    break
                pid, status, ru = os.wait4(self.proc.pid, os.WNOHANG)
                if pid:
                    self.rc = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status
                    self.proc.returncode = self.rc
                    self.rusage = ru
                    break
                if time.monotonic() > deadline:
                    self.proc.kill()
                    deadline = time.monotonic() + 10
                time.sleep(0.01)
            self.t_end = monotonic_ns()
            self.stdout = self.proc.stdout.read().decode(errors="replace")
            self.stderr = self.proc.stderr.read().decode(errors="replace")
        return self.rc

    def raw_path(self):
        files = [f for f in glob.glob(os.path.join(self.dir, "GIL_*_rank_*.json")) if not f.endswith(".trace.json")]
        if not files:
            files = glob.glob(os.path.join(self.dir, "GIL_*_rank_*.json.partial"))
        return files[0] if files else None

    def cleanup(self):
        for f in glob.glob(os.path.join(self.dir, "*")):
            os.unlink(f)
        os.rmdir(self.dir)


def gil_address(gilspy, pid):
    """The GIL struct's address in process pid, from `gilspy info --json` (None if it cannot tell)."""
    try:
        out = subprocess.run([gilspy, "info", "-p", str(pid), "--json"], capture_output=True, text=True, timeout=30)
        return int(json.loads(out.stdout)["gil_addr"], 0)
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return None


class Raw:
    """A gilspy raw file: meta, summary, and per-thread H / W intervals in absolute CLOCK_MONOTONIC ns."""

    def __init__(self, path):
        with open(path) as f:
            text = f.read()
        try:
            doc = json.loads(text)
        except ValueError:
            # A .partial: keep every complete event line.
            lines = text.splitlines()
            doc = {"meta": json.loads(lines[1][len('"meta":'):].rstrip(",")), "events": [], "summary": {}}
            for line in lines[3:]:
                try:
                    doc["events"].append(json.loads(line.rstrip(",").rstrip("]")))
                except ValueError:
                    break
        self.meta = doc["meta"]
        self.summary = doc.get("summary", {})
        base = self.meta["clock"]["monotonic_ns"]
        # The recording starts at summary.start_ns after the clock's anchor (--exact: when its probes were in).
        self.start_ns = base + int(self.summary.get("start_ns", 0))
        self.end_ns = self.start_ns + int(self.summary.get("duration_ns", 0))
        self.threads = {}
        self.holds = {}
        self.waits = {}
        self.life = {}  # tid -> [first, last] ns: its T line to its E line
        self.state_se = {}  # tid -> the standard error (ns) of its time in each state, from its E lines
        for e in doc["events"]:
            k = e[0]
            if k == "E":
                self.life.setdefault(e[1], [base, base])[1] = base + e[2]
                if len(e) > 3:
                    self.state_se[e[1]] = (self.state_se.get(e[1], 0) ** 2 + e[3] ** 2) ** 0.5
            elif k == "H":
                self.holds.setdefault(e[1], []).append((base + e[2], base + e[2] + e[3]))
            elif k == "W":
                self.waits.setdefault(e[1], []).append((base + e[2], base + e[2] + e[3]))
            elif k == "T":
                self.threads[e[1]] = e[3]
                self.life.setdefault(e[1], [base + e[2], base + e[2]])

    def ci95_share(self, tid, S, E):
        """The half-width of the 95 % interval gilspy gives the thread's shares of the window [S, E], or None: its
        variance over its life, taken as spread evenly over it (the part inside the window, in proportion)."""
        se = self.state_se.get(tid)
        first, last = self.life.get(tid, (0, 0))
        inside = min(last, E) - max(first, S)
        if se is None or last <= first or inside <= 0:
            return None
        return 1.96 * (se * se * inside / (last - first)) ** 0.5 / (E - S)

    def first_seen_ns(self):
        return self.start_ns


def clip(intervals, S, E):
    """(ns inside [S, E], number of intervals overlapping it)."""
    total = n = 0
    for s, e in intervals:
        if e > S and s < E:
            n += 1
            total += min(e, E) - max(s, S)
    return total, n


def truth_steps(transitions):
    """Uprobe transitions [(ns, 'W'|'H'|'R')] -> step function [(ns, state)], the state before the first event
    inferred from it (a drop means it held, a take's return that it waited, a take's entry that it was free)."""
    if not transitions:
        return [(0, "R")]
    before = {"R": "H", "H": "W", "W": "R"}[transitions[0][1]]
    return [(0, before)] + list(transitions)


def gilspy_steps(holds, waits):
    """gilspy's H / W intervals of one thread -> step function [(ns, state)], 'R' outside them."""
    marks = [(s, e, "H") for s, e in holds] + [(s, e, "W") for s, e in waits]
    marks.sort()
    steps = [(0, "R")]
    for s, e, st in marks:
        steps.append((s, st))
        steps.append((e, "R"))
    return steps


def confusion(truth, measured, S, E):
    """Time (ns) inside [S, E] per (true state, measured state), both step functions [(ns, state)] sorted."""
    def state_at(steps, i, t):
        while i + 1 < len(steps) and steps[i + 1][0] <= t:
            i += 1
        return i
    points = sorted({S, E} | {t for t, _ in truth if S < t < E} | {t for t, _ in measured if S < t < E})
    out = {}
    i = j = 0
    for a, b in zip(points, points[1:]):
        i = state_at(truth, i, a)
        j = state_at(measured, j, a)
        key = (truth[i][1], measured[j][1])
        out[key] = out.get(key, 0) + (b - a)
    return out


def die(msg, code=1):
    print(msg, file=sys.stderr)
    sys.exit(code)
