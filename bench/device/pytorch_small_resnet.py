#!/usr/bin/env python3
"""PyTorch's run of issue 4's accuracy recipe, for the spread over seeds beside fresco's
(jobs/small_resnet_bf16_fashion_mnist.json, CudaEndToEnd.SmallResnetBf16Reaches938OnFashionMnist).

The recipe as the issue and the job file state it: a 3x3 conv of 32 + BN + ReLU, then two basic blocks at
each of the widths 32, 64 (stride 2) and 128 (stride 2), projection shortcuts (1x1 conv + BN) where the shape
changes, global average pool, fc; Fashion-MNIST normalised by mean 0.286 and std 0.353 (fresco's default),
no augmentation; SGD Nesterov (momentum 0.9) lr 0.1, weight decay 5e-4 on every parameter; cross entropy with
label smoothing 0.1; batch 128 (469 steps an epoch, the last of 96 samples, as fresco's); lr warmed
up linearly per step over the first epoch ((s + 1) / warmup_steps), then cosine per step to 0 over the other
14 epochs (fresco's fr_schedule_lr); 15 epochs in bf16 autocast, channels-last. PyTorch's own default
initialisation (fresco's init is the same distribution, not the same draw, so single seeds do not pair up).

Usage: python3 pytorch_small_resnet.py DATA_DIR [SEED ...]  (prints one JSON line per seed; $OUT gets them)
"""
import gzip
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from torch_resnets import small_resnet


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def run(data_dir, seed, epochs=15, batch=128, lr=0.1):
    dev = torch.device("cuda")
    torch.manual_seed(seed)
    load = lambda name: idx(os.path.join(data_dir, name))
    norm = lambda a: ((torch.from_numpy(a.astype(np.float32)) / 255.0 - 0.286) / 0.353).unsqueeze(1)
    xtr, ytr = norm(load("train-images-idx3-ubyte.gz")).to(dev), torch.from_numpy(
        load("train-labels-idx1-ubyte.gz").astype(np.int64)).to(dev)
    xte, yte = norm(load("t10k-images-idx3-ubyte.gz")).to(dev), torch.from_numpy(
        load("t10k-labels-idx1-ubyte.gz").astype(np.int64)).to(dev)
    xtr = xtr.contiguous(memory_format=torch.channels_last)
    xte = xte.contiguous(memory_format=torch.channels_last)
    model = small_resnet().to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    steps_per_epoch = (xtr.shape[0] + batch - 1) // batch
    warm, total = steps_per_epoch, epochs * steps_per_epoch

    def lr_at(s):
        if s < warm:
            return lr * (s + 1) / warm
        return lr * 0.5 * (1.0 + math.cos(math.pi * min(s - warm, total - warm) / (total - warm)))

    step, t0, acc = 0, time.perf_counter(), 0.0
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(xtr.shape[0], device=dev)
        for i in range(steps_per_epoch):
            idxs = perm[i * batch:(i + 1) * batch]
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(xtr[idxs]), ytr[idxs], label_smoothing=0.1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
        model.eval()
        correct = 0
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            for i in range(0, xte.shape[0], 1000):
                correct += (model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum().item()
        acc = correct / xte.shape[0]
    return {"job": "small_resnet_fashion_mnist", "framework": "pytorch", "torch": torch.__version__,
            "dtype": "bf16", "seed": seed, "epochs": epochs, "test_top1": acc,
            "seconds": round(time.perf_counter() - t0, 1)}


if __name__ == "__main__":
    data_dir = sys.argv[1]
    for seed in [int(s) for s in sys.argv[2:]] or [1]:
        r = run(data_dir, seed)
        print(json.dumps(r), flush=True)
        if os.environ.get("OUT"):
            with open(os.path.join(os.environ["OUT"], "pytorch_small_resnet.json"), "a") as f:
                f.write(json.dumps(r) + "\n")
