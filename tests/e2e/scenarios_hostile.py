"""Targets that attack gilspy through their own memory (issue 34). scripts/test.sh also runs them with the
ASan/UBSan build of gilspy (--gilspy build-asan/cli/gilspy), where any sanitizer report fails the run."""
import json
import os
import re
import subprocess
import tempfile
import time

from harness import (Raw, Workload, assert_no_overlapping_holds, check, check_trace, run_gilspy, single_raw)

SANITIZER_REPORT = re.compile(r"AddressSanitizer|LeakSanitizer|runtime error:")


def arm(gilspy, w, arm_file):
    """Gives the workload its GIL's address, read by gilspy info, and waits until it has corrupted it once."""
    info = json.loads(run_gilspy(gilspy, "info", "--json", "-p", w.pid, check_rc=0).stdout)
    with open(arm_file + ".tmp", "w") as f:
        f.write(info["gil_addr"])
    os.replace(arm_file + ".tmp", arm_file)
    deadline = time.monotonic() + 10
    while not os.path.exists(arm_file + ".armed"):
        check(time.monotonic() < deadline and w.proc.poll() is None, "the hostile workload never armed")
        time.sleep(0.01)


def scenario_hostile_gil(gilspy, python):
    """A target adding 2^62 to switch_number every 100 ms and forging last_holder every 5 ms while 3 CPU threads
    share the GIL: record ends normally, says the counter moved impossibly, counts no forged hand-off, and
    writes a raw file and a trace that gilspy reads back."""
    d = tempfile.mkdtemp(prefix="gilspy-hostile-")
    arm_file = os.path.join(d, "arm")
    w = Workload(python, "hostile_gil.py", 8, arm_file)
    try:
        arm(gilspy, w, arm_file)
        out = run_gilspy(gilspy, "record", "-p", w.pid, "-d", 2, "-o", os.path.join(d, "out"), "--json")
        check(not SANITIZER_REPORT.search(out.stderr), f"a sanitizer report:\n{out.stderr}")
        check(out.returncode == 0, f"record exited {out.returncode}: {out.stderr}")
        finished = json.loads(out.stdout.splitlines()[-1])
        summary = finished["targets"][0]["summary"]
        jumps = summary["impossible_switch_moves"]
        # 2 s at one jump per 100 ms (the target's sleeps stretch under load: at least 5 of the ~20).
        check(jumps >= 5, f"{jumps} impossible moves of switch_number said, for a jump every 100 ms over 2 s")
        # A real hand-off needs at least ~1 us here; the forged jumps alone would be 2^62 each, or (before
        # the fix) one per 50 ns of every poll gap they fell in.
        rate = summary["handoffs_total"] / max(summary["duration_ns"] / 1e9, 1e-9)
        check(rate < 1e6, f"{summary['handoffs_total']} hand-offs counted in {summary['duration_ns']} ns")
        raw_path = single_raw(os.path.join(d, "out"))
        raw = Raw(raw_path)
        assert_no_overlapping_holds(raw)
        held = sum(raw.thread(t)["hold_ns"] for t in w.info["cpu"]) / summary["duration_ns"]
        check(held > 0.6, f"the 3 CPU threads held the GIL {held:.0%} of the recording together")
        conv = run_gilspy(gilspy, "convert", "-i", raw_path, "-o", os.path.join(d, "again.json"))
        check(not SANITIZER_REPORT.search(conv.stderr), f"a sanitizer report in convert:\n{conv.stderr}")
        check(conv.returncode == 0, f"convert of the hostile recording exited {conv.returncode}: {conv.stderr}")
        check_trace(os.path.join(d, "again.json"), raw)
        print(f"hostile GIL: {jumps} impossible switch_number moves said and not counted, "
              f"{summary['handoffs_total']} hand-offs, CPU threads held {held:.0%}; raw and trace read back")
    finally:
        w.kill()


def record_measured(gilspy, *args):
    """Runs gilspy to its end: (completed process, wall seconds, peak RSS in MB from wait4)."""
    start = time.monotonic()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([gilspy, *map(str, args)], stdout=subprocess.PIPE, stderr=err, text=True)
        # Read stdout to its end without reaping the child, so that wait4 returns its own rusage.
        stdout = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        err.seek(0)
        stderr = err.read()
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), wall, usage.ru_maxrss / 1024


def scenario_hostile_tids(gilspy, python):
    """A target rewriting a thread's OS id in its PyThreadState every millisecond (3.11+; before, its pthread_t):
    every walk of the thread list finds a thread never seen before. Recording stays bounded (the issue measured 99 MB while recording, 922 MB
    for the summary and 47 s for -d 40 before): it ends within -d + 5 s, under 150 MB, and the files read back."""
    d = tempfile.mkdtemp(prefix="gilspy-forged-")
    duration = 4
    w = Workload(python, "forged_tids.py", duration + 20)
    try:
        out, wall, rss_mb = record_measured(gilspy, "record", "-p", w.pid, "-d", duration, "-o", d)
        check(not SANITIZER_REPORT.search(out.stderr), f"a sanitizer report:\n{out.stderr}")
        check(out.returncode == 0, f"record exited {out.returncode}: {out.stderr}")
        check(wall < duration + 5, f"record -d {duration} took {wall:.1f} s")
        sanitized = os.environ.get("GILSPY_E2E_SANITIZED") == "1"  # ASan's shadow memory is not gilspy's
        check(sanitized or rss_mb < 150, f"record's peak RSS was {rss_mb:.0f} MB")
        raw = Raw(single_raw(d))
        real = {w.info["main"], w.info["forger"], *w.info["cpu"]}
        forged = [t for t in raw.threads if t not in real]
        if w.info["forged_field"] == "native_thread_id":  # 3.11+
            check(len(forged) >= 20, f"only {len(forged)} forged thread ids were seen: the attack did not happen")
        else:
            # 3.8-3.10: the OS id is read from glibc's struct pthread, found through the thread's pthread_t. A
            # forged one points at nothing: that thread cannot be followed, but every other thread must be.
            check(not forged and {w.info["main"], *w.info["cpu"]} <= set(raw.threads),
                  f"forged pthread_t values: threads {sorted(raw.threads)} ({w.info})")
        assert_no_overlapping_holds(raw)
        held = sum(raw.thread(t)["hold_ns"] for t in w.info["cpu"]) / raw.summary["duration_ns"]
        check(held > 0.6, f"the 2 CPU threads held the GIL {held:.0%} of the recording together")
        print(f"forged {w.info['forged_field']}: {len(forged)} forged threads seen, record took {wall:.1f} s for -d {duration}, "
              f"peak RSS {rss_mb:.0f} MB{' (sanitized: not checked)' if sanitized else ''}; raw reads back")
    finally:
        w.kill()


SCENARIOS = {
    "hostile_gil": scenario_hostile_gil,
    "hostile_tids": scenario_hostile_tids,
}
