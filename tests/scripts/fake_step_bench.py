#!/usr/bin/env python3
"""A stand-in for a CUDA step benchmark (tests/scripts/test_tune_step.py): it keeps a tuning cache in the
CUDA plugin's format (plugins/cuda/tuning/tuning_cache.h), picks the fastest-alone candidate for problems the
cache does not hold, logs every candidate as FRESCO_CUBLAS_LOG=2 does, and prints a step time that depends on
the choices (the step-time table below), like bench_mlp_epoch's JSON lines."""
import json
import os
import sys

MACHINE = "FAKE_GPU/sm90x132/cuda13000"
# problem -> [(description, time alone in us, what the step pays for it in us)]
PROBLEMS = {
    "10,1024,784,1024,00": [("algo 55 tile 18 split 1", 51.30, 0.0), ("algo 20 tile 23 split 4", 51.33, 25.0),
                            ("algo 55 tile 15 split 1", 54.00, 14.0), ("algo 20 tile 24 split 4", 51.21, 25.0)],
    "01,1024,512,1024,11": [("algo 55 tile 17 split 1", 33.76, 0.0), ("algo 55 tile 20 split 2", 33.90, 1.2),
                            ("algo 55 tile 18 split 3", 33.88, 0.4), ("algo 55 tile 20 split 4", 33.19, 1.7)],
    "01,608,1024,784,11": [("algo 55 tile 17 split 1", 33.98, 0.0), ("algo 55 tile 18 split 3", 33.19, 0.0)],
    "00,1024,10,256,00": [("algo 55 tile 12 split 1", 2.10, 0.0), ("algo 55 tile 15 split 1", 2.00, 0.0)],
}


def key(problem):
    return f"matmul {MACHINE} {problem} autotune 2 own 0 ws 33554432 ties splits"


def main():
    path = os.environ["FRESCO_CUDA_TUNING_CACHE"]
    log = int(os.environ.get("FRESCO_CUBLAS_LOG", "0"))
    chosen = {}
    if os.path.exists(path):
        with open(path) as lines:
            for line in lines:
                f = line.rstrip("\n").split("\t")
                if not line.startswith("#") and len(f) == 4:
                    chosen[f[0]] = (int(f[1]), f[2])
    new = []
    pick = {}
    for p, cands in PROBLEMS.items():
        hit = chosen.get(key(p))
        if hit and hit[0] < len(cands) and cands[hit[0]][0] + " ws 0" == hit[1]:
            pick[p] = hit[0]
        else:  # "tune": the fastest alone
            pick[p] = min(range(len(cands)), key=lambda i: cands[i][1])
            times = ",".join(str(c[1]) for c in cands)
            new.append(f"{key(p)}\t{pick[p]}\t{cands[pick[p]][0]} ws 0\t{times}\n")
        if log >= 2:
            for i, c in enumerate(cands):
                print(f"[fresco-cuda]   candidate {p} #{i}\t{c[0]} ws 0\t{c[1]:.2f} us",
                      file=sys.stderr)
    if new:
        fresh = not os.path.exists(path)
        with open(path, "a") as f:
            if fresh:
                f.write("# fresco CUDA tuning cache v1: key, index, description, times\n")
            f.writelines(new)
    step = 0.25 + sum(PROBLEMS[p][i][2] for p, i in pick.items()) / 1000.0
    print(json.dumps({"bench": "mlp_epoch", "ms_step": 9.99}))
    print(json.dumps({"bench": "mlp_step", "ms_step": round(step, 5)}))


if __name__ == "__main__":
    main()
