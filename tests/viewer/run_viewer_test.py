"""The real-viewer test: record CPU-bound threads with thousands of GIL hand-offs through the gilspy binary,
convert (each process alone and both merged), and load every trace into the DevTools trace engine
(check_trace_engine.mjs; npm @paulirish/trace_engine, pinned in package.json and installed by
scripts/setup.sh with `npm ci`). Every hold_gil / take_gil slice, drop_gil mark and gil_waiters slice of a file
must be among the entries the engine puts on its track; every trace also passes gilspy_trace_check. A third
recording, of examples/gc_training_loop.py, adds gc slices nested in hold_gil, the GC lane and its instants.

usage: run_viewer_test.py INTERPRETER --gilspy PATH --trace-check PATH

Exit 77 (ctest: skipped), with the reason, when node or the installed package is missing, or the interpreter;
under CI=true each of these is a failure instead.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
import harness  # noqa: E402
from harness import Failure, Raw, Workload, check, run_gilspy  # noqa: E402

SECONDS = 2
# A tenth of Python's default switch interval: on an idle machine ~4000 forced hand-offs a second, thousands in
# SECONDS; a busy one (other jobs on few CPUs) gives the threads less CPU and fewer. A one-ulp overshoot hits
# 1.6-5 % of adjacent pairs, so a few hundred holds already show the bug.
SWITCH_INTERVAL_S = 0.0005
MIN_HOLDS = 200  # per process: below this the machine was too busy for the test to mean much


def skip(reason):
    print(f"SKIPPED: {reason}")
    if os.environ.get("CI") == "true":
        print("FAIL: under CI=true the viewer test must run, not skip")
        sys.exit(1)
    sys.exit(harness.SKIP)


def node_or_skip():
    node = shutil.which("node")
    if node is None:
        skip("node not found on PATH (scripts/setup.sh installs nodejs and npm)")
    if not os.path.isdir(os.path.join(HERE, "node_modules", "@paulirish", "trace_engine")):
        skip(f"@paulirish/trace_engine is not installed in {HERE}/node_modules "
             "(scripts/setup.sh runs `npm ci` there)")
    return node


def load_in_devtools(node, paths):
    out = subprocess.run([node, os.path.join(HERE, "check_trace_engine.mjs"), *paths], capture_output=True,
                         text=True, timeout=300)
    print(out.stdout, end="")
    check(out.returncode == 0, f"the DevTools trace engine left events out (exit {out.returncode}):\n"
                               f"{out.stdout}{out.stderr}")
    return out.stdout


def record_gc(gilspy, python, d):
    """The bundled GC example: gc slices nested in hold_gil on the main thread's lane, a GC lane with
    instants, a waiting data-loader thread. Its trace must be drawn whole too."""
    out_dir = os.path.join(d, "gc")
    os.mkdir(out_dir)
    example = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "gc_training_loop.py")
    run_gilspy(gilspy, "record", "-q", "-o", out_dir, "--", python, example, "--steps", 12, check_rc=0)
    raw_path = harness.single_raw(out_dir)
    raw = Raw(raw_path)
    timed = sum(1 for e in raw.events if e[0] == "G" and e[9] >= 0)
    check(timed > 0, "the GC example's recording has no collection on a thread's lane")
    trace = raw_path.replace(".json", ".trace.json")
    harness.check_trace(trace, raw)
    return trace


def record(gilspy, python, d, threads, rank):
    """One process at a time, so that its threads have the machine's CPUs to themselves."""
    w = Workload(python, "cpu_threads.py", 30, threads, SWITCH_INTERVAL_S, env={"RANK": str(rank)})
    try:
        # --cpu-budget 0: poll around every hand-off, so that most of them become slices
        run_gilspy(gilspy, "record", "-q", "--no-trace", "--cpu-budget", 0, "-p", w.pid, "-d", SECONDS, "-o", d,
                   check_rc=0)
    finally:
        w.kill()
    path = os.path.join(d, f"GIL_{w.pid}_rank_{rank}.json")
    check(os.path.exists(path), f"no {os.path.basename(path)} in {sorted(os.listdir(d))}")
    raw = Raw(path)
    holds = len(raw.holds)
    print(f"pid {w.pid}: {holds} holds, {raw.summary['handoffs_total']} hand-offs in the interpreter")
    check(holds >= MIN_HOLDS, f"pid {w.pid}: only {holds} holds recorded in {SECONDS} s; too few to judge "
                              "(a machine too busy?)")
    return path, raw


def scenario(gilspy, python, node):
    d = tempfile.mkdtemp(prefix="gilspy-viewer-")
    # Two recordings one after the other: the merged trace has two processes on clocks seconds apart.
    raws = dict(record(gilspy, python, d, threads, rank) for threads, rank in ((3, 0), (4, 1)))
    traces = []
    for path, raw in raws.items():
        out = path.replace(".json", ".trace.json")
        run_gilspy(gilspy, "convert", "-i", path, "-o", out, check_rc=0)
        harness.check_trace(out, raw)
        traces.append(out)
    merged = os.path.join(d, "merged.trace.json")
    run_gilspy(gilspy, "convert", *[x for p in raws for x in ("-i", p)], "-o", merged, check_rc=0)
    harness.check_trace(merged, list(raws.values()))
    traces.append(merged)
    gc_trace = record_gc(gilspy, python, d)
    traces.append(gc_trace)
    shown = load_in_devtools(node, traces)
    gc_line = [line for line in shown.splitlines() if line.startswith(gc_trace)]
    check(gc_line and "gc (X)" in gc_line[0], f"the DevTools trace engine saw no gc slices in {gc_trace}: {gc_line}")
    shutil.rmtree(d, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("interpreter")
    parser.add_argument("--gilspy", required=True)
    parser.add_argument("--trace-check", required=True)
    args = parser.parse_args()
    harness.TRACE_CHECKER = args.trace_check
    node = node_or_skip()
    python, looked_at = harness.find_interpreter(args.interpreter)
    if python is None:
        harness.skip_missing(args.interpreter, looked_at)
    try:
        scenario(args.gilspy, python, node)
    except Failure as e:
        print(f"FAIL [viewer {args.interpreter}]: {e}")
        sys.exit(1)
    print(f"PASS [viewer {args.interpreter}]")


if __name__ == "__main__":
    main()
