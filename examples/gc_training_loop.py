"""A training loop in miniature whose steps now and then take longer: the garbage collector (the seed's case: a
GPT-style job whose step time jumped from ~2770 ms to ~2900 ms on every node, from full collections in one
module's forward path).

Every step does the same work: a "forward" that builds an autograd-like graph of nodes that point back at their
graph (reference cycles: only the collector frees them) and a bit of bookkeeping that survives the step. The
model is a large set of long-lived Python objects, so a full (generation 2) collection has a lot to traverse.
The loop prints each step's time and, at the end, which steps were slow.

usage: python3 examples/gc_training_loop.py [--steps N] [--gc default|freeze|threshold|disable]
  freeze     gc.freeze() once the model is built: the long-lived objects leave the collector's generations
  threshold  gc.set_threshold(50_000, 50, 100): far fewer collections
  disable    gc.disable(): none at all (the cycles are never freed: memory grows)

With gilspy: gilspy record --gc-threshold-ms 5 -- python3 examples/gc_training_loop.py
"""
import argparse
import gc
import os
import resource
import statistics
import threading
import time


class Param:
    __slots__ = ("name", "value", "grad", "owner")


class Node:
    __slots__ = ("op", "inputs", "graph", "value")


def build_model(layers=600, width=250):
    """About 150 000 long-lived objects (parameters and their per-layer lists), like a model's Python side."""
    model = []
    for i in range(layers):
        layer = []
        for j in range(width):
            p = Param()
            p.name, p.value, p.grad, p.owner = f"l{i}.w{j}", float(j), 0.0, layer
            layer.append(p)
        model.append(layer)
    return model


def forward(model, nodes=5_000):
    """The same work every step: arithmetic over every parameter (floats: nothing for the collector), and a
    graph of Nodes with back-references that is garbage once the step ends (what the collector must free)."""
    acc = 0.0
    for _ in range(4):
        for layer in model:
            for p in layer:
                acc += p.value * 1.0001
    graph = []
    prev = None
    for i in range(nodes):
        n = Node()
        n.op, n.inputs, n.graph, n.value = "mul", (prev,), graph, float(i)
        graph.append(n)
        prev = n
    return acc


def data_loader(stop, batches):
    """Wakes every 2 ms and does a little Python work (no allocation the collector counts)."""
    batch = [float(i) for i in range(2000)]
    while not stop.is_set():
        time.sleep(0.002)
        batches[0] += sum(batch) > 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--gc", choices=["default", "freeze", "threshold", "disable"], default="default")
    args = ap.parse_args()
    t0 = time.monotonic()
    model = build_model()
    history = []  # what survives each step (metrics, small tensors kept for logging)
    if args.gc == "freeze":
        gc.freeze()
    elif args.gc == "threshold":
        gc.set_threshold(50_000, 50, 100)
    elif args.gc == "disable":
        gc.disable()
    print(f"model built: {sum(len(layer) for layer in model)} parameters in {time.monotonic() - t0:.2f} s; "
          f"gc {args.gc}, thresholds {gc.get_threshold()}, enabled {gc.isenabled()}", flush=True)
    stop, batches = threading.Event(), [0]
    loader = threading.Thread(target=data_loader, args=(stop, batches), name="data-loader")
    loader.start()
    times = []
    for step in range(args.steps):
        start = time.monotonic()
        loss = forward(model)
        history.append([{"step": step, "loss": loss} for _ in range(1000)])  # survives: logged metrics
        took = time.monotonic() - start
        times.append((start - t0, took))
        print(f"step {step:3d} at {start - t0:7.3f} s: {took * 1e3:6.1f} ms", flush=True)
    stop.set()
    loader.join()
    durations = [d for _, d in times]
    median = statistics.median(durations)
    slow = [(i, at, d) for i, (at, d) in enumerate(times) if d > 1.3 * median]
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"steps: {len(times)}, median {median * 1e3:.1f} ms, max {max(durations) * 1e3:.1f} ms, "
          f"{len(slow)} slow (> 1.3 x median); peak RSS {rss_mb:.0f} MB; gc.get_stats() collections "
          f"{[s['collections'] for s in gc.get_stats()]}")
    for i, at, d in slow:
        print(f"  slow step {i} at {at:.3f} s: {d * 1e3:.1f} ms")
    print(f"loader batches: {batches[0]}", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
