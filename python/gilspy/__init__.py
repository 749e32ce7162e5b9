"""A small Python API over the gilspy binary: record the GIL of Python processes from inside one of them.

    import gilspy
    gilspy.gil_trace_record_start(pid_list=[os.getpid()], output_dir="gil_traces")
    train()                      # anything multi-threaded
    files = gilspy.gil_trace_record_stop()      # {pid: {"raw": ..., "trace": ..., "summary": {...}, ...}}
    print(files[os.getpid()]["summary"]["gil_busy_share"])   # the raw file's summary (docs/raw-format.md)

The parameters are those of the seed's GIL tracer:

- ``pid_list=None`` records every Python process this user may read (``gilspy record`` with no ``-p``: those
  running now and those that start while it records; gilspy itself excluded); a list records those pids (one
  that cannot be recorded, dead or not Python, is named in ``Recording.skipped`` and the others are recorded).
- ``duration > 0`` stops by itself after that many seconds; ``-1`` (or 0, None) records until
  ``gil_trace_record_stop()``. Stopping before the duration ends it there.
- ``output_dir`` (default ``$GILSPY_OUTPUT_DIR``, else the current directory) gets ``GIL_<pid>_rank_<rank>.json``
  and ``.trace.json`` per process.

``gil_trace_record_stop()`` returns the files written, per pid: ``{pid: {"raw", "trace", "summary", "rank",
"ns_pid", "python_version", "command", "stop_reason"}}``. Or, as a context manager:

    with gilspy.record(pid_list=[os.getpid()], output_dir="gil_traces") as rec:
        train()
    print(rec.files)

It runs ``gilspy record --json`` in the background, which reports on stdout, as JSON lines, when it has started
and, at the end, what it wrote (no text is parsed), and stops it with SIGINT, which ends a recording cleanly
(files complete). The binary is $GILSPY_BIN, else ``gilspy`` on PATH, else the repository's build/cli/gilspy.
Reading another process's memory needs ptrace permission: under Yama ptrace_scope 1 a child may not read its
parent, so this process names the recorder as its tracer (PR_SET_PTRACER) before starting it; running as root,
or with CAP_SYS_PTRACE on the binary, also works (and is needed for processes that are not this one's).
"""
import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

__all__ = ["gil_trace_record_start", "gil_trace_record_stop", "record", "Recording", "GilspyError"]

_PR_SET_PTRACER = 0x59616D61
_PR_SET_PTRACER_ANY = ctypes.c_ulong(-1).value


class GilspyError(RuntimeError):
    pass


def _find_binary(explicit=None):
    for candidate in (explicit, os.environ.get("GILSPY_BIN"), shutil.which("gilspy"),
                      os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                   "build", "cli", "gilspy")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise GilspyError("gilspy binary not found: set GILSPY_BIN, put gilspy on PATH, or build it (scripts/setup.sh)")


def _allow_tracing_by(pid):
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PTRACER, ctypes.c_ulong(pid), 0, 0, 0)
    except (OSError, AttributeError):
        pass  # no Yama, or not Linux: nothing to allow


def _pids_text(pid_list):
    try:
        pids = [int(p) for p in pid_list]
    except (TypeError, ValueError):
        raise GilspyError(f"pid_list must be a list of process ids, not {pid_list!r}") from None
    if not pids:
        raise GilspyError("pid_list is empty (None records every Python process)")
    if any(p <= 0 for p in pids):
        raise GilspyError(f"pid_list holds a pid that is not a process id: {pids}")
    return ",".join(str(p) for p in pids)


