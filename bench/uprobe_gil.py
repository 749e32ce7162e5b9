#!/usr/bin/env python3
"""Ground truth for gilspy: who holds and who waits for the GIL, from uprobes on CPython's own functions.

bpftrace attaches to the target's libpython (or static executable):
  uprobe    take_gil   the thread starts waiting (it is inside take_gil)
  uretprobe take_gil   the thread holds the GIL
  uprobe    drop_gil   the thread releases it
(3.8 also has a `take_gil.constprop.N` clone that takes most calls: every take_gil* / drop_gil* symbol in
.symtab is probed.) Every probe is filtered on `pid == TARGET`: bpftrace 0.17 does not scope file uprobes to -p.

Nothing is printed per event: the kernel keeps, per thread, the hold and wait nanoseconds and counts clipped
to a window [S, E] of CLOCK_MONOTONIC ns (bpftrace's `nsecs` is the same clock), and bpftrace prints the maps
when it exits. Intervals still open at exit are closed at E here, in Python, from the start times left in the
maps. A hold or wait that began before bpftrace attached counts from the attach time (so choose S after it).

usage: uprobe_gil.py -p PID [-d SECONDS] [--lead SECONDS] [--json] [--gil-addr ADDR]
  traces PID for SECONDS starting LEAD seconds after bpftrace has attached (attaching takes 0.5-3 s on a
  busy machine) and prints per thread hold / wait shares over that window.

Where uprobes cannot work (bpftrace missing, no permission, no take_gil/drop_gil symbols, e.g. Debian's
stripped /usr/bin/python3.11) the tracer raises Unavailable with the reason; callers say so and skip.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

SHORT_HOLD_NS = 100_000  # holds shorter than this are also counted apart: a 10 kHz poll cannot see them
LONG_WAIT_NS = 100_000   # waits at least this long are counted apart: the ones a 10 kHz poll can see


class Unavailable(Exception):
    """Uprobes cannot trace this target here (the message says why)."""


def monotonic_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def python_library(pid):
    """The file holding the interpreter of process `pid`: its libpython if it maps one, else its executable."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and re.search(r"/libpython3\.\d+[a-z]*\.so", parts[5]):
                    return parts[5]
        return os.path.realpath(f"/proc/{pid}/exe")
    except OSError as e:
        raise Unavailable(f"cannot read /proc/{pid}: {e}")


def gil_symbols(lib):
    """(take_gil symbols, drop_gil symbols) in the file's .symtab/.dynsym; Unavailable if there are none."""
    if not shutil.which("nm"):
        raise Unavailable("nm (binutils) is not installed: cannot look up take_gil/drop_gil")
    names = set()
    for extra in ([], ["-D"]):
        out = subprocess.run(["nm", *extra, lib], capture_output=True, text=True)
        for line in out.stdout.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "tT" and re.fullmatch(r"(take|drop)_gil(\..+)?", parts[2]):
                names.add(parts[2])
    takes = sorted(n for n in names if n.startswith("take_gil"))
    drops = sorted(n for n in names if n.startswith("drop_gil"))
    if not takes or not drops:
        raise Unavailable(f"{lib} has no take_gil/drop_gil symbols (stripped binary?): uprobes cannot see its GIL")
    return takes, drops


