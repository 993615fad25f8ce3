#!/usr/bin/env python3
"""Feeds `fresco plan` (and, with --train, `fresco train`) job files mutated at random and reports every run
that ends other than with success or a one-line `fresco: error:` (a signal, a sanitizer report, an uncaught
exception). Meant for the sanitizer build (`cmake --preset debug`), where a memory error becomes a report
instead of silence. A check tool for developers; CI does not run it.

Each job is a small residual network on Fashion-MNIST (conv, bn, relu, residual, pools, grouped conv, gelu,
dropout, flatten, fc) with one to --mutations changes: a field set to a plausible value (a small shape) or to
an extreme or wrongly typed one, a field removed, a layer renamed, a list shuffled, shortened or lengthened, a subtree copied elsewhere. Jobs
that fail are kept as bad_SEED_N.json in --work. With --golden CASE_DIR it mutates that golden case's
manifest instead (values replaced or removed, lists cut or grown, data.bin cut short one time in five) and
replays two steps with `fresco golden`, where a FAIL line is a clean end too. With --dataset FOLDER (a
Fashion-MNIST folder of IDX .gz files) it damages one of the four files (cut short, bytes of the header or
body changed, bytes added, or the gzip stream itself cut) and trains jobs/mlp_fashion_mnist.json on it.

usage: scripts/fuzz_jobs.py [--build build-debug] [--seed 1] [--count 200] [--mutations 4] [--train]
                            [--golden tests/data/golden/mlp_adamw | --dataset /usr/share/datasets/fashion-mnist]
                            [--work /tmp/fresco-fuzz]
"""
import argparse
import copy
import gzip
import json
import os
import random
import subprocess

BASE_MODEL = [
    {"layer": "conv", "out": 8, "k": 3, "pad": 1}, {"layer": "bn"}, {"layer": "relu"},
    {"layer": "residual", "main": [{"layer": "conv", "out": 8, "k": 3, "pad": 1}, {"layer": "bn"},
                                   {"layer": "relu"}, {"layer": "conv", "out": 8, "k": 3, "pad": 1},
                                   {"layer": "bn"}]},
    {"layer": "relu"}, {"layer": "maxpool", "k": 2},
    {"layer": "conv", "out": 16, "k": 3, "stride": 2, "groups": 8, "pad": 1},
    {"layer": "gelu"}, {"layer": "dropout", "p": 0.1}, {"layer": "avgpool", "k": 2}, {"layer": "flatten"},
    {"layer": "fc", "out": 10}]
BASE_JOB = {"name": "fuzz", "model": BASE_MODEL, "data": {"dataset": "fashion-mnist"}, "batch_size": 64,
            "epochs": 1, "seed": 1, "device": "cpu", "precision": "fp32",
            "loss": {"type": "cross_entropy", "label_smoothing": 0.1},
            "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 5e-4},
            "scheduler": {"type": "cosine", "warmup_epochs": 1}}
VALUES = [0, -1, 1, 2, 3, 7, 2**31 - 1, 2**31, -2**31, 2**63 - 1, 2**64, 1e300, -1e300, 0.5, float("nan"), "x",
          "", None, True, [], {}, [1], {"a": 1}, 1e-45, 65536, 1 << 20]
KEYS = ["out", "k", "pad", "stride", "groups", "dilation", "p", "bias", "layer", "main", "shortcut", "momentum",
        "eps", "in", "relu", "dim", "lr", "batch_size", "epochs", "warmup_epochs", "label_smoothing",
        "weight_decay", "type"]
PLAUSIBLE = [1, 2, 3, 4, 5, 8, 16, 0.25]  # values a field may well take: shapes that compile and run
LAYERS = ["conv", "bn", "relu", "gelu", "silu", "sigmoid", "tanh", "maxpool", "avgpool", "gap", "flatten", "fc",
          "dropout", "residual", "concat", "cbr", "basic_block", "bottleneck", "custom", "nope"]


def containers(x, out):
    if isinstance(x, (dict, list)):
        out.append(x)
        for v in (x.values() if isinstance(x, dict) else x):
            containers(v, out)
    return out


def mutate(job, rng, most):
    for _ in range(rng.randint(1, most)):
        all_nodes = containers(job, [])
        n = rng.choice(all_nodes)
        r = rng.random()
        if isinstance(n, dict):
            if r < 0.5:
                key = rng.choice(list(n) if n and rng.random() < 0.7 else KEYS)
                n[key] = copy.deepcopy(rng.choice(PLAUSIBLE if rng.random() < 0.5 else VALUES))
            elif r < 0.65 and n:
                n.pop(rng.choice(list(n)))
            elif r < 0.85:
                n["layer"] = rng.choice(LAYERS)
            else:
                n[rng.choice(KEYS)] = copy.deepcopy(rng.choice(all_nodes))
        elif r < 0.3 and n:
            n.pop(rng.randrange(len(n)))
        elif r < 0.6 and n:
            n.insert(rng.randrange(len(n) + 1), copy.deepcopy(rng.choice(n)))
        elif r < 0.8:
            n.append({"layer": rng.choice(LAYERS)})
        elif n:
            rng.shuffle(n)
    return job


def clean(proc):
    """Success, or a refusal the user can read: one `fresco: error:` (or a golden FAIL) and no sanitizer
    report or signal."""
    err = proc.stderr
    if "Sanitizer" in err or "runtime error" in err:
        return False
    said = "fresco: error:" in err or "FAIL" in proc.stdout
    return proc.returncode == 0 or (0 < proc.returncode < 128 and said)


