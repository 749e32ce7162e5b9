"""The benchmark's server workload: an http.server-style thread-per-request server on 127.0.0.1.

usage: python server.py SECONDS [--progress SECONDS] [--port 0]

A ThreadingHTTPServer (one new thread per connection, as `python3 -m http.server` does) whose GET handler does a
little Python work per request: it builds a small JSON document. HTTP/1.0, so every request is a new
connection and therefore a new thread: the thread churn is the point (gilspy must notice threads that come and
go every few hundred µs). The load comes from loadgen.py, another process.

Same stdout protocol as gilwork.py (JSON lines), so the benchmark reads both alike:
  {"ready": {...}}   pid, port, python, main_tid, threads: [{"role": "requests", ...}] (one counter, not one thread)
  {"p": [t_ns, cpu_ns, handled]}   with --progress: CLOCK_MONOTONIC ns, the process's CPU time (all threads, the
                     exited ones included) and the requests answered so far
  {"result": {...}}  at the end
SIGTERM or SIGINT end the run early. Standard library only, Python 3.8+. Listens on 127.0.0.1 only.
"""
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

handled = [0]  # requests answered so far
handled_lock = threading.Lock()  # += is not atomic across threads, even under the GIL


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # no keep-alive: one connection, one thread, one request

    def do_GET(self):
        # A little Python work per request, like a real handler: build and serialise a small document.
        items = [{"i": i, "sq": i * i, "name": f"item-{i}"} for i in range(20)]
        body = json.dumps({"path": self.path, "thread": threading.get_native_id(), "items": items}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        with handled_lock:
            handled[0] += 1

    def log_message(self, fmt, *args):  # no per-request line on stderr
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a burst of connects must not be refused while the accept loop waits for the GIL


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main(argv):
    args = list(argv[1:])
    opts = {"--progress": 0.0, "--port": 0}
    for k in list(opts):
        if k in args:
            i = args.index(k)
            opts[k] = type(opts[k])(args[i + 1])
            del args[i:i + 2]
    seconds = float(args[0]) if args else 10.0
    progress = opts["--progress"]

    srv = Server(("127.0.0.1", opts["--port"]), Handler)
    serve_tid = [0]
    serving = threading.Event()

    def serve():
        serve_tid[0] = threading.get_native_id()
        serving.set()
        srv.serve_forever(poll_interval=0.05)

    t = threading.Thread(target=serve, name="accept", daemon=True)
    t.start()
    serving.wait()
    t_start = time.monotonic_ns()
    emit({"ready": {"pid": os.getpid(), "workload": "server", "python": sys.version.split()[0],
                    "port": srv.server_address[1], "main_tid": threading.get_native_id(), "t_ns": t_start,
                    "accept_tid": serve_tid[0],
                    "threads": [{"tid": serve_tid[0], "role": "requests", "index": 0}]}})
    ended = [False]

    def end_now(signum, frame):
        ended[0] = True

    signal.signal(signal.SIGTERM, end_now)
    signal.signal(signal.SIGINT, end_now)
    deadline = t_start + int(seconds * 1e9)
    step = progress if progress > 0 else 0.05
    next_print = t_start
    while True:
        now = time.monotonic_ns()
        if progress > 0 and now >= next_print:
            emit({"p": [now, time.process_time_ns(), handled[0]]})
            next_print += int(progress * 1e9)
        if now >= deadline or ended[0]:
            break
        time.sleep(min(step, max(0.0, (deadline - now) / 1e9)))
    srv.shutdown()
    srv.server_close()
    secs = (time.monotonic_ns() - t_start) / 1e9
    emit({"result": {"workload": "server", "seconds": secs, "threads": [
        {"tid": serve_tid[0], "role": "requests", "index": 0, "iterations": handled[0],
         "rate": handled[0] / max(1e-9, secs)}]}})


if __name__ == "__main__":
    main(sys.argv)