def libc_cond_signal(pid):
    """(libc path, file address of its default pthread_cond_signal) as mapped by process `pid`."""
    libc = None
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and re.search(r"/libc(-[\d.]+)?\.so(\.6)?$", parts[5]):
                libc = parts[5]
                break
    if not libc:
        raise Unavailable(f"process {pid} maps no libc.so: cannot probe pthread_cond_signal")
    out = subprocess.run(["nm", "-D", libc], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        parts = line.split()
        # The default version (@@) is the one programs link against; the old @GLIBC_2.2.5 one is elsewhere.
        if len(parts) == 3 and parts[2].startswith("pthread_cond_signal@@"):
            return libc, int(parts[0], 16)
    raise Unavailable(f"{libc} has no pthread_cond_signal in .dynsym")


def probe_specs(kind, lib, names):
    # A name like take_gil.constprop.0 does not parse in a bpftrace probe; a wildcard that matches exactly
    # the symbols found does (they all start with take_gil / drop_gil and nothing else does).
    base = names[0].split(".")[0]
    if len(names) == 1 and names[0] == base:
        return f"{kind}:{lib}:{base}"
    return f"{kind}:{lib}:{base}*"


def program(pid, lib, takes, drops, lead_ns, window_ns, tail_ns, events=False, lockword=None, cost_probe=None):
    """The bpftrace script. The window starts lead_ns after every probe is attached (BEGIN) and lasts
    window_ns; bpftrace exits tail_ns after it ends. BEGIN prints the attach time, so the caller knows
    S = attach + lead_ns exactly, and can start the tool it compares after seeing it.

    lockword=(libc, pthread_cond_signal address, gil address): time the hold by the lock word instead of the
    function boundaries. take_gil signals gil->switch_cond right after storing locked = 1, drop_gil signals
    gil->cond right after storing locked = 0 (CPython 3.8-3.13, FORCE_SWITCHING, always on POSIX); a uprobe
    on pthread_cond_signal filtered on those two addresses marks both moments. take_gil's entry still starts
    the wait. This is what a reader of the GIL struct (gilspy) can see: drop_gil can block on gil->mutex
    for milliseconds after its entry on a loaded machine while the GIL stays locked, and the uretprobe's
    own ~1 µs lands after locked = 1.

    cost_probe=(libc, pthread_cond_signal address, gil address), with the function boundaries as truth: also
    measure what the probes' own handlers add to each hold as a reader of the lock word sees it. take_gil stores
    locked = 1 (and signals switch_cond) before it returns into the uretprobe's trap, and drop_gil's entry
    handler runs on after its timestamp before drop_gil stores locked = 0 (and signals cond). Maps
    @take_after_lock / @takes_lock and @drop_before_unlock / @drops_lock: the sums of those spans and their
    counts, with the very handlers the measurement runs (compare.py calibrates on a lone thread)."""
    take_entry = probe_specs("uprobe", lib, takes)
    take_ret = probe_specs("uretprobe", lib, takes)
    drop_entry = probe_specs("uprobe", lib, drops)
    P = int(pid)
    start_hold = """
  $S = @S; $E = @E;
  $s = @ws[tid];
  // No start: the wait began before we attached (count it from then), or, for a thread seen since, an
  // event was lost: count that and leave the interval out. Every probe counts only from BEGIN (@X is 0 before:
  // bpftrace attaches the probes one by one, and a thread's drop_gil seen before its next take_gil's entry was
  // probed made a starved thread's wait "lost") to @X, when bpftrace exits (probes that fired while it printed
  // its maps moved an open wait out of @ws after @wait_ns was printed: lost from both, seen 4-22 pp).
  if ($s == 0) {{ if (@seen[tid]) {{ $s = $now; if ($now >= $S && $now < $E) {{ @wait_lost_start = count(); }} }} else {{ $s = @t0; @wait_unknown_start = count(); }} }}
  delete(@ws[tid]);
  $a = $s; if ($a < $S) {{ $a = $S; }}
  $b = $now; if ($b > $E) {{ $b = $E; }}
  if ($b > $a) {{ @wait_ns[tid] = sum($b - $a); }}
  if ($now > $S && $s < $E) {{
    @wait_n[tid] = count();
    if ($now - $s >= {LONG_WAIT_NS}) {{ @wait_long_n[tid] = count(); }}
    if (@last != tid) {{ @switches = count(); }}
  }}
  @last = tid;
  if (@hs[tid] && $now >= @S && $now < @E) {{ @hold_lost_end = count(); }}
  @hs[tid] = $now; @seen[tid] = 1; {ev_hold}
"""
    end_hold = """
  $S = @S; $E = @E;
  $s = @hs[tid];
  if ($s == 0) {{ if (@seen[tid]) {{ $s = $now; if ($now >= $S && $now < $E) {{ @hold_lost_start = count(); }} }} else {{ $s = @t0; @hold_unknown_start = count(); }} }}
  delete(@hs[tid]);
  $a = $s; if ($a < $S) {{ $a = $S; }}
  $b = $now; if ($b > $E) {{ $b = $E; }}
  if ($b > $a) {{ @hold_ns[tid] = sum($b - $a); }}
  if ($now > $S && $s < $E) {{
    @hold_n[tid] = count();
    if ($now - $s < {SHORT_HOLD_NS}) {{
      @hold_short_n[tid] = count();
      if ($b > $a) {{ @hold_short_ns[tid] = sum($b - $a); }}
    }}
  }}
  if ($now >= $S && $now < $E) {{ @drops_in_window = count(); }}
  @seen[tid] = 1;
"""
    # events=True also prints every transition (for compare.py --confusion): ~8 µs per event in the target,
    # far more than the aggregation alone, so never on the release-heavy workloads when measuring anything else.
    ev_take = 'printf("T %d %lld\\n", tid, $now);' if events else ""
    ev_hold = 'printf("H %d %lld\\n", tid, $now);' if events else ""
    ev_drop = 'printf("D %d %lld\\n", tid, $now);' if events else ""
    fill = dict(LONG_WAIT_NS=LONG_WAIT_NS, SHORT_HOLD_NS=SHORT_HOLD_NS, ev_hold=ev_hold)
    start_hold = start_hold.format(**fill).replace("{{", "{").replace("}}", "}")
    end_hold = end_hold.format(**fill).replace("{{", "{").replace("}}", "}")
    if lockword:
        libc, sig_addr, gil = lockword
        cond, switch_cond = gil + 32, gil + 120
        ret_body, drop_body, ev_drop_fn = "", "", ""
        # One probe block: bpftrace 0.17 attaches only one of two blocks that name the same address.
        lock_probe = (f"uprobe:{libc}:{hex(sig_addr)} /pid == {P} && nsecs < @X && (arg0 == {switch_cond} || arg0 == {cond})/ {{\n"
                      f"  $now = nsecs;\n  if (arg0 == {switch_cond}) {{{start_hold}  }} else {{ {ev_drop}{end_hold}  }}\n}}\n")
    else:
        ret_body, drop_body, ev_drop_fn, lock_probe = start_hold, end_hold, ev_drop, ""
        if cost_probe:
            libc, sig_addr, gil = cost_probe
            cond, switch_cond = gil + 32, gil + 120
            ret_body += ("  if (@tl[tid]) { @take_after_lock = sum($now - @tl[tid]); @takes_lock = count(); "
                         "delete(@tl[tid]); }\n")
            drop_body += "  @de[tid] = $now;\n"
            lock_probe = (f"uprobe:{libc}:{hex(sig_addr)} /pid == {P} && nsecs < @X && (arg0 == {switch_cond} || arg0 == {cond})/ {{\n"
                          f"  if (arg0 == {switch_cond}) {{ @tl[tid] = nsecs; }}\n"
                          f"  else if (@de[tid]) {{ @drop_before_unlock = sum(nsecs - @de[tid]); @drops_lock = count(); "
                          f"delete(@de[tid]); }}\n}}\n")
    return f"""
BEGIN {{
  @t0 = nsecs; @S = @t0 + {int(lead_ns)}; @E = @S + {int(window_ns)}; @X = @E + {int(tail_ns)};
  printf("ATTACHED %lld\\n", @t0);
}}

{take_entry} /pid == {P} && nsecs < @X/ {{
  $now = nsecs;
  // (counted inside the window only: while bpftrace attaches its probes one by one, events do go missing)
  if (@ws[tid] && $now >= @S && $now < @E) {{ @wait_lost_end = count(); }}
  @ws[tid] = $now; @seen[tid] = 1;
  @calls_take[tid] = count(); {ev_take}
  if ($now >= @S && $now < @E) {{ @takes_in_window = count(); }}
}}

{take_ret} /pid == {P} && nsecs < @X/ {{
  $now = nsecs;
  {ret_body}
}}

{drop_entry} /pid == {P} && nsecs < @X/ {{
  $now = nsecs;
  @calls_drop[tid] = count(); {ev_drop_fn}
  {drop_body}
}}
{lock_probe}
interval:ms:20 /nsecs > @X/ {{ exit(); }}
"""


class UprobeTracer:
    """Runs bpftrace on one process. The window [S, E] (CLOCK_MONOTONIC ns) starts lead_s after bpftrace has
    attached every probe and lasts window_s; bpftrace exits by itself tail_s later.
    start(), then wait_attached() (sets .start_ns / .end_ns), later result() (which waits for the exit)."""

    def __init__(self, pid, lead_s, window_s, tail_s=0.05, lib=None, bpftrace="bpftrace", events=False,
                 gil_addr=None, cost_gil_addr=None):
        """gil_addr: time holds by the GIL's lock word (see program()), given the GIL struct's address.
        cost_gil_addr: keep the function boundaries, and measure the probes' cost against the lock word too
        (program()'s cost_probe; result()['probe_cost'])."""
        self.pid = pid
        self.events = events
        self.lead_ns = int(lead_s * 1e9)
        self.window_ns = int(window_s * 1e9)
        self.tail_ns = int(tail_s * 1e9)
        self.start_ns = self.end_ns = self.exit_ns = None
        self.bpftrace = shutil.which(bpftrace)
        if not self.bpftrace:
            raise Unavailable("bpftrace is not installed (scripts/setup.sh installs it)")
        if os.geteuid() != 0:
            raise Unavailable("uprobes need root (or CAP_BPF + CAP_PERFMON): run the benchmark as root")
        self.lib = lib or python_library(pid)
        self.takes, self.drops = gil_symbols(self.lib)
        self.lockword = None
        if gil_addr:
            libc, sig = libc_cond_signal(pid)
            self.lockword = (libc, sig, int(gil_addr))
        self.cost_probe = None
        if cost_gil_addr:
            libc, sig = libc_cond_signal(pid)
            self.cost_probe = (libc, sig, int(cost_gil_addr))
        self.proc = None
        self.lines = []
        self.attached = threading.Event()
        self.attached_ns = None
        self._stderr = b""

    def start(self):
        fd, self.script = tempfile.mkstemp(prefix="gilspy-uprobe-", suffix=".bt")
        with os.fdopen(fd, "w") as f:
            f.write(program(self.pid, self.lib, self.takes, self.drops, self.lead_ns, self.window_ns, self.tail_ns,
                            self.events, self.lockword, self.cost_probe))
        env = dict(os.environ, BPFTRACE_MAP_KEYS_MAX="65536")
        self.proc = subprocess.Popen([self.bpftrace, "-f", "json", self.script], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._err_reader = threading.Thread(target=self._read_err, daemon=True)
        self._err_reader.start()
        return self

    def _read(self):
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").strip()
            if not line:
                continue
            self.lines.append(line)
            if not self.attached.is_set() and "ATTACHED" in line:
                m = re.search(r"ATTACHED (\d+)", line)
                self.attached_ns = int(m.group(1)) if m else monotonic_ns()
                self.start_ns = self.attached_ns + self.lead_ns
                self.end_ns = self.start_ns + self.window_ns
                self.exit_ns = self.end_ns + self.tail_ns
                self.attached.set()
        self.attached.set()

    def _read_err(self):
        self._stderr = self.proc.stderr.read()

    def stderr_text(self):
        # bpftrace 0.17 warns about RLIMIT_MEMLOCK on kernels that account BPF memory by cgroup: not a problem.
        lines = [l for l in self._stderr.decode(errors="replace").splitlines() if "RLIMIT_MEMLOCK" not in l]
        return "\n".join(lines).strip()

    def wait_attached(self, timeout=30):
        """Blocks until bpftrace's BEGIN ran (every probe attached); returns that CLOCK_MONOTONIC ns."""
        self.attached.wait(timeout)
        if self.attached_ns is None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self._err_reader.join(2)
            raise Unavailable(f"bpftrace did not attach to {self.lib} (exit {self.proc.returncode}): "
                              f"{self.stderr_text() or 'timed out'}")
        return self.attached_ns

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)

    def result(self, timeout=None):
        """Waits for bpftrace to exit (it exits by itself at exit_ns) and returns the aggregated window."""
        if self.attached_ns is None:
            self.wait_attached()
        if timeout is None:
            timeout = max(10.0, (self.exit_ns - monotonic_ns()) / 1e9 + 10.0)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            self.proc.wait(10)
        self._reader.join(5)
        self._err_reader.join(5)
        try:
            os.unlink(self.script)
        except OSError:
            pass
        maps = {}
        for line in self.lines:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if obj.get("type") == "map":
                maps.update(obj["data"])
        if "@t0" not in maps:
            raise Unavailable(f"bpftrace printed no maps (exit {self.proc.returncode}): {self.stderr_text()}")
        res = aggregate(maps, self.start_ns, self.end_ns, self.attached_ns)
        if self.cost_probe and maps.get("@takes_lock") and maps.get("@drops_lock"):
            res["probe_cost"] = {"take_ns": maps["@take_after_lock"] / maps["@takes_lock"],
                                 "drop_ns": maps["@drop_before_unlock"] / maps["@drops_lock"],
                                 "takes": maps["@takes_lock"], "drops": maps["@drops_lock"]}
        if self.events:
            res["events"] = self.transitions()
        return res

    def transitions(self):
        """With events=True: per tid, [(ns, state)] in time order; state 'W' (entered take_gil), 'H' (took the
        GIL), 'R' (dropped it). Starts at the attach time in state '?' (unknown until the first event)."""
        out = {}
        for line in self.lines:
            if '"printf"' not in line:
                continue
            try:
                text = json.loads(line)["data"]
            except (ValueError, KeyError):
                continue
            for part in text.splitlines():
                f = part.split()
                if len(f) == 3 and f[0] in ("T", "H", "D"):
                    state = {"T": "W", "H": "H", "D": "R"}[f[0]]
                    out.setdefault(int(f[1]), []).append((int(f[2]), state))
        for tid in out:
            out[tid].sort()
        return out


def aggregate(maps, S, E, attached_ns):
    def per_tid(name):
        m = maps.get("@" + name) or {}
        return {int(k): int(v) for k, v in m.items()} if isinstance(m, dict) else {}

    def scalar(name):
        v = maps.get("@" + name, 0)
        return int(v) if not isinstance(v, dict) else 0

    threads = {}

    def th(tid):
        return threads.setdefault(tid, {"hold_ns": 0, "wait_ns": 0, "holds": 0, "waits": 0, "waits_long": 0,
                                        "holds_short": 0, "holds_short_ns": 0})

    for key, field in (("hold_ns", "hold_ns"), ("wait_ns", "wait_ns"), ("hold_n", "holds"), ("wait_n", "waits"),
                       ("wait_long_n", "waits_long"), ("hold_short_n", "holds_short"),
                       ("hold_short_ns", "holds_short_ns")):
        for tid, v in per_tid(key).items():
            th(tid)[field] += v
    # Every thread that touched the GIL while we were attached, even outside the window.
    calls_take, calls_drop = per_tid("calls_take"), per_tid("calls_drop")
    seen = set(calls_take) | set(calls_drop)
    # Intervals still open when bpftrace exited (after E): they run to E at least.
    for key, field, count in (("hs", "hold_ns", "holds"), ("ws", "wait_ns", "waits")):
        for tid, s in per_tid(key).items():
            if s < E:
                t = th(tid)
                t[field] += E - max(s, S)
                t[count] += 1
    return {
        "window": [S, E],
        "attached_ns": attached_ns,
        "threads": threads,
        "tids_seen": sorted(seen | set(threads)),
        "takes_in_window": scalar("takes_in_window"),
        "drops_in_window": scalar("drops_in_window"),
        "switches": scalar("switches"),
        "calls_take": sum(calls_take.values()),
        "calls_drop": sum(calls_drop.values()),
        "hold_unknown_start": scalar("hold_unknown_start"),
        "wait_unknown_start": scalar("wait_unknown_start"),
        "hold_lost_start": scalar("hold_lost_start"),
        "wait_lost_start": scalar("wait_lost_start"),
        "hold_lost_end": scalar("hold_lost_end"),
        "wait_lost_end": scalar("wait_lost_end"),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-p", "--pid", type=int, required=True)
    ap.add_argument("-d", "--duration", type=float, default=2.0, help="window length, seconds")
    ap.add_argument("--lead", type=float, default=0.2, help="seconds from attaching to the window's start")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--gil-addr", type=lambda x: int(x, 0), help="time holds by the lock word: the GIL struct's "
                                                                  "address (`gilspy info -p PID` prints it)")
    args = ap.parse_args()
    try:
        tracer = UprobeTracer(args.pid, args.lead, args.duration, gil_addr=args.gil_addr).start()
        tracer.wait_attached()
        res = tracer.result()
    except Unavailable as e:
        print(f"uprobes unavailable: {e}", file=sys.stderr)
        return 77
    S, E = res["window"]
    if args.json:
        print(json.dumps(res, indent=1))
        return 0
    W = E - S
    print(f"window {W / 1e9:.3f} s: take_gil {res['takes_in_window']}, drop_gil {res['drops_in_window']}, "
          f"switches {res['switches']}")
    print(f"{'TID':>8} {'HOLD %':>7} {'WAIT %':>7} {'HOLDS':>8} {'WAITS':>8} {'<100us':>8}")
    for tid, t in sorted(res["threads"].items()):
        print(f"{tid:>8} {100 * t['hold_ns'] / W:7.2f} {100 * t['wait_ns'] / W:7.2f} {t['holds']:>8} "
              f"{t['waits']:>8} {t['holds_short']:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
