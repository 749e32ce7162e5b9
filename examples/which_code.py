"""A small service for gilspy's "which code" example (README, docs/which-code-contention.svg).

One thread, "tokenizer", encodes text in pure Python: it holds the GIL for a forced-switch interval at a time.
Around it, threads that should be quick: "reader-N" block in socket.recv() on a socket a "sender" thread feeds
every millisecond, "worker-N" take jobs from a queue.Queue and parse them, and a "heartbeat" thread sleeps in
1 ms naps. Each of them, whenever it returns from a blocking call, waits for the tokenizer to let go.

usage: python3 examples/which_code.py [SECONDS]   (default 3)
"""
import queue
import socket
import sys
import threading
import time

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
stop = time.monotonic() + SECONDS
VOCAB = {chr(c): c - 31 for c in range(32, 127)}


def encode(text):
    """A pure-Python tokenizer: the kind of code that holds the GIL while everyone else waits."""
    ids = []
    word = 0
    for ch in text:
        i = VOCAB.get(ch, 0)
        if ch == " ":
            ids.append(word)
            word = 0
        else:
            word = (word * 131 + i) % 1000003
    ids.append(word)
    return ids


def tokenizer():
    text = "the quick brown fox jumps over the lazy dog " * 200
    while time.monotonic() < stop:
        encode(text)


def sender(sock):
    while time.monotonic() < stop:
        sock.send(b"x" * 64)
        time.sleep(0.001)
    sock.close()


def reader(sock):
    while True:
        data = sock.recv(64)
        if not data:
            break


def parse(job):
    return sum(int(x) for x in job.split(","))


def worker(jobs):
    while time.monotonic() < stop:
        try:
            job = jobs.get(timeout=0.01)
        except queue.Empty:
            continue
        parse(job)


def heartbeat():
    while time.monotonic() < stop:
        time.sleep(0.001)


jobs = queue.Queue()
pairs = [socket.socketpair() for _ in range(2)]
threads = [threading.Thread(target=tokenizer, name="tokenizer"), threading.Thread(target=heartbeat, name="heartbeat")]
for i, (a, b) in enumerate(pairs):
    threads += [threading.Thread(target=sender, args=(a,), name=f"sender-{i}"),
                threading.Thread(target=reader, args=(b,), name=f"reader-{i}")]
threads += [threading.Thread(target=worker, args=(jobs,), name=f"worker-{i}") for i in range(2)]
for t in threads:
    t.start()
while time.monotonic() < stop:
    jobs.put("1,2,3,4,5,6,7,8")
    time.sleep(0.002)
for t in threads:
    t.join()
