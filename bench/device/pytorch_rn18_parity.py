#!/usr/bin/env python3
# PyTorch's own CPU vs CUDA parity on the job of jobs/resnet18_parity.json: ResNet-18 with the CIFAR stem on
# Fashion-MNIST (1x28x28), batch 32, SGD Nesterov lr 0.01 momentum 0.9 weight decay 5e-4 (none on 1-D
# parameters), label smoothing 0.1, 10 steps, fp32 (no TF32, deterministic cuDNN). Both devices start from the
# same weights and see the same batches; the script prints, per tensor, ||cpu - cuda|| / ||cpu|| after the last
# step, the per-step loss differences, and a summary per tensor kind, in the layout of `fresco parity`, so the
# two frameworks' CPU/CUDA divergence can be read side by side (same card, same call).
# RESYNC=1 starts every CUDA step from the CPU's weights, batchnorm statistics and momenta (as `fresco parity
# --resync`): each step's arithmetic compared on its own, the worst step per tensor. The table also lists the
# running statistics, which fresco's parity does not compare (its state is the weights, gradients and moments);
# the kinds to set side by side are the conv, bn and fc weights and biases.
# Usage: FMNIST=dir [STEPS=10] [OUT=dir] [DEV2=cpu] [RESYNC=1] python3 pytorch_rn18_parity.py
import gzip, json, os
import numpy as np
import torch, torch.nn.functional as F
from torch_resnets import resnet18

steps = int(os.environ.get("STEPS", "10"))
batch = 32
root = os.environ.get("FMNIST", "/usr/share/datasets/fashion-mnist")


def load(name, offset):
    with gzip.open(os.path.join(root, name), "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


images = load("train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)[: steps * batch].astype(np.float32)
labels = load("train-labels-idx1-ubyte.gz", 8)[: steps * batch].astype(np.int64)
images = (images / 255.0 - 0.2860) / 0.3530


def make_optimizer(model):
    decay = [p for p in model.parameters() if p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.dim() <= 1]
    return torch.optim.SGD([{"params": decay, "weight_decay": 5e-4}, {"params": no_decay, "weight_decay": 0.0}],
                           lr=0.01, momentum=0.9, nesterov=True)


def train_step(model, opt, device, s):
    x = torch.from_numpy(images[s * batch:(s + 1) * batch]).to(device)
    y = torch.from_numpy(labels[s * batch:(s + 1) * batch]).to(device)
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
    loss.backward()
    opt.step()
    return loss.item()


def state(model):
    return {k: v.detach().double().cpu() for k, v in model.state_dict().items()}


torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
torch.manual_seed(1)
init = resnet18()
dev2 = os.environ.get("DEV2", "cuda")  # DEV2=cpu: a self-check (all zero)
resync = os.environ.get("RESYNC", "0") == "1"  # every CUDA step starts from the CPU's weights and momenta
cpu_model, gpu_model = resnet18(), resnet18()
cpu_model.load_state_dict(init.state_dict())
gpu_model.load_state_dict(init.state_dict())
cpu_model, gpu_model = cpu_model.to("cpu"), gpu_model.to(dev2)
cpu_opt, gpu_opt = make_optimizer(cpu_model), make_optimizer(gpu_model)
cpu_losses, gpu_losses, worst = [], [], {}  # worst: per tensor, the largest difference compared
for s in range(steps):
    cpu_losses.append(train_step(cpu_model, cpu_opt, "cpu", s))
    gpu_losses.append(train_step(gpu_model, gpu_opt, dev2, s))
    if not resync and s + 1 < steps:
        continue
    cpu, gpu = state(cpu_model), state(gpu_model)
    for name, a in cpu.items():
        if "num_batches_tracked" in name:
            continue
        b = gpu[name]
        diff = (a - b).abs()
        row = (float((a - b).norm() / max(a.norm(), 1e-30)), float(diff.max() / max(a.abs().max(), 1e-30)),
               float(diff.max()))
        worst[name] = tuple(max(x, y) for x, y in zip(worst.get(name, row), row))
    if resync:
        gpu_model.load_state_dict(cpu_model.state_dict())
        for pc, pg in zip(cpu_model.parameters(), gpu_model.parameters()):
            gpu_opt.state[pg]["momentum_buffer"].copy_(cpu_opt.state[pc]["momentum_buffer"])

lines = [f"pytorch {torch.__version__} parity cpu vs {dev2}, {steps} steps of resnet18 (fp32, no TF32)" +
         (" (resynced: each step from the cpu's state; the worst step per row)" if resync else ""),
         f"{'tensor':36s} {'norm rel':>10s} {'max rel':>12s} {'max abs':>12s}"]
kinds = {}
for name, (norm_rel, max_rel, max_abs) in worst.items():
    lines.append(f"{name:36s} {norm_rel:10.3e} {max_rel:12.3e} {max_abs:12.3e}")
    suffix = name.split(".")[-1]
    kind = "fc." + suffix if name.startswith("13.") else "conv.weight" if cpu[name].dim() == 4 else "bn." + suffix
    kinds[kind] = max(kinds.get(kind, 0.0), norm_rel)
loss_rel = [abs(c - g) / abs(c) for c, g in zip(cpu_losses, gpu_losses)]
lines.append("step loss rel: " + " ".join(f"{d:.2e}" for d in loss_rel))
print("\n".join(lines))
summary = {"job": "rn18_parity", "framework": "pytorch " + torch.__version__, "steps": steps, "resync": resync,
           "loss_rel_per_step": [float(f"{d:.3e}") for d in loss_rel],
           "max_norm_rel_by_kind": {k: float(f"{v:.3e}") for k, v in sorted(kinds.items())}}
print(json.dumps(summary))
out = os.environ.get("OUT")
if out:
    with open(os.path.join(out, "pytorch_rn18_parity%s.txt" % ("_resync" if resync else "")), "w") as f:
        f.write("\n".join(lines) + "\n" + json.dumps(summary) + "\n")
