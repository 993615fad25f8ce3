#!/usr/bin/env python3
"""Choose the CUDA plugin's fc GEMM or cuDNN convolution engine configurations by the time of the whole step.

The plugin picks each cuBLASLt configuration by timing the GEMM alone (ops/matmul_plan.cu) and keeps the pick
in its tuning cache (plugins/cuda/tuning/tuning_cache.h). Inside a step the GEMMs overlap each other on
several streams, and configurations that tie alone can differ by 10% of the step there (docs/performance.md).
This tool runs a benchmark command that prints a JSON line with "ms_step" (bench_mlp_epoch,
bench_resnet_step), reads every timed candidate from its log (FRESCO_CUBLAS_LOG=2), and for each fc GEMM of
the training batch, largest first, tries the next-fastest candidates in the whole step by rewriting that
problem's cache entry (a later line for a key replaces an earlier one). A candidate is kept when the step
gets faster by more than --keep percent. Every later run on the machine reads the file and so uses the
step-tuned choices.

Usage: scripts/tune_step.py --cache FILE --batch N [--passes 2] [--top 4] [--layouts 10,00] -- COMMAND [ARGS...]
  e.g. scripts/tune_step.py --cache ~/.cache/fresco/cuda-tuning.tsv --batch 1024 -- \\
       build/bin/bench_mlp_epoch --device cuda --batch 1024 --epochs 1 --steps 3000
--batch selects the problems of the training batch: a forward or input gradient (layouts 01, 00) whose m is
N, a weight gradient (layout 10) whose k is N. Only the Python standard library is used.

With --convs the problems are the convolutions that run on cuDNN's backend engines (fp16 / bf16): the first
run tunes them afresh into a scratch cache file with FRESCO_CUDNN_LOG=2 (so every engine candidate is timed
and logged; its entries are then appended to --cache), and each convolution shape and direction, the slowest
first, tries its next-fastest engines in the whole step. One engine plan serves every node of a shape and
direction, so a trial changes all of them. --batch is not used.
  e.g. scripts/tune_step.py --cache FILE --convs --top 3 -- build/bin/bench_resnet_step --model resnet18 \\
       --batch 512 --precision fp16
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys

HEADER = "# fresco CUDA tuning cache v1"
CANDIDATE = re.compile(r"\[fresco-cuda\]   candidate (\S+) #(\d+)\t(.*)\t([-0-9.naif]+) us")
CONV_CANDIDATE = re.compile(r"\[fresco-cuda\]   conv candidate #(\d+)\t(.*)\t([-0-9.naif]+) us\t(.*)$")


def run_step(cmd, cache, log, timeout):
    env = dict(os.environ, FRESCO_CUDA_TUNING_CACHE=cache, FRESCO_CUBLAS_LOG=str(log),
               FRESCO_CUDNN_LOG=str(log))
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        sys.exit(f"tune_step: {' '.join(cmd)} ran past --timeout {timeout:g} s")
    if r.returncode != 0:
        sys.exit(f"tune_step: {' '.join(cmd)} exited with {r.returncode}:\n{r.stderr[-2000:]}")
    ms = None
    for line in r.stdout.splitlines():  # the last JSON line of a *_step benchmark with ms_step
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if isinstance(j, dict) and "ms_step" in j and str(j.get("bench", "")).endswith("_step"):
            ms = float(j["ms_step"])
    if ms is None:
        sys.exit(f"tune_step: {' '.join(cmd)} printed no JSON line with ms_step")
    return ms, r.stderr


def cache_entries(path):
    """The last line of each key: key -> [key, index, description, times]."""
    last = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            fields = line.rstrip("\n").split("\t")
            if len(fields) == 4:
                last[fields[0]] = fields
    return last


def logged_candidates(log, pattern, key, index, desc, us):
    """problem -> {candidate index: (description, microseconds alone)} from the lines of a log that match
    pattern (key, index, desc, us: the groups holding each)."""
    cands = {}
    for line in log.splitlines():
        m = pattern.match(line)
        if m:
            cands.setdefault(m.group(key), {})[int(m.group(index))] = (m.group(desc), float(m.group(us)))
    return cands


def conv_entry_for(key, cands, entries):
    """The cache entry of a convolution's engine (its key is the logged one) when it names a logged candidate."""
    e = entries.get(key)
    return e if e and e[1].isdigit() and int(e[1]) in cands and cands[int(e[1])][0] == e[2] else None


