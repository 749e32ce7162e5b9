"""Loopback load for server.py: N client processes, each sending one GET per new connection, as fast as the
server answers (closed loop: at most N requests in flight).

usage: python loadgen.py PORT [--clients 4] [--seconds 60] [--progress 0.1]

Bounded on purpose: 127.0.0.1 only, at most 64 clients, at most 3600 s (and it stops when its parent dies).
Processes, not threads, so that the load generator's own GIL is never what limits the rate. Raw sockets and
HTTP/1.0 (the server closes after each response) keep the client's CPU per request small.
JSON lines on stdout: {"p": [t_ns, completed, errors]} every --progress seconds, {"result": {...}} at the end.
"""
import argparse
import json
import multiprocessing
import os
import signal
import socket
import sys
import time

HOST = "127.0.0.1"
MAX_CLIENTS = 64
MAX_SECONDS = 3600


def client(index, port, deadline, done, errors, parent):
    request = f"GET /item/{index} HTTP/1.0\r\nHost: {HOST}\r\n\r\n".encode()
    n = e = 0
    while time.monotonic() < deadline and os.getppid() == parent:
        try:
            with socket.create_connection((HOST, port), timeout=5) as s:
                s.sendall(request)
                got = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    got += chunk
            if got.startswith(b"HTTP/1.0 200"):
                n += 1
                done[index] = n
            else:
                e += 1
                errors[index] = e
        except OSError:
            e += 1
            errors[index] = e
            time.sleep(0.01)  # a refused or reset connection: do not spin on it


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("port", type=int)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--progress", type=float, default=0.1)
    a = ap.parse_args()
    if not 1 <= a.clients <= MAX_CLIENTS:
        sys.exit(f"--clients: 1..{MAX_CLIENTS}")
    seconds = min(a.seconds, MAX_SECONDS)
    ctx = multiprocessing.get_context("fork")
    done = ctx.Array("q", a.clients, lock=False)  # one writer per slot: no lock needed
    errors = ctx.Array("q", a.clients, lock=False)
    deadline = time.monotonic() + seconds
    procs = [ctx.Process(target=client, args=(i, a.port, deadline, done, errors, os.getpid()), daemon=True)
             for i in range(a.clients)]
    for p in procs:
        p.start()
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    signal.signal(signal.SIGINT, lambda *_: stop.__setitem__(0, True))
    t0 = time.monotonic_ns()
    while not stop[0] and time.monotonic() < deadline:
        print(json.dumps({"p": [time.monotonic_ns(), sum(done), sum(errors)]}), flush=True)
        time.sleep(a.progress)
    for p in procs:
        p.terminate()
    for p in procs:
        p.join(5)
    secs = (time.monotonic_ns() - t0) / 1e9
    print(json.dumps({"result": {"clients": a.clients, "seconds": secs, "completed": sum(done),
                                 "errors": sum(errors), "rate": sum(done) / max(secs, 1e-9)}}), flush=True)


if __name__ == "__main__":
    main()
