#!/usr/bin/env python3
"""Cost against accuracy, one markdown table with a row per mode.

Reads what `compare.py --modes ... --json-out` and `cost.py --modes ... --json-out` wrote (scripts/bench.sh runs
both with the same MODES) and matches the modes by label. Per mode:
  - accuracy (compare.json): the worst max |Δhold| and max |Δwait| ('adj' columns: the uretprobe's own cost
    moved from the uprobes' wait to their hold) over all interpreters, per workload a, b, d-h, the share of
    thread-windows whose uprobe shares lie inside gilspy's 95 % interval, and the verdict
    against the targets (every thread's hold within 1 pp, wait within 3 pp, on every interpreter and workload);
  - gilspy's mean poll rate there (summary rate_achieved_hz; median over the interpreters, per workload);
  - cost (cost.json): per cost workload, the target's change against the neighbouring untraced phases (median
    over the reps; each rep's change is the mean over the workload's roles, each role counted once), wall and
    per second of the target's own CPU time, and gilspy's CPU in % of one core (median over the reps); for the
    16-thread workload d only gilspy's CPU.

usage: table.py [--compare build/bench/compare.json] [--cost build/bench/cost.json] [--max-foreign CORES]
                [--no-legend]
"""
import argparse
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cost  # noqa: E402

HOLD_TARGET_PP = 1.0
WAIT_TARGET_PP = 3.0
ACC_WORKLOADS = ("a", "b", "d", "e", "f", "g", "h")  # c: its write thread is in its own noise
CPU_ONLY = ("d",)  # cost workloads shown by gilspy's CPU only (16 threads: what gilspy's CPU does with many)


def load(path):
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def fnum(x, fmt="{:.2f}"):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


def hz(x):
    if x is None:
        return "-"
    return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}"


def accuracy(rows):
    """label -> {"args", per workload: {"hold", "wait", "hz", "n"}, "verdict", "pythons"} from compare.json."""
    out = {}
    for row in rows:
        label = row.get("mode", "default")
        m = out.setdefault(label, {"args": row.get("mode_args", ""), "wl": {}, "misses": [], "errors": [],
                                   "no_truth": 0, "pythons": set(), "in_ci": []})
        w = row["workload"]
        if w not in ACC_WORKLOADS:
            continue
        m["pythons"].add(row["python"])
        if "threads" not in row or row.get("error"):
            m["errors"].append(f"{row['python']} {w}")
            continue
        e = m["wl"].setdefault(w, {"hold": None, "wait": None, "hz": []})
        g = row.get("gilspy") or {}
        if g.get("rate_achieved_hz") is not None:
            e["hz"].append(g["rate_achieved_hz"])
        if "max_da_hold_pp" not in row:
            m["no_truth"] += 1
            continue
        m["in_ci"] += [t["in_ci"] for t in row["threads"] if t.get("in_ci") is not None]
        e["hold"] = max(e["hold"] or 0.0, row["max_da_hold_pp"])
        e["wait"] = max(e["wait"] or 0.0, row["max_da_wait_pp"])
        if row["max_da_hold_pp"] > HOLD_TARGET_PP:
            m["misses"].append(f"{row['python']} {w} hold {row['max_da_hold_pp']:.2f}")
        if row["max_da_wait_pp"] > WAIT_TARGET_PP:
            m["misses"].append(f"{row['python']} {w} wait {row['max_da_wait_pp']:.2f}")
    for m in out.values():
        judged = any(e["hold"] is not None for e in m["wl"].values())
        if not judged:
            m["verdict"] = "no ground truth" if m["no_truth"] else "-"
        elif m["misses"]:
            m["verdict"] = "MISS: " + "; ".join(m["misses"][:3]) + (f" (+{len(m['misses']) - 3})" if len(m["misses"]) > 3 else "")
        else:
            m["verdict"] = "ok"
        missing = [w for w in ACC_WORKLOADS if w not in m["wl"]]
        if judged and missing:
            m["verdict"] += f" ({', '.join(missing)} not run)"
        if judged and m["no_truth"]:
            m["verdict"] += f" ({m['no_truth']} without uprobes)"
        if m["errors"]:
            m["verdict"] += f" ({len(m['errors'])} invalid: {', '.join(m['errors'][:2])})"
    return out


def cost_of(doc, max_foreign=None):
    """label -> {"args", per workload: {"wall", "cpu_s", "gilspy_cpu", "hz"}}, and {workload: its threads}."""
    out, workloads = {}, {}
    for run in (doc or {}).get("throughput", []):
        w = run["workload"]
        workloads.setdefault(w, len(run["roles"]))
        kinds = {c[0]: c for c in run.get("modes", [])}
        by_wall = cost.analyse(run, "rates", max_foreign)[0]
        by_cpu = cost.analyse(run, "rates_cpu", max_foreign)[0]
        for label, ent in by_wall.items():
            c = kinds.get(label, [label, "gilspy", []])
            args = " ".join(c[2]) if c[1] == "gilspy" else (c[1] + " " + " ".join(c[2])).strip()
            m = out.setdefault(label, {"args": args, "wl": {}})
            m["wl"][w] = {"wall": change(ent["ratios"]), "cpu_s": change(by_cpu.get(label, {}).get("ratios", {})),
                          "gilspy_cpu": statistics.median(ent["cpu"]) if ent["cpu"] else None,
                          "hz": statistics.median(ent["summary"]["rate_achieved_hz"])
                          if ent["summary"].get("rate_achieved_hz") else None,
                          "n": len(next(iter(ent["ratios"].values()), []))}
    return out, workloads