def conv_times(entry, us):
    """The times field of a convolution entry for a candidate that took `us` alone: its milliseconds, and for an
    engine with statistics the separate sums pass's time the entry holds (what the choice against it uses)."""
    rest = entry[3].split(",")[1:]
    return ",".join([repr(us / 1000.0)] + rest)


def entry_for(problem, cands, entries):
    """The cache entry this machine's run uses for the problem: the one whose times cover exactly the logged
    candidates and whose chosen description is the logged one (a file may also hold other machines' or
    settings' entries for the same problem)."""
    fits = [e for k, e in entries.items() if problem_of(k) == problem and len(e[3].split(",")) == len(cands)
            and e[1].isdigit() and int(e[1]) in cands and cands[int(e[1])][0] == e[2]]
    if len(fits) > 1:
        sys.exit(f"tune_step: {len(fits)} cache entries fit {problem} (other machines or settings with the same "
                 "candidates); tune with a cache file of this machine and settings only")
    return fits[0] if fits else None


def problem_of(key):
    """'matmul MACHINE 10,512,1024,1024,00 autotune ...' -> '10,512,1024,1024,00' (None for other keys)."""
    parts = key.split(" ")
    return parts[2] if len(parts) > 2 and parts[0] == "matmul" else None


def in_batch(problem, batch):
    layout, m, n, k = problem.split(",")[:4]
    return int(k) == batch if layout.startswith("1") else int(m) == batch


