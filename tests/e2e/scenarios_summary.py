"""Scenarios for what `gilspy record` prints at the end and for target text on the terminal: a summary that
scales to hundreds of threads, thread names that are terminal control sequences, child processes left out,
a launched program that outlives the recording."""
import os
import re
import subprocess
import sys
import tempfile
import time

from harness import Failure, Raw, Workload, check, run_gilspy, single_raw

CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")  # every C0 control but the newline, and DEL


def summary_rows(stdout):
    """(tid, name) of the thread table's rows: lines of a number or '-', then the name."""
    rows = []
    in_table = False
    for line in stdout.splitlines():
        if line.strip().startswith("TID "):
            in_table = True
            continue
        if in_table:
            m = re.match(r"^\s+(\d+|-)\s{2}(.*?)\s+\d+\.\d\s+\d+\.\d\s+\d+\s", line)
            if not m:
                in_table = False
                continue
            rows.append((m.group(1), m.group(2)))
    return rows


def scenario_summary_many_threads(gilspy, python):
    """300 threads, 3 busy: the summary fits a screen and names the busy ones first; --threads all lists all."""
    w = Workload(python, "many_threads.py", 60, 300, 3, timeout=60)
    try:
        busy = set(w.info["busy"])
        d = tempfile.mkdtemp(prefix="gilspy-sum-")
        out = run_gilspy(gilspy, "record", "-p", w.pid, "-d", 2, "-o", d, check_rc=0)
        # The threads part fits a screen; the Python stacks' part (top holders, wait sites) comes after it.
        lines = out.stdout.splitlines()
        stacks_at = next((i for i, l in enumerate(lines) if l.startswith("  Python stacks:")), len(lines))
        check(stacks_at <= 40, f"the summary takes {stacks_at} lines for 301 threads:\n{out.stdout}")
        cpu_at = next((i for i, l in enumerate(lines) if l.startswith("  what the CPU did")), len(lines))
        # (1 costs line, 2 tables of a title, a heading and at most 4 rows, and the [no stack sample] note)
        check(cpu_at - stacks_at <= 14, f"the stack part takes {cpu_at - stacks_at} lines:\n{out.stdout}")
        # The CPU table: the 3 busy threads (and at most 8), 4 lines each, a heading, a footnote.
        check(len(lines) - cpu_at <= 8 * 4 + 6, f"the CPU part takes {len(lines) - cpu_at} lines:\n{out.stdout}")
        cpu_tids = {int(m.group(1)) for m in (re.match(r"^\s+(\d+)\s{2}\S", l) for l in lines[cpu_at:]) if m}
        check(set(busy) <= cpu_tids, f"the CPU table leaves out a busy thread: {sorted(busy)} vs {sorted(cpu_tids)}")
        rows = summary_rows(out.stdout)
        # At most the 20 busiest; the idle threads (0.0 / 0.0) are only in the rest line, however many there are.
        check(3 <= len(rows) <= 20, f"{len(rows)} rows, expected the busy threads and at most 20:\n{out.stdout}")
        shares = re.findall(r"^\s+(?:\d+|-)\s{2}.*?\s(\d+\.\d)\s+\S+ m?u?s\s+(\d+\.\d)\s+\S+\s+\d+\s+\S+ ms\s+\S+ ms$",
                            out.stdout, re.M)
        check(len(shares) == len(rows) and not any(h == "0.0" and wt == "0.0" for h, wt in shares),
              f"a row of 0.0 / 0.0 among the busiest: {shares}\n{out.stdout}")
        top3 = {int(tid) for tid, _ in rows[:3] if tid != "-"}
        check(top3 == busy, f"the first rows are {rows[:3]}, expected the busy threads {sorted(busy)}")
        for tid, name in rows[:3]:
            check(re.search(r"\(busy-\d\)", name), f"busy thread {tid} is named {name!r}")
        raw = Raw(single_raw(d))
        threads = len(raw.summary["threads"])
        check(threads == 301, f"the raw summary has {threads} threads, expected 301")
        rest = re.search(r"\+ (\d+) more threads: (\d+\.\d) % hold, (\d+\.\d) % wait \(of their lifetimes", out.stdout)
        check(rest and int(rest.group(1)) == threads - len(rows), f"no or a wrong rest line:\n{out.stdout}")
        check(re.search(r"late polls: \d+ of \d+ wake-ups \(\d+\.\d %\), late = more than a fifth of a step "
                        r"after the deadline\n    lateness p99 ", out.stdout), f"no late-poll line:\n{out.stdout}")
        check(raw.summary["late_polls"] <= raw.summary["poll_loop_wakeups"], "more late polls than wake-ups")
        # What gilspy took itself, against its budget: the line and the raw summary say the same.
        cpu = re.search(r"gilspy's CPU: (\d+\.\d) % of a core while recording \(--cpu-budget 5 %", out.stdout)
        share = raw.summary.get("gilspy_cpu_share", 0)
        check(cpu and 0 < share < 1 and abs(float(cpu.group(1)) - 100 * share) < 0.051,
              f"gilspy's CPU: line {cpu and cpu.group(0)!r}, raw {share}")
        check(raw.summary.get("cpu_budget") == 0.05, f"cpu_budget {raw.summary.get('cpu_budget')}")
        check(0 <= raw.summary["p99_lateness_ns"] <= raw.summary["max_lateness_ns"] * 1.125 + 1,
              f"p99 {raw.summary['p99_lateness_ns']} above max {raw.summary['max_lateness_ns']}")

        d2 = tempfile.mkdtemp(prefix="gilspy-sum-")
        out = run_gilspy(gilspy, "record", "-p", w.pid, "-d", 1, "-o", d2, "--threads", "all", check_rc=0)
        rows = summary_rows(out.stdout)
        tids = {int(tid) for tid, _ in rows if tid != "-"}
        every = {t["tid"] for t in Raw(single_raw(d2)).summary["threads"]}
        check(len(rows) == len(every) and tids == every,
              f"--threads all printed {len(rows)} rows for {len(every)} threads")
        check("more threads" not in out.stdout, "--threads all still summed a rest")
        bad = run_gilspy(gilspy, "record", "-p", w.pid, "-d", 1, "--threads", "0")
        check(bad.returncode == 2 and bad.stderr.startswith("gilspy: error: --threads"), f"--threads 0: {bad.stderr!r}")
        print(f"summary: 301 threads in {len(lines)} lines, busy {sorted(busy)} first, rest line "
              f"'{rest.group(0)}'; --threads all: {len(every)} rows")
    finally:
        w.kill()


