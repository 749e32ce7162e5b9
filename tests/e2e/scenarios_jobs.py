"""Scenarios for whole jobs: `record` with no -p finds every Python process (also those that start while it
runs, unless --no-follow), and --subprocesses follows a target's children (multiprocessing workers)."""
import glob
import json
import os
import subprocess
import tempfile
import time

from harness import WORKLOADS, Failure, Raw, Workload, check, check_trace, find_interpreter, run_gilspy, workload_env


def raw_files(directory):
    return {int(os.path.basename(f).split("_")[1]): f for f in glob.glob(os.path.join(directory, "GIL_*_rank_*.json"))
            if not f.endswith(".trace.json")}


def check_cpu_threads_share(raw, cpu_tids, who):
    """Two CPU-bound threads of one process: both hold and both wait (a hand-off every 5 ms)."""
    for tid in cpu_tids:
        t = raw.thread(tid)
        check(t["hold_share"] > 0.15 and t["wait_share"] > 0.15,
              f"{who}: CPU thread {tid} held {t['hold_share']:.1%} and waited {t['wait_share']:.1%}, expected both > 15 %")
    # One of them always wants the GIL, so while both live one of them holds it nearly all the time (also while
    # the OS preempts the holder on a loaded machine); the process may have lived only part of the recording.
    threads = [raw.thread(tid) for tid in cpu_tids]
    span = min(t["last_ns"] for t in threads) - max(t["first_ns"] for t in threads)
    held = sum(t["hold_ns"] for t in threads)
    check(span > 0.5e9 and held > 0.8 * span,
          f"{who}: the CPU threads held the GIL {held / 1e6:.0f} ms of the {span / 1e6:.0f} ms they both lived")


def scenario_record_all(gilspy, python):
    """No -p, no program: the Python processes running at the start (this interpreter and another version) and
    those that start while it records, one file each; --no-follow leaves out the later ones."""
    other, _ = find_interpreter("pyenv-3.11" if "3.11" not in python else "pyenv-3.12")
    second = other or python
    before = [Workload(python, "cpu_threads.py", 30, 2), Workload(second, "cpu_threads.py", 30, 2)]
    late = []
    try:
        d = tempfile.mkdtemp(prefix="gilspy-rec-")
        p = subprocess.Popen([gilspy, "record", "-d", "4", "-o", d, "--no-status", "-q"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        late = [Workload(second, "cpu_threads.py", 30, 2), Workload(python, "cpu_threads.py", 30, 2)]
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0, f"exit {p.returncode}; stderr {err!r}")
        for w in before:
            check(f"pid {w.pid} " in err, f"the list printed first does not name pid {w.pid}: {err!r}")
        for w in late:
            check(f"recording pid {w.pid} too" in err, f"pid {w.pid}, started during the recording, was not said: {err!r}")
        files = raw_files(d)
        for w in before + late:
            check(w.pid in files, f"no file for pid {w.pid}: {sorted(files)}")
            raw = Raw(files[w.pid])
            check_cpu_threads_share(raw, w.info["cpu"], f"pid {w.pid}")
            check_trace(files[w.pid].replace(".json", ".trace.json"), raw)
        gilspy_pid = p.pid
        check(gilspy_pid not in files, "gilspy recorded itself")
        for w in late:
            raw = Raw(raw_files(d)[w.pid])
            first = min(e[2] for e in raw.events if e[0] == "T")
            check(first >= 0.8e9, f"pid {w.pid} started 1 s in but its threads appear at {first / 1e9:.2f} s")
        # --no-follow: only those running at the start.
        d2 = tempfile.mkdtemp(prefix="gilspy-rec-")
        p = subprocess.Popen([gilspy, "record", "-d", "2", "-o", d2, "--no-status", "-q", "--no-follow"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        later = Workload(python, "cpu_threads.py", 30, 2)
        late.append(later)
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0, f"--no-follow: exit {p.returncode}; stderr {err!r}")
        files = raw_files(d2)
        check(all(w.pid in files for w in before), f"--no-follow: missing {[w.pid for w in before]} in {sorted(files)}")
        check(later.pid not in files, f"--no-follow recorded pid {later.pid}, which started later")
    finally:
        for w in before + late:
            w.kill()


def scenario_subprocesses(gilspy, python):
    """--subprocesses in launch mode: a parent that starts two multiprocessing workers after 0.8 s; a file for
    the parent and for each worker, the workers' two CPU threads sharing the GIL."""
    d = tempfile.mkdtemp(prefix="gilspy-rec-")
    report = os.path.join(d, "report.json")
    out = run_gilspy(gilspy, "record", "--subprocesses", "-o", d, "--no-status", "-q", "--", python,
                     os.path.join(WORKLOADS, "mp_workers.py"), 0.8, 2, 2.5, env=workload_env(report), check_rc=0)
    info = json.load(open(report))
    files = raw_files(d)
    check(info["pid"] in files, f"no file for the parent {info['pid']}: {sorted(files)}")
    for pid in info["workers"]:
        check(pid in files, f"no file for worker {pid}: {sorted(files)}; stderr {out.stderr!r}")
        check(f"recording pid {pid} too" in out.stderr, f"worker {pid} was not said: {out.stderr!r}")
        raw = Raw(files[pid])
        cpu = [t["tid"] for t in raw.summary["threads"] if t["tid"] != pid and t["holds"] > 10]
        check(len(cpu) == 2, f"worker {pid}: expected its 2 CPU threads to hold the GIL, got {raw.summary['threads']}")
        check_cpu_threads_share(raw, cpu, f"worker {pid}")
        check_trace(files[pid].replace(".json", ".trace.json"), raw)


def scenario_discover_bad_input(gilspy, python):
    """Flags that do not fit the targets: one line, exit 2; a dead pid among found ones is not an error."""
    for args, words in ((["--subprocesses"], "--subprocesses follows the children"),
                        (["-p", str(os.getpid()), "--no-follow"], "--no-follow is for recording every"),
                        (["-p", str(os.getpid()), "--accelerator"], "--accelerator chooses among")):
        out = run_gilspy(gilspy, "record", "-d", "1", *args)
        check(out.returncode == 2 and words in out.stderr and out.stderr.strip().count("\n") == 0,
              f"record {' '.join(args)}: exit {out.returncode}, stderr {out.stderr!r}")
    # --accelerator with no process holding a device: nothing to record; with --no-follow that is an error.
    out = run_gilspy(gilspy, "record", "-d", "1", "--accelerator", "--no-follow", "-o", tempfile.mkdtemp())
    check(out.returncode == 1 and "no Python process with an accelerator device open" in out.stderr,
          f"--accelerator --no-follow with no device holder: exit {out.returncode}, stderr {out.stderr!r}")


SCENARIOS = {
    "record_all": scenario_record_all,
    "subprocesses": scenario_subprocesses,
    "discover_bad_input": scenario_discover_bad_input,
}