def macs(problem):
    _, m, n, k = problem.split(",")[:4]
    return int(m) * int(n) * int(k)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", required=True, help="tuning cache file (created when missing)")
    ap.add_argument("--batch", type=int, help="training batch of the step (fc GEMMs; required without --convs)")
    ap.add_argument("--convs", action="store_true", help="tune the convolution engines instead of fc GEMMs")
    ap.add_argument("--min-us", type=float, default=10.0, help="--convs: fastest time alone of the smallest "
                    "convolution tried, in microseconds (default 10)")
    ap.add_argument("--passes", type=int, default=2, help="sweeps over the problems (default 2)")
    ap.add_argument("--top", type=int, default=4, help="candidates tried per problem and pass (default 4)")
    ap.add_argument("--keep", type=float, default=0.3, help="percent the step must gain (default 0.3)")
    ap.add_argument("--min-macs", type=float, default=2**26, help="smallest problem tried (default 2^26)")
    ap.add_argument("--layouts", default="", help="only these GEMM layouts, e.g. 10,00 (10: weight "
                    "gradients, 00: input gradients, 01: forwards; default all)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per benchmark run (default 300)")
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- benchmark command")
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("give the benchmark command after --")
    if not a.convs and a.batch is None:
        ap.error("--batch is required (or tune the convolutions with --convs)")
    if a.passes < 1 or a.top < 1:
        ap.error("--passes and --top must be at least 1")
    if a.keep < 0 or a.timeout <= 0:
        ap.error("--keep must be 0 or more and --timeout positive")
    layouts = [x for x in a.layouts.split(",") if x]
    if any(x not in ("00", "01", "10", "11") for x in layouts):
        ap.error(f"--layouts takes 00, 01, 10 or 11 separated by commas, found {a.layouts!r}")
    # SIGTERM (a timeout around this tool) ends it like Ctrl-C: the trial file is removed, the cache keeps
    # only decided choices.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("tune_step: terminated"))

    if a.convs:  # every convolution timed afresh (a cache hit logs no candidates), then kept in the cache
        fresh = a.cache + ".tune_step_fresh"
        if os.path.exists(fresh):
            os.remove(fresh)
        first, log = run_step(cmd, fresh, 2, a.timeout)
        cands = logged_candidates(log, CONV_CANDIDATE, 4, 1, 2, 3)
        if not os.path.exists(fresh):
            sys.exit(f"tune_step: {fresh} was not written (is the CUDA plugin loaded, the cache writable?)")
        if not os.path.exists(a.cache):
            shutil.copy(fresh, a.cache)  # with the plugin's own header line
        else:
            with open(fresh) as f:
                lines = [x for x in f if not x.startswith("#")]
            with open(a.cache, "a") as f:  # later lines replace earlier ones
                f.writelines(lines)
        os.remove(fresh)
    else:
        first, log = run_step(cmd, a.cache, 2, a.timeout)  # tunes alone where the cache has no entry yet
        cands = logged_candidates(log, CANDIDATE, 1, 2, 3, 4)
    if not os.path.exists(a.cache):
        sys.exit(f"tune_step: {a.cache} was not written (is the CUDA plugin loaded, the cache writable?)")
    with open(a.cache) as f:
        if not f.readline().startswith(HEADER):
            sys.exit(f"tune_step: {a.cache} is not a fresco CUDA tuning cache (no header line)")
    entries = cache_entries(a.cache)
    if a.convs:
        chosen = {p: e for p in cands if (e := conv_entry_for(p, cands[p], entries))}

        def alone(p):
            return cands[p][int(chosen[p][1])][1]

        problems = sorted((p for p in chosen if alone(p) >= a.min_us), key=alone, reverse=True)
        if not problems:
            sys.exit("tune_step: no timed convolution engine in the log (FRESCO_CUDNN_LOG=2)")
    else:
        chosen = {p: e for p in cands if (e := entry_for(p, cands[p], entries))}  # problem -> current entry
        problems = sorted((p for p in chosen if in_batch(p, a.batch) and macs(p) >= a.min_macs
                           and (not layouts or p.split(",")[0] in layouts)), key=macs, reverse=True)
        if not problems:
            sys.exit("tune_step: no timed fc GEMM of that batch in the log (FRESCO_CUBLAS_LOG=2)")
    # Trials go to a copy; the cache itself gets only decided choices, so it is valid whenever the tool stops.
    trial = a.cache + ".tune_step"
    shutil.copy(a.cache, trial)
    try:
        best, _ = run_step(cmd, trial, 0, a.timeout)
        start = best
        print(f"tune_step: {len(problems)} problems; step {first:.5f} ms on the first run, {best:.5f} ms "
              "cached", flush=True)

        def write(path, p, index):
            entry = chosen[p]
            times = conv_times(entry, cands[p][index][1]) if a.convs else entry[3]
            with open(path, "a") as f:
                f.write("\t".join([entry[0], str(index), cands[p][index][0], times]) + "\n")

        for sweep in range(a.passes):
            changed = False
            for p in problems:
                current, c = int(chosen[p][1]), cands[p]
                order = sorted((i for i in c if c[i][1] > 0 and i != current), key=lambda i: c[i][1])[: a.top]
                tried = []
                keep = current
                for i in order:
                    write(trial, p, i)
                    t, _ = run_step(cmd, trial, 0, a.timeout)
                    tried.append(f"#{i} ({c[i][1]:.2f} us alone) {t:.5f}")
                    if t < best * (1 - a.keep / 100):
                        best, keep = t, i
                write(trial, p, keep)
                if keep != current:
                    write(a.cache, p, keep)
                    chosen[p][1] = str(keep)
                    changed = True
                name = p.split(" ", 2)[2] if a.convs else p  # a conv key without "conv MACHINE"
                print(f"pass {sweep + 1} {name}: was #{current} ({c[current][1]:.2f} us alone); tried "
                      + ", ".join(tried) + f"; keeps #{keep}; step {best:.5f} ms", flush=True)
            if not changed:
                break
    finally:
        if os.path.exists(trial):
            os.remove(trial)
    print(f"tune_step: step {start:.5f} -> {best:.5f} ms; choices in {a.cache}")


if __name__ == "__main__":
    main()
