"""Helpers for gilspy's end-to-end tests: finding interpreters, starting workloads, running gilspy, and reading
its raw files back.

Interpreters: pyenv's (root from $GILSPY_PYENV_ROOT, else `pyenv root`, else ~/.pyenv) for 3.8 to 3.13, and
Debian's own python3.11 ($GILSPY_DEBIAN_PYTHON, default /usr/bin/python3.11). A missing one makes the test exit
77 (ctest: skipped) with its name, except under CI=true, where it is a failure.
"""
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = os.path.join(os.path.dirname(HERE), "workloads")
SKIP = 77


class Failure(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Failure(message)


def pyenv_root():
    root = os.environ.get("GILSPY_PYENV_ROOT")
    if root:
        return root
    try:
        out = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=20)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return os.path.expanduser("~/.pyenv")


DEBIAN_UNSTABLE_MINORS = ("3.14", "3.15")


def debian_unstable_root():
    """Where scripts/fetch_debian_pythons.sh puts Debian unstable's interpreters (same default)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("GILSPY_DEBIAN_PYTHONS") or os.path.join(cache, "gilspy", "debian-unstable")


def find_interpreter(name):
    """'pyenv-3.11' -> path of that pyenv version's python3.11; 'debian-3.11' -> Debian's. None if absent."""
    kind, _, minor = name.partition("-")
    if kind == "debian" and minor in DEBIAN_UNSTABLE_MINORS:
        # Fetched (with their own glibc) by scripts/fetch_debian_pythons.sh, which scripts/test.sh runs.
        path = os.path.join(debian_unstable_root(), "root", "usr", "bin", "python" + minor)
        return path if os.access(path, os.X_OK) else None, path + " (scripts/fetch_debian_pythons.sh)"
    if kind == "debian":
        path = os.environ.get("GILSPY_DEBIAN_PYTHON", "/usr/bin/python" + minor)
        return path if os.access(path, os.X_OK) else None, path
    root = pyenv_root()
    pattern = os.path.join(root, "versions", minor + ".*", "bin", "python" + minor)
    matches = sorted(p for p in glob.glob(pattern) if os.access(p, os.X_OK))
    return (matches[-1] if matches else None), pattern


def skip_missing(name, looked_at):
    msg = f"SKIPPED: interpreter {name} not found (looked for {looked_at})"
    print(msg)
    if os.environ.get("CI") == "true":
        print(f"FAIL: CI must skip no interpreter, and {name} is missing")
        sys.exit(1)
    sys.exit(SKIP)


class Workload:
    """A workload script started directly (for -p tests); waits for its readiness line on a FIFO."""

    def __init__(self, python, script, *args, timeout=30, env=None, launcher=None):
        self.dir = tempfile.mkdtemp(prefix="gilspy-e2e-")
        self.ready_path = os.path.join(self.dir, "ready")
        self.report_path = os.path.join(self.dir, "report.json")
        os.mkfifo(self.ready_path)
        env = dict(os.environ, GILSPY_TEST_READY=self.ready_path, GILSPY_TEST_REPORT=self.report_path,
                   PYTHONPATH=WORKLOADS, **(env or {}))
        # launcher(argv) -> argv: runs the workload through something (a new PID namespace); then the Python
        # process is the launcher's child (see python_pid).
        argv = [python, os.path.join(WORKLOADS, script), *map(str, args)]
        self.proc = subprocess.Popen(launcher(argv) if launcher else argv, env=env)
        self.launched = launcher is not None
        try:
            self.info = self._wait_ready(timeout)
        except BaseException:
            self.kill()  # the caller's finally never runs: the object was not made
            raise

    def _wait_ready(self, timeout):
        # Opening a FIFO for reading blocks until the writer opens it: do it without blocking, then poll.
        fd = os.open(self.ready_path, os.O_RDONLY | os.O_NONBLOCK)
        deadline = time.monotonic() + timeout
        data = b""
        try:
            while b"\n" not in data:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise Failure(f"workload did not become ready (exit status {self.proc.poll()})")
                try:
                    chunk = os.read(fd, 4096)
                except BlockingIOError:
                    chunk = b""
                data += chunk
                if not chunk:
                    time.sleep(0.01)
        finally:
            os.close(fd)
        return json.loads(data.decode())

    @property
    def pid(self):
        if not self.launched:
            return self.proc.pid
        with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
            children = f.read().split()
        check(len(children) == 1, f"launcher {self.proc.pid} has children {children}, expected one")
        return int(children[0])

    def report(self):
        with open(self.report_path) as f:
            return json.load(f)

    def wait(self, timeout=60):
        return self.proc.wait(timeout)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def run_gilspy(gilspy, *args, timeout=120, env=None, check_rc=None):
    out = subprocess.run([gilspy, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                         env=dict(os.environ, **(env or {})))
    if check_rc is not None and out.returncode != check_rc:
        raise Failure(f"gilspy {' '.join(map(str, args))} exited {out.returncode} (expected {check_rc}):\n"
                      f"stdout: {out.stdout}\nstderr: {out.stderr}")
    return out


def workload_env(report_path=None):
    env = {"PYTHONPATH": WORKLOADS}
    if report_path:
        env["GILSPY_TEST_REPORT"] = report_path
    return env


class Raw:
    """A raw recording read back: meta, records by kind, summary."""

    def __init__(self, path):
        with open(path) as f:
            self.doc = json.load(f)
        check(self.doc.get("format") == "gilspy-raw", f"{path}: not a gilspy raw file")
        self.meta = self.doc["meta"]
        self.events = self.doc["events"]
        self.summary = self.doc["summary"]
        self.threads = {e[1]: e[3] for e in self.events if e[0] == "T"}
        self.holds = [(e[1], e[2], e[2] + e[3]) for e in self.events if e[0] == "H"]
        self.waits = [(e[1], e[2], e[2] + e[3]) for e in self.events if e[0] == "W"]
        self.ends = {}
        for e in self.events:
            if e[0] == "E":
                self.ends[e[1]] = e[2]

    def thread(self, tid):
        for t in self.summary["threads"]:
            if t["tid"] == tid:
                return t
        raise Failure(f"thread {tid} is not in the summary (threads: {[t['tid'] for t in self.summary['threads']]})")

    def to_monotonic(self, ts):
        return self.meta["clock"]["monotonic_ns"] + ts


def cpu_time_in_window(marks, start_ns, end_ns):
    """CPU time (ns) a workload thread spent between two CLOCK_MONOTONIC instants, from its [mono, cpu, n]
    marks (common.spin_until: about every 10 ms), interpolated between marks."""
    def cpu_at(t):
        if t <= marks[0][0]:
            return marks[0][1]
        for (t0, c0, _), (t1, c1, _) in zip(marks, marks[1:]):
            if t <= t1:
                return c0 + (c1 - c0) * (t - t0) / max(1, t1 - t0)
        return marks[-1][1]
    return cpu_at(end_ns) - cpu_at(start_ns)


def single_raw(directory):
    files = glob.glob(os.path.join(directory, "GIL_*_rank_*.json"))
    files = [f for f in files if not f.endswith(".trace.json")]
    check(len(files) == 1, f"expected one raw file in {directory}, found {files}")
    return files[0]


def assert_no_overlapping_holds(raw, slack_ns=0):
    holds = sorted(raw.holds, key=lambda h: h[1])
    for a, b in zip(holds, holds[1:]):
        check(b[1] >= a[2] - slack_ns,
              f"holds overlap: thread {a[0]} [{a[1]}, {a[2]}] and thread {b[0]} [{b[1]}, {b[2]}]")


def assert_lanes_do_not_overlap(raw):
    by_tid = {}
    for kind, items in (("hold", raw.holds), ("wait", raw.waits)):
        for tid, s, e in items:
            by_tid.setdefault(tid, []).append((s, e, kind))
    for tid, items in by_tid.items():
        items.sort()
        for a, b in zip(items, items[1:]):
            check(b[0] >= a[1], f"thread {tid}: {a[2]} [{a[0]}, {a[1]}] overlaps {b[2]} [{b[0]}, {b[1]}]")


# The shared structural checker (tests/support/trace_check.hpp), built as gilspy_trace_check: set by main()
# from --trace-check, else found beside the gilspy binary's build tree.
TRACE_CHECKER = None


def trace_checker(gilspy=None):
    if TRACE_CHECKER:
        return TRACE_CHECKER
    guess = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(gilspy or "."))), "tests",
                         "gilspy_trace_check")
    check(os.access(guess, os.X_OK), f"no gilspy_trace_check (pass --trace-check; looked at {guess})")
    return guess


def run_trace_checker(*paths):
    """Every trace a test produces goes through the shared C++ checker: lanes ordered in double arithmetic,
    as the JavaScript viewers add ts + dur, and only the event kinds every viewer reads."""
    out = subprocess.run([trace_checker(), *paths], capture_output=True, text=True, timeout=120)
    check(out.returncode == 0, f"gilspy_trace_check {' '.join(paths)} exited {out.returncode}:\n{out.stdout}{out.stderr}")


def check_trace(path, raw):
    """Structural checks of a Chrome trace written by gilspy. `raw`: the Raw it came from, a list of them (a
    merged trace), or None (a recording cut short, which Raw cannot read)."""
    run_trace_checker(path)
    with open(path) as f:
        text = f.read()
    doc = json.loads(text)
    check(isinstance(doc, dict) and list(doc.keys())[0] == "traceEvents", "trace: traceEvents must come first")
    events = doc["traceEvents"]
    check(all(e["ph"] in ("X", "I", "C", "M") for e in events), "trace: only X, I, C and M events allowed")
    named = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    lanes = {}
    for e in events:
        # gc slices lie inside the collector's hold_gil (scenarios_gc.py checks that) and Python frames (cat
        # "stack") inside their hold_gil / take_gil slice (the checker above checks both); the rest never overlap.
        if e["ph"] == "X" and not (e["name"] == "gc" and e["tid"] != 4194305) and e.get("cat") != "stack":
            lanes.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    for lane, items in lanes.items():
        check(lane in named, f"trace: lane {lane} has no thread_name")
        items.sort()
        for a, b in zip(items, items[1:]):
            check(b[0] >= a[1], f"trace: slices overlap on lane {lane}: {a} and {b}")
    if raw is not None:
        raws = raw if isinstance(raw, list) else [raw]
        expected = sum(len(r.holds) for r in raws)
        holds = sum(1 for e in events if e["ph"] == "X" and e["name"] == "hold_gil")
        check(holds == expected, f"trace: {holds} hold_gil slices for {expected} holds in the raw file(s)")
    return doc


def main(scenarios):
    """run_e2e.py SCENARIO INTERPRETER --gilspy PATH"""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=sorted(scenarios))
    parser.add_argument("interpreter")
    parser.add_argument("--gilspy", required=True)
    parser.add_argument("--trace-check", help="the gilspy_trace_check executable (default: beside gilspy's build)")
    parser.add_argument("--repeat", type=int, default=1, help="run the scenario this many times (flake hunting)")
    args = parser.parse_args()
    global TRACE_CHECKER
    try:
        TRACE_CHECKER = args.trace_check or trace_checker(args.gilspy)
    except Failure as e:
        print(f"FAIL [{args.scenario} {args.interpreter}]: {e}")
        sys.exit(1)
    python = None
    if args.interpreter != "none":
        python, looked_at = find_interpreter(args.interpreter)
        if python is None:
            skip_missing(args.interpreter, looked_at)
    for i in range(args.repeat):
        try:
            scenarios[args.scenario](args.gilspy, python)
        except Failure as e:
            print(f"FAIL [{args.scenario} {args.interpreter}, run {i + 1}]: {e}")
            sys.exit(1)
    print(f"PASS [{args.scenario} {args.interpreter}]")
