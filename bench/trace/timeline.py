#!/usr/bin/env python3
"""Summarise a CUPTI trace (bench/trace/cupti_trace.cpp) of replayed CUDA graphs.

Usage: timeline.py TRACE.csv [--last N] [--classes]
Groups the records by graph launch (they share the launch's correlation id), takes the last N launches
(default 50) of the largest graph (with whatever other graph starts inside each), and prints: the replay span and the gap to the next replay (medians), how much of the span has no kernel
running, and one line per graph node in start order with its median start offset, duration and stream, and the
idle time before it when nothing else ran. With --classes it then adds the median durations by kernel class
(the kernel's name without namespace and template arguments; cuDNN's by direction), before and from the
first loss kernel (the forward and the backward with the update), which is how two timelines compare.
"""
import collections
import csv
import statistics
import sys


def main():
    path = sys.argv[1]
    last = int(sys.argv[sys.argv.index("--last") + 1]) if "--last" in sys.argv else 50
    launches = collections.defaultdict(list)
    with open(path) as f:
        for r in csv.DictReader(f):
            if int(r["graph_node"]) == 0:
                continue
            r["start"], r["end"] = int(r["start_ns"]), int(r["end_ns"])
            launches[int(r["correlation"])].append(r)
    # Graphs with the same nodes (the A / B variants of a step) are one kind: a launch's signature is its node
    # names in node-id order, a node's key its signature and its id less the launch's first id. A step is one
    # launch of the largest kind launched at least `last` times, with every other launch that starts inside it.
    def signature(rs):
        return tuple(r["name"] for r in sorted(rs, key=lambda r: int(r["graph_node"])))

    if not launches:
        sys.exit(f"{path}: no records from replayed graphs")
    sig = {c: signature(rs) for c, rs in launches.items()}
    count = collections.Counter(sig.values())
    main_sig = max(count, key=lambda k: (count[k] >= last, len(k), count[k]))
    begin = {c: min(r["start"] for r in rs) for c, rs in launches.items()}
    finish = {c: max(r["end"] for r in rs) for c, rs in launches.items()}
    mains = sorted((c for c in launches if sig[c] == main_sig), key=begin.get)[-last:]
    others = sorted((c for c in launches if sig[c] != main_sig), key=begin.get)
    steps = [[m] + [c for c in others if begin[m] <= begin[c] <= finish[m]] for m in mains]
    period = len(mains)
    spans, gaps, idles = [], [], []
    per_node = collections.defaultdict(lambda: {"off": [], "dur": [], "idle": []})
    prev_end = None
    for step in steps:
        rs = sorted((r for c in step for r in launches[c]), key=lambda r: r["start"])
        first = {c: min(int(r["graph_node"]) for r in launches[c]) for c in step}
        t0, t1 = rs[0]["start"], max(r["end"] for r in rs)
        spans.append(t1 - t0)
        if prev_end is not None:
            gaps.append(t0 - prev_end)
        prev_end = t1
        covered_to = t0
        idle = 0
        for r in rs:
            gap = max(0, r["start"] - covered_to)
            idle += gap
            covered_to = max(covered_to, r["end"])
            c = int(r["correlation"])
            n = per_node[(sig[c], int(r["graph_node"]) - first[c])]
            n["off"].append(r["start"] - t0)
            n["dur"].append(r["end"] - r["start"])
            n["idle"].append(gap)
            n["name"], n["stream"], n["kind"] = r["name"], r["stream"], r["kind"]
            n["grid"] = r["grid"]
        idles.append(idle)
    nodes = per_node
    med = statistics.median
    print(f"{len(main_sig)}-node step graph, {len(nodes)} nodes with what starts inside it, {len(steps)} steps: span {med(spans)/1e3:.1f} us (min "
          f"{min(spans)/1e3:.1f}), gap to the next step {med(gaps)/1e3 if gaps else 0:.1f} us, nothing running "
          f"for {med(idles)/1e3:.1f} us of the span")
    total = 0
    print(f"{'start':>8} {'dur':>7} {'idle':>6} {'strm':>4} {'grid':>6}  name")
    for n in sorted(per_node.values(), key=lambda n: med(n["off"])):
        total += med(n["dur"])
        print(f"{med(n['off'])/1e3:8.1f} {med(n['dur'])/1e3:7.1f} {med(n['idle'])/1e3:6.1f} {n['stream']:>4} "
              f"{n['grid']:>6}  {n['kind'][0]} {n['name'][:90]}")
    print(f"sum of median node durations {total/1e3:.1f} us")
    if "--classes" in sys.argv:
        print_classes(sorted(per_node.values(), key=lambda n: med(n["off"])))


def kernel_class(name):
    """A kernel's name without namespace and template or call arguments; cuDNN's by direction."""
    for direction in ("fprop", "dgrad", "wgrad"):
        if "xmma" in name and direction in name:
            return "cudnn " + direction
    if "warp_specialized_kernel" in name:
        return "cudnn fused (genstats)"
    name = name.replace("void ", "").replace("fresco::cuda::(anonymous namespace)::", "")
    return name.split("<")[0].split("(")[0][:48]


def print_classes(nodes):
    med = statistics.median
    loss = next((med(n["off"]) for n in nodes if "softmax_xent" in n["name"]), None)
    parts = {"forward": collections.Counter(), "backward": collections.Counter()}
    counts = {"forward": collections.Counter(), "backward": collections.Counter()}
    for n in nodes:
        part = "forward" if loss is None or med(n["off"]) < loss else "backward"
        parts[part][kernel_class(n["name"])] += med(n["dur"])
        counts[part][kernel_class(n["name"])] += 1
    for part in ("forward", "backward"):
        print(f"{part}: {sum(parts[part].values())/1e3:.1f} us of kernels by class (count)")
        for k, v in parts[part].most_common():
            print(f"  {v/1e3:8.1f} {counts[part][k]:4d}  {k}")


if __name__ == "__main__":
    main()