def change(ratios):
    """{role: [ratio per rep]} -> the median over reps of the mean over roles, as a change in %."""
    reps = list(zip(*ratios.values()))
    per_rep = [statistics.mean(r) for r in reps if not any(math.isnan(x) for x in r)]
    return 100 * (statistics.median(per_rep) - 1) if per_rep else None


def describe(cmp_rows, cost_doc):
    parts = []
    if cmp_rows:
        pys = sorted({r["python"] for r in cmp_rows}, key=lambda v: [int(x) if x.isdigit() else 0 for x in v.split(".")])
        wls = sorted({r["workload"] for r in cmp_rows})
        wins = sorted({round((r["window"][1] - r["window"][0]) / 1e9, 1) for r in cmp_rows if r.get("window")})
        parts.append(f"accuracy: compare.py, Python {', '.join(pys)}, workloads {','.join(wls)}, "
                     f"{'/'.join(f'{x:g}' for x in wins)} s windows")
    if cost_doc and cost_doc.get("throughput"):
        t = cost_doc["throughput"]
        pys = sorted({r["python"] for r in t})
        parts.append(f"cost: cost.py, Python {', '.join(pys)}, workloads {','.join(r['workload'] for r in t)}, "
                     f"{t[0]['reps']} reps of {t[0]['phase']:g} s phases")
    return "; ".join(parts)


def table(cmp_rows, cost_doc, max_foreign=None, legend=True):
    acc = accuracy(cmp_rows or [])
    cst, cost_wls = cost_of(cost_doc, max_foreign)
    labels = list(acc) + [lbl for lbl in cst if lbl not in acc]
    slow_wls = [w for w in cost_wls if w not in CPU_ONLY]
    cpu_wls = [w for w in cost_wls if w in CPU_ONLY]
    wls = " / ".join(ACC_WORKLOADS)
    head = ["mode", "gilspy args", f"max \\|Δhold\\| pp {wls}", f"max \\|Δwait\\| pp {wls}",
            "uprobes inside gilspy's 95 %", "verdict (hold ≤ 1, wait ≤ 3 pp)", f"poll Hz {wls}"]
    for w in slow_wls:
        head += [f"{w}: target %, wall (per CPU-s)", f"{w}: gilspy CPU %"]
    for w in cpu_wls:
        head += [f"{w} ({cost_wls[w]} threads): gilspy CPU %"]
    lines = []
    if cmp_rows or cost_doc:
        lines.append(describe(cmp_rows, cost_doc))
        lines.append("")
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join("---" for _ in head) + "|")
    for label in labels:
        a = acc.get(label)
        c = cst.get(label)
        args = (a or c)["args"]
        cells = [label, f"`{args}`" if args else "(defaults)"]
        if a:
            cells.append(" / ".join(fnum(a["wl"].get(w, {}).get("hold")) for w in ACC_WORKLOADS))
            cells.append(" / ".join(fnum(a["wl"].get(w, {}).get("wait")) for w in ACC_WORKLOADS))
            cells.append(f"{100 * sum(a['in_ci']) / len(a['in_ci']):.0f} % of {len(a['in_ci'])}" if a["in_ci"] else "-")
            cells.append(a["verdict"])
            cells.append(" / ".join(hz(statistics.median(a["wl"][w]["hz"]))
                                    if a["wl"].get(w, {}).get("hz") else "-" for w in ACC_WORKLOADS))
        else:
            cells += ["-", "-", "-", "not in compare.json" if cmp_rows else "-", "-"]
        for w in slow_wls:
            e = (c or {}).get("wl", {}).get(w)
            if e:
                cells.append(f"{fnum(e['wall'], '{:+.1f}')} ({fnum(e['cpu_s'], '{:+.1f}')})")
                cells.append(fnum(e["gilspy_cpu"] and 100 * e["gilspy_cpu"], "{:.1f}"))
            else:
                cells += ["-", "-"]
        for w in cpu_wls:
            e = (c or {}).get("wl", {}).get(w)
            cells.append(fnum(e["gilspy_cpu"] and 100 * e["gilspy_cpu"], "{:.1f}") if e else "-")
        lines.append("| " + " | ".join(cells) + " |")
    if legend:
        lines += ["",
                  "max |Δhold|, |Δwait|: worst over the interpreters of the largest per-thread difference from the uprobes "
                  "(pp of the window, 'adj': the uretprobe's own cost moved from their wait to their hold). "
                  "Uprobes inside: thread-windows whose adj hold and wait both lie within gilspy's 95 % interval. "
                  "Poll Hz: gilspy's mean rate (summary rate_achieved_hz), median over the interpreters. "
                  "Target %: change of the target's throughput against the untraced phases around each traced one, "
                  "median over the reps (each rep: mean over the workload's thread roles); in brackets per second of "
                  "the target's own CPU time (steadier on a shared machine). gilspy CPU: % of one core, median over "
                  "the reps. '-': not measured."]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compare", help="compare.py's --json-out ('' for none)", default=os.path.join(cost.benchlib.ROOT, "build", "bench", "compare.json"))
    ap.add_argument("--cost", help="cost.py's --json-out ('' for none)", default=os.path.join(cost.benchlib.ROOT, "build", "bench", "cost.json"))
    ap.add_argument("--max-foreign", type=float, default=None,
                    help="leave out cost pairs in which other jobs used more than this many cores")
    ap.add_argument("--no-legend", action="store_true")
    args = ap.parse_args()
    cmp_rows, cost_doc = load(args.compare), load(args.cost)
    if cmp_rows is None and cost_doc is None:
        cost.benchlib.die(f"neither '{args.compare}' nor '{args.cost}' exists")
    print(table(cmp_rows, cost_doc, args.max_foreign, not args.no_legend))
    return 0


if __name__ == "__main__":
    sys.exit(main())