class Recording:
    """One background recording (``gilspy record --json``)."""

    def __init__(self, pid_list=None, duration=-1, output_dir=None, rate=None, gilspy=None, trace=True,
                 start_timeout=30.0):
        self.output_dir = os.path.abspath(output_dir or os.environ.get("GILSPY_OUTPUT_DIR") or ".")
        try:
            os.makedirs(self.output_dir, exist_ok=True)
        except OSError as e:  # a file in the way, no permission, read-only file system
            raise GilspyError(f"cannot use {self.output_dir} as the output directory: {e.strerror}") from e
        if not os.access(self.output_dir, os.W_OK | os.X_OK):
            raise GilspyError(f"cannot write to the output directory {self.output_dir}")
        args = [_find_binary(gilspy), "record", "-o", self.output_dir, "--no-status", "--json"]
        if pid_list is not None:
            args += ["-p", _pids_text(pid_list)]
        self.duration = duration if duration is not None and duration > 0 else None
        if self.duration:
            args += ["-d", str(self.duration)]
        if rate:
            args += ["-r", str(rate)]
        if not trace:
            args.append("--no-trace")
        self.files = None       # {pid: {...}} once stopped
        self.targets = {}       # {pid: {"rank", "ns_pid", "python_version", "command"}} being recorded
        self.skipped = {}       # {pid: reason}: named in pid_list (or found) but not recorded
        self.result = None      # the binary's last JSON line ("finished")
        self.exit_status = None
        self._events = []       # JSON lines read so far, by a thread: the recorder never blocks on its stdout
        self._cond = threading.Condition()
        self._eof = False
        # Notes (processes found, skipped) go to a file, not a pipe that could fill while nobody reads it.
        self._stderr = tempfile.TemporaryFile()
        # Any tracer until the recorder exists (it reads us at once), then only the recorder.
        _allow_tracing_by(_PR_SET_PTRACER_ANY)
        self._proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._stderr, start_new_session=True)
        _allow_tracing_by(self._proc.pid)  # (our Ctrl+C must not stop it half-way: its own session)
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()
        self._wait_for("started", start_timeout)

    def _read_stdout(self):
        for line in self._proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._cond:
                self._events.append(event)
                self._note(event)
                if event.get("event") == "finished":
                    self.result = event
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _note(self, event):
        for t in event.get("targets", []) + ([event["target"]] if "target" in event else []):
            self.targets[t["pid"]] = {k: v for k, v in t.items() if k != "pid"}
        for s in event.get("skipped", []):
            self.skipped[s["pid"]] = s["reason"]

    def _errors(self):
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace").strip()

    def _wait_for(self, kind, timeout):
        """Until a line of `kind` (or "finished") came, or stdout closed, or `timeout`; True if it came."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not any(e.get("event") in (kind, "finished") for e in self._events) and not self._eof:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            came = any(e.get("event") in (kind, "finished") for e in self._events)
        if came:
            return True
        if self._proc.poll() is None and not self._eof:
            self._proc.kill()
            self._proc.wait()
            raise GilspyError("gilspy did not start recording within %.0f s: %s" % (timeout, self._errors()))
        self._proc.wait()
        raise GilspyError(f"gilspy exited at once: {self._errors()}")

    def stop(self, timeout=120.0):
        """Ends the recording (now, if it is still running) and returns the files written per pid:
        {pid: {"raw": path, "trace": path or None, "summary": {...}, "rank", "ns_pid", "python_version",
        "command", "stop_reason"}}; "summary" is the raw file's (docs/raw-format.md): duration_ns,
        gil_busy_share, coverage, and per thread hold_ns, wait_ns, hold_share, wait_share,
        hold_share_ci95 / wait_share_ci95 (each share lies within that of the truth 19 times in 20), holds, ..."""
        if self.files is not None:
            return self.files
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
        try:
            self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(timeout=10)
        self.exit_status = self._proc.returncode
        if self.result is None:
            raise GilspyError(f"gilspy exited {self.exit_status} without a result: {self._errors()}")
        self.files = {t["pid"]: {k: v for k, v in t.items() if k != "pid"} for t in self.result["targets"]}
        if not self.files:
            raise GilspyError(f"gilspy recorded nothing: {self.result.get('message') or self._errors()}")
        return self.files

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


_current = None


def gil_trace_record_start(pid_list=None, duration=-1, output_dir=None, rate=None, gilspy=None, trace=True):
    """Starts recording the GIL of `pid_list` (None: every Python process) in the background, for `duration`
    seconds (-1: until gil_trace_record_stop()); returns the Recording once it is recording."""
    global _current
    if _current is not None and _current.files is None:
        raise GilspyError("a recording is already running; call gil_trace_record_stop() first")
    _current = Recording(pid_list=pid_list, duration=duration, output_dir=output_dir, rate=rate, gilspy=gilspy,
                         trace=trace)
    return _current


def gil_trace_record_stop():
    """Stops the recording started by gil_trace_record_start() (if its duration has not ended it already);
    returns the files written per pid (Recording.stop)."""
    if _current is None:
        raise GilspyError("no recording was started")
    return _current.stop()


def record(pid_list=None, duration=-1, output_dir=None, rate=None, gilspy=None, trace=True):
    """Context manager: records the GIL of `pid_list` (None: every Python process) for the `with` block."""
    return Recording(pid_list=pid_list, duration=duration, output_dir=output_dir, rate=rate, gilspy=gilspy,
                     trace=trace)