def report_bad(a, i, text, what, proc):
    """Keeps the input that failed as bad_SEED_I.json in --work and prints how the run ended."""
    kept = os.path.join(a.work, f"bad_{a.seed}_{i}.json")
    with open(kept, "w") as f:
        f.write(text)
    print(f"BAD {kept}: {what} exit {proc.returncode}\n{proc.stderr[-2000:]}", flush=True)


def mutate_manifest(m, rng, most):
    for _ in range(rng.randint(1, most)):
        n = rng.choice(containers(m, []))
        if isinstance(n, dict) and n:
            key = rng.choice(list(n))
            if rng.random() < 0.8:
                n[key] = copy.deepcopy(rng.choice(PLAUSIBLE + [0] if rng.random() < 0.3 else VALUES))
            else:
                n.pop(key)
        elif isinstance(n, list) and n:
            r = rng.random()
            if r < 0.4:
                n.pop(rng.randrange(len(n)))
            elif r < 0.7:
                n[rng.randrange(len(n))] = copy.deepcopy(rng.choice(VALUES))
            else:
                n.append(copy.deepcopy(rng.choice(n)))
    return m


def fuzz_golden(a, exe, env, rng):
    with open(os.path.join(a.golden, "manifest.json")) as f:
        base = json.load(f)
    with open(os.path.join(a.golden, "data.bin"), "rb") as f:
        data = f.read()
    case = os.path.join(a.work, "case")
    os.makedirs(case, exist_ok=True)
    bad = 0
    for i in range(a.count):
        text = json.dumps(mutate_manifest(copy.deepcopy(base), rng, a.mutations))
        with open(os.path.join(case, "manifest.json"), "w") as f:
            f.write(text)
        with open(os.path.join(case, "data.bin"), "wb") as f:
            f.write(data[:rng.randrange(len(data))] if rng.random() < 0.2 else data)
        proc = subprocess.run([exe, "golden", case, "--steps", "2"], env=env, capture_output=True, text=True,
                              timeout=900, cwd=a.work)
        if not clean(proc):
            bad += 1
            report_bad(a, i, text, "golden", proc)
    print(f"{a.count} manifests: {bad} bad")
    return 1 if bad else 0


def damage(b, rng):
    b = bytearray(b)
    r = rng.random()
    if r < 0.3:
        return bytes(b[:rng.randrange(len(b))])
    if r < 0.7:
        for _ in range(rng.randint(1, 4)):
            k = rng.randrange(min(16, len(b))) if rng.random() < 0.7 else rng.randrange(len(b))
            b[k] = rng.randrange(256)
        return bytes(b)
    return bytes(b) + bytes(rng.randrange(100))


def fuzz_dataset(a, exe, env, rng):
    raw = {}
    for n in sorted(os.listdir(a.dataset)):
        if n.endswith(".gz"):
            with gzip.open(os.path.join(a.dataset, n)) as f:
                raw[n] = f.read()
    job = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "jobs", "mlp_fashion_mnist.json")
    folder = os.path.join(a.work, "data")
    os.makedirs(folder, exist_ok=True)
    bad = 0
    for i in range(a.count):
        victim = rng.choice(sorted(raw))
        for n, b in raw.items():
            z = gzip.compress(damage(b, rng) if n == victim else b, compresslevel=1)
            if n == victim and rng.random() < 0.15:
                z = z[:rng.randrange(len(z))]  # the gzip stream itself cut short
            with open(os.path.join(folder, n), "wb") as f:
                f.write(z)
        cmd = [exe, "train", job, "--data", folder, "--samples", "128", "--epochs", "1", "--device", "cpu"]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=a.work)
        if not clean(proc):
            bad += 1
            report_bad(a, i, victim, "train", proc)
    print(f"{a.count} damaged datasets: {bad} bad")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build-debug")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--mutations", type=int, default=4)
    ap.add_argument("--train", action="store_true", help="train 256 samples of each job that compiles")
    ap.add_argument("--golden", help="a golden case folder: fuzz its manifest instead of job files")
    ap.add_argument("--dataset", help="a Fashion-MNIST folder: damage its files instead of job files")
    ap.add_argument("--work", default="/tmp/fresco-fuzz")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    exe = os.path.join(build, "bin", "fresco")
    os.makedirs(a.work, exist_ok=True)
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "lib"), FRESCO_LOG="warn",
               ASAN_OPTIONS="detect_leaks=1", UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    rng = random.Random(a.seed)
    if a.golden:
        return fuzz_golden(a, exe, env, rng)
    if a.dataset:
        return fuzz_dataset(a, exe, env, rng)
    job_path = os.path.join(a.work, "job.json")
    bad = compiled = trained = 0
    for i in range(a.count):
        text = json.dumps(mutate(copy.deepcopy(BASE_JOB), rng, a.mutations))
        with open(job_path, "w") as f:
            f.write(text)
        runs = [[exe, "plan", job_path, "--svg", os.path.join(a.work, "plan.svg")]]
        if a.train:
            runs.append([exe, "train", job_path, "--samples", "256", "--epochs", "1"])
        for n, cmd in enumerate(runs):
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=a.work)
            if not clean(proc):
                bad += 1
                report_bad(a, i, text, cmd[1], proc)
                break
            if proc.returncode != 0:
                break
            compiled += n == 0
            trained += n == 1
    print(f"{a.count} jobs: {compiled} compiled, {trained} trained, {bad} bad")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