def check_no_control(text, what):
    m = CONTROL.search(text)
    if m:
        raise Failure(f"{what} holds a raw control character {m.group(0)!r}: {text!r}")


def scenario_hostile_names(gilspy, python):
    """A thread named ESC]0;pw BEL \\n ESC[2J: summary, info and errors print it escaped, never raw."""
    w = Workload(python, "hostile_names.py", 60)
    try:
        hostile = w.info["hostile"]
        d = tempfile.mkdtemp(prefix="gilspy-esc-")
        out = run_gilspy(gilspy, "record", "-p", w.pid, "-d", 1, "-o", d, check_rc=0)
        check_no_control(out.stdout + out.stderr, "record's output")
        # The table cuts names to its column: the start of the escaped names shows there, the Python name
        # first, then the OS name it set with prctl.
        check("h\\x1B[2J (\\x1B]0;pw\\x07" in out.stdout, f"the hostile names are not shown escaped:\n{out.stdout}")
        info = run_gilspy(gilspy, "info", "-p", w.pid, check_rc=0)
        check_no_control(info.stdout + info.stderr, "info's output")
        check(re.search(rf"^\s+{hostile}\s.*\\x1B\]0;pw\\x07\\x0A\\x1B\[2J", info.stdout, re.M),
              f"info does not show thread {hostile}'s name escaped:\n{info.stdout}")
        # A thread id is not a process id: named as such, with the process to give instead.
        as_pid = run_gilspy(gilspy, "info", "-p", hostile)
        check(as_pid.returncode == 2 and f"is a thread of process {w.pid}" in as_pid.stderr,
              f"info -p TID: {as_pid.returncode} {as_pid.stderr!r}")
        # A command that cannot run, named with control characters: the error line escapes it.
        bad = run_gilspy(gilspy, "record", "--", "\x1b[2J\x1b]0;pw\x07nope")
        check(bad.returncode == 2 and bad.stderr.count("\n") == 1, f"bad command: {bad.returncode} {bad.stderr!r}")
        check_no_control(bad.stderr, "the error line")
        check("\\x1B[2J" in bad.stderr, f"the command is not shown escaped: {bad.stderr!r}")
        print(f"hostile names: record, info, info -p TID and a bad command print no raw control character")
    finally:
        w.kill()


CHILD_PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
print("child", child.pid, flush=True)
time.sleep(float(sys.argv[1]))
child.kill()
"""


def scenario_launch_children(gilspy, python):
    """Launch mode, -d 1, a program that runs on for 4 s with a child Python process: the summary comes at the
    end of the recording (not at the program's exit), the child is named with the -p that records it, and the
    exit status is still the program's."""
    d = tempfile.mkdtemp(prefix="gilspy-kids-")
    start = time.monotonic()
    proc = subprocess.Popen([gilspy, "record", "-d", "1", "-o", d, "--", python, "-c", CHILD_PARENT, "4"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    summary_at = None
    stdout = []
    for line in proc.stdout:
        stdout.append(line)
        if line.startswith("gilspy: recorded pid") and summary_at is None:
            summary_at = time.monotonic() - start
    rc = proc.wait(timeout=60)
    ended_at = time.monotonic() - start
    stderr = proc.stderr.read()
    text = "".join(stdout)
    check(rc == 0, f"record exited {rc}, expected the program's 0: {stderr}")
    check(summary_at is not None, f"no summary:\n{text}")
    check(ended_at - summary_at >= 1.5,
          f"the summary came at {summary_at:.1f} s, only {ended_at - summary_at:.1f} s before the program ended")
    child = re.search(r"^child (\d+)$", text, re.M)
    check(child, f"the program's child pid is not in its output:\n{text}")
    pid = child.group(1)
    check(f"child Python process {pid} was not recorded; --subprocesses records children too (or 'gilspy record "
          f"-p {pid}' while it runs)" in stderr,
          f"the unrecorded child {pid} is not named: {stderr!r}")
    check(stderr.count("child Python process") == 1, f"said more than once: {stderr!r}")
    print(f"launch -d 1: summary at {summary_at:.1f} s, program ended at {ended_at:.1f} s; child {pid} named")


SCENARIOS = {
    "summary_many_threads": scenario_summary_many_threads,
    "hostile_names": scenario_hostile_names,
    "launch_children": scenario_launch_children,
}
