#!/usr/bin/env python3
"""Replays an SGD golden case's model in PyTorch (CPU) to measure how far float rounding alone moves its losses.

Prints, per step, the relative loss difference to the recording for PyTorch with 1 and 2 CPU threads and for
PyTorch after a 1e-7 relative change of the initial weights. Used to show that resnet_sgd's trajectory
amplifies rounding beyond the manifest's 1e-4 after step 1 (docs/decisions.md). A check tool only: it needs
`pip install torch numpy`; fresco never uses torch.

usage: scripts/golden_sensitivity.py ../shared/golden/resnet_sgd
"""
import copy
import json
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def load(case):
    m = json.load(open(case + "/manifest.json"))
    raw = open(case + "/data.bin", "rb").read()
    dts = {"f32": np.float32, "i32": np.int32, "u8": np.uint8}

    def t(name):
        e = m["tensors"][name]
        a = np.frombuffer(raw, dtype=dts[e["dtype"]], count=int(np.prod(e["shape"])), offset=e["offset"])
        return torch.from_numpy(a.reshape(e["shape"]).copy())

    return m, t


class Residual(nn.Module):
    def __init__(self, main, shortcut):
        super().__init__()
        self.main = nn.Sequential(*main)
        self.shortcut = nn.Sequential(*shortcut) if shortcut is not None else None

    def forward(self, x):
        return self.main(x) + (self.shortcut(x) if self.shortcut is not None else x)


def build(spec, c):
    mods = []
    for layer in spec:
        k = layer["layer"]
        if k == "conv":
            mods.append(nn.Conv2d(c, layer["out"], layer["k"], layer.get("stride", 1), layer.get("pad", 0),
                                  bias=layer.get("bias", False)))
            c = layer["out"]
        elif k == "bn":
            mods.append(nn.BatchNorm2d(c))
        elif k == "relu":
            mods.append(nn.ReLU())
        elif k == "gelu":
            mods.append(nn.GELU())
        elif k == "maxpool":
            mods.append(nn.MaxPool2d(layer["k"]))
        elif k == "gap":
            mods.append(nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten()))
        elif k == "fc":
            mods.append(nn.Linear(c, layer["out"]))
            c = layer["out"]
        elif k == "residual":
            main, c2 = build(layer["main"], c)
            shortcut = build(layer["shortcut"], c)[0] if "shortcut" in layer else None
            mods.append(Residual(main, shortcut))
            c = c2
        else:
            raise SystemExit(f"layer {k} is not handled by this tool")
    return mods, c


def main():
    case = sys.argv[1]
    m, t = load(case)
    o = m["optimizer"]
    if o["type"] != "sgd":
        raise SystemExit("this tool replays SGD cases only")
    x = t("data").float().permute(0, 3, 1, 2) / 255.0
    mean = torch.tensor(m["input"]["normalize"]["mean"]).view(1, -1, 1, 1)
    std = torch.tensor(m["input"]["normalize"]["std"]).view(1, -1, 1, 1)
    x = (x - mean) / std
    y = t("labels").long()
    net = nn.Sequential(*build(m["model"], x.shape[1])[0])
    init = {}
    for k in m["tensors"]:
        if k.startswith("init/"):
            path, param = k[5:].rsplit("/", 1)
            init[path + "." + param] = t(k)
    net.load_state_dict(init, strict=False)
    init = copy.deepcopy(net.state_dict())
    smooth = m["loss"].get("label_smoothing", 0.0)
    b = m["batch"]
    passes = (x.shape[0] + b - 1) // b

    def run(state):
        net.load_state_dict(state)
        one_d = [p for p in net.parameters() if p.ndim == 1 and o.get("no_decay_1d")]
        rest = [p for p in net.parameters() if not any(p is q for q in one_d)]
        opt = torch.optim.SGD([{"params": rest, "weight_decay": o["weight_decay"]},
                               {"params": one_d, "weight_decay": 0.0}], lr=o["lr"], momentum=o["momentum"],
                              nesterov=o["nesterov"])
        out = []
        for s, lr in enumerate(m["lr_per_step"]):
            for g in opt.param_groups:
                g["lr"] = lr
            i = s % passes
            loss = F.cross_entropy(net(x[i * b:(i + 1) * b]), y[i * b:(i + 1) * b], label_smoothing=smooth)
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out

    def show(label, losses):
        rel = [abs(a - w) / abs(w) for a, w in zip(losses, m["losses"])]
        print(f"{label:22s} " + " ".join(f"{r:.1e}" for r in rel))

    print("relative loss difference to the recording, steps 0..", len(m["losses"]) - 1)
    for threads in (1, 2):
        torch.set_num_threads(threads)
        show(f"pytorch {threads} thread(s)", run(init))
    torch.manual_seed(0)
    nudged = {k: v * (1 + 1e-7 * torch.randn_like(v)) if v.is_floating_point() else v for k, v in init.items()}
    torch.set_num_threads(1)
    show("init * (1 + 1e-7 N)", run(nudged))


if __name__ == "__main__":
    main()
