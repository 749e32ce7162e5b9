"""A small Python API over the gilspy binary: record this process's GIL from inside it.

    import gilspy
    gilspy.gil_trace_record_start(output_dir="gil_traces")
    train()                      # anything multi-threaded
    files = gilspy.gil_trace_record_stop()
    print(files["raw"], files["trace"])
    print(files["summary"]["gil_busy_share"])   # the figures `gilspy record` prints (docs/raw-format.md)

or, as a context manager:

    with gilspy.record(output_dir="gil_traces") as rec:
        train()
    print(rec.files)

It starts `gilspy record -p <this pid>` in the background and stops it with SIGINT, which ends an open-ended
recording cleanly (exit 0, files complete). The binary is $GILSPY_BIN, else `gilspy` on PATH, else the
repository's build/cli/gilspy. Reading another process's memory needs ptrace permission: under Yama
ptrace_scope 1 a child may not read its parent, so this process names the recorder as its tracer
(PR_SET_PTRACER) before starting it; running as root, or with CAP_SYS_PTRACE on the binary, also works.
"""
import ctypes
import json
import os
import shutil
import signal
import subprocess
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


def _read_summary(raw_path):
    """The "summary" object of a raw file. It is the file's last line ('"summary":{...}}'), so only the tail is
    read, not the events before it."""
    with open(raw_path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        chunk = 1 << 16
        while True:
            start = max(0, size - chunk)
            f.seek(start)
            tail = f.read(size - start)
            at = tail.rfind(b'\n"summary":')
            if at >= 0:
                text = tail[at + len(b'\n"summary":'):].decode("utf-8", "replace")
                return json.JSONDecoder().raw_decode(text)[0]  # the object; the file's closing brace is left
            if start == 0:
                return json.loads(tail)["summary"]
            chunk *= 4


class Recording:
    """One background recording of this process."""

    def __init__(self, output_dir=None, rate=None, gilspy=None, trace=True):
        self.output_dir = os.path.abspath(output_dir or os.environ.get("GILSPY_OUTPUT_DIR") or ".")
        try:
            os.makedirs(self.output_dir, exist_ok=True)
        except OSError as e:  # a file in the way, no permission, read-only file system
            raise GilspyError(f"cannot use {self.output_dir} as the output directory: {e.strerror}") from e
        if not os.access(self.output_dir, os.W_OK | os.X_OK):
            raise GilspyError(f"cannot write to the output directory {self.output_dir}")
        args = [_find_binary(gilspy), "record", "-p", str(os.getpid()), "-o", self.output_dir, "--no-status", "-q"]
        if rate:
            args += ["-r", str(rate)]
        if not trace:
            args.append("--no-trace")
        # Any tracer until the recorder exists (it reads us at once), then only the recorder.
        _allow_tracing_by(_PR_SET_PTRACER_ANY)
        self._proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True)  # our Ctrl+C must not stop it half-way
        _allow_tracing_by(self._proc.pid)
        self.files = None
        self._wait_until_recording()

    def _wait_until_recording(self, timeout=10.0):
        # The recorder writes GIL_<pid>_rank_<rank>.json.partial once it is attached and polling.
        prefix = f"GIL_{os.getpid()}_rank_"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise GilspyError(f"gilspy exited at once: {self._proc.stderr.read().strip()}")
            if any(f.startswith(prefix) and f.endswith(".partial") for f in os.listdir(self.output_dir)):
                return
            time.sleep(0.01)
        raise GilspyError("gilspy did not start recording within %.0f s" % timeout)

    def stop(self, timeout=60.0):
        """Ends the recording; returns {"raw": path, "trace": path or None, "summary": {...}}: the summary is
        the raw file's (docs/raw-format.md): duration_ns, gil_busy_share, coverage, late_polls, p99_lateness_ns,
        and per thread hold_ns, wait_ns, hold_share, wait_share, holds, ..."""
        if self.files is not None:
            return self.files
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
        out, err = self._proc.communicate(timeout=timeout)
        if self._proc.returncode != 0:
            raise GilspyError(f"gilspy exited {self._proc.returncode}: {err.strip()}")
        files = {"raw": None, "trace": None}
        for line in out.splitlines():
            line = line.strip()
            if line.startswith("raw data:"):
                files["raw"] = line.split(":", 1)[1].strip()
            elif line.startswith("trace:"):
                files["trace"] = line.split(":", 1)[1].strip().split("  (")[0]
        if files["raw"] is None:
            raise GilspyError(f"gilspy did not say where it wrote the recording: {out.strip()} {err.strip()}")
        files["summary"] = _read_summary(files["raw"])
        self.files = files
        return files

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


_current = None


def gil_trace_record_start(output_dir=None, rate=None, gilspy=None, trace=True):
    """Starts recording this process's GIL in the background; returns the Recording."""
    global _current
    if _current is not None and _current.files is None:
        raise GilspyError("a recording is already running; call gil_trace_record_stop() first")
    _current = Recording(output_dir=output_dir, rate=rate, gilspy=gilspy, trace=trace)
    return _current


def gil_trace_record_stop():
    """Stops the recording started by gil_trace_record_start(); returns {"raw": path, "trace": path}."""
    if _current is None:
        raise GilspyError("no recording was started")
    return _current.stop()


def record(output_dir=None, rate=None, gilspy=None, trace=True):
    """Context manager: records the GIL of this process for the duration of the `with` block."""
    return Recording(output_dir=output_dir, rate=rate, gilspy=gilspy, trace=trace)
