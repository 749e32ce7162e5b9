"""Known code for the stack tests, in two phases after the readiness line (and a short pause for the recorder
to attach):

1. PHASE1 s: thread "A" runs hog(), a pure-Python loop whose body spans 30 lines; thread "B" runs sleeper(),
   time.sleep(0.001) in a loop; and a short-lived thread "churn-N" starts every 50 ms (it computes a little,
   sleeps a little, ends).
2. PHASE2 s: A, B and the churn have stopped; thread "C-shapes" (renamed "C-renamed" when phase 1 began)
   runs, in turn, a class method, a nested function, a recursive lambda, a generator, an asyncio coroutine,
   and a recursion 200 deep that spins at the bottom and unwinds at once, again and again: each for SHAPE_S
   (the last one spins that long).

The readiness line names the threads and where hog's lines are, so the test can check what gilspy saw.

usage: stacks.py [PHASE1] [PHASE2]   (2.0 and 1.5 s by default)
"""
import asyncio
import dis
import sys
import threading
import time

from common import announce, native_id, report

PHASE1 = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
PHASE2 = float(sys.argv[2]) if len(sys.argv) > 2 else 1.5
PAUSE = 0.6  # between the readiness line and phase 1: the recorder attaches meanwhile
DEPTH = 200
SHAPE_S = 0.003  # phase 2: how long each shape runs in turn (deep() spins this long at the bottom)

phase1_begun = threading.Event()
phase1_over = threading.Event()
# hog's loop condition: no Python call in it (Event.is_set is one), so that hog is the innermost function at
# every instant of its loop, which top's "function" (the last sample's) must show.
hogging = [True]
phase2_over = threading.Event()
tids = {}
lock = threading.Lock()


def note(role):
    with lock:
        tids[role] = native_id()


def hog():
    note("A")
    v = 0
    while hogging[0]:
        v += 1
        v = v * 3 % 1000003
        v = v + 7
        v = v ^ 0x55
        v = v - 3
        v = v * 5 % 999983
        v = v + 11
        v = v ^ 0x0F
        v = v - 1
        v = v * 7 % 1000033
        v = v + 13
        v = v ^ 0x33
        v = v - 5
        v = v * 11 % 1000037
        v = v + 17
        v = v ^ 0x3C
        v = v - 7
        v = v * 13 % 1000039
        v = v + 19
        v = v ^ 0x5A
        v = v - 9
        v = v * 17 % 1000081
        v = v + 23
        v = v ^ 0x66
        v = v - 11
        v = v * 19 % 1000099
        v = v + 29
        v = v ^ 0x69
    return v


def sleeper():
    note("B")
    while not phase1_over.is_set():
        time.sleep(0.001)


def churn_one(i):
    v = 0
    for k in range(2000):
        v += k * i
    time.sleep(0.03)  # long enough for its name to be read
    return v


def churn():
    i = 0
    while not phase1_over.is_set():
        t = threading.Thread(target=churn_one, args=(i,), name=f"churn-{i}")
        t.start()
        i += 1
        time.sleep(0.05)
        t.join()


class Shapes:
    def method(self, n):
        v = 0
        for i in range(n):
            v += i * i % 7
        return v


def outer(n):
    def nested(m):
        v = 0
        for i in range(m):
            v += i % 5
        return v

    return nested(n)


fib = lambda n: n if n < 2 else fib(n - 1) + fib(n - 2)  # noqa: E731


def gen_work(n):
    for i in range(n):
        v = 0
        for j in range(40):
            v += j * i % 3
        yield v


async def coro_work(n):
    v = 0
    for i in range(n):
        v += i * i % 11
        if i % 2000 == 0:
            await asyncio.sleep(0)
    return v


def deep(n):
    if n == 0:
        end = time.monotonic() + SHAPE_S
        v = 0
        while time.monotonic() < end:
            v += 1
        return v
    return deep(n - 1) + 1


def for_a_while(f, *args):
    end = time.monotonic() + SHAPE_S
    while time.monotonic() < end:
        f(*args)


def gen_shape():
    return sum(gen_work(50))


async def coro_shape():  # one event loop for the whole turn: its set-up is not what gets sampled
    end = time.monotonic() + SHAPE_S
    while time.monotonic() < end:
        await coro_work(4000)


def shapes():
    note("C")
    phase1_begun.wait()
    threading.current_thread().name = "C-renamed"
    phase1_over.wait()
    box = Shapes()
    while not phase2_over.is_set():
        # Each shape for about as long as the others (their calls take 0.3-3 ms, and differ 2x between
        # versions): a shape with a small share of the cycle can go unsampled in a 1.5 s phase.
        for_a_while(box.method, 2000)
        for_a_while(outer, 2000)
        for_a_while(fib, 12)
        for_a_while(gen_shape)
        asyncio.run(coro_shape())
        deep(DEPTH)


def hog_lines():
    """The lines of hog's loop body, as its own code says (the first and last line of the `while`)."""
    lines = [line for _, line in dis.findlinestarts(hog.__code__) if line is not None]
    return hog.__code__.co_firstlineno, max(lines)


sys.setrecursionlimit(10000)
threads = [threading.Thread(target=hog, name="A"), threading.Thread(target=sleeper, name="B"),
           threading.Thread(target=churn, name="churn"), threading.Thread(target=shapes, name="C-shapes")]
for t in threads:
    t.start()
while len(tids) < 3:
    time.sleep(0.01)
first, last = hog_lines()
info = {"main": native_id(), **tids, "hog_first_line": first, "hog_last_line": last, "pause": PAUSE,
        "phase1": PHASE1, "phase2": PHASE2, "depth": DEPTH}
announce(info)
# The threads are running: hog holds, sleeper waits. The phases are timed from here.
time.sleep(PAUSE)
phase1_begun.set()
time.sleep(PHASE1)
hogging[0] = False
phase1_over.set()
time.sleep(PHASE2)
phase2_over.set()
for t in threads:
    t.join()
time.sleep(1.0)  # the recording ends before the process does
report(info)
