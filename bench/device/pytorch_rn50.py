#!/usr/bin/env python3
# ResNet-50 (torchvision), 224x224x3, batch 256, bf16 autocast, SGD Nesterov (fused), channels-last, synthetic
# data on the GPU, eager: images/s next to fresco's bench_resnet_step --model resnet50 (same card, same call).
import json, os, sys, time
import torch, torch.nn.functional as F
try:
    import torchvision
except ImportError:
    print(json.dumps({"job": "rn50", "error": "torchvision not installed"})); sys.exit(0)
dev = "cuda"
torch.manual_seed(0)
m = torchvision.models.resnet50(num_classes=10).to(dev).to(memory_format=torch.channels_last)
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4, fused=True)
b = int(sys.argv[1]) if len(sys.argv) > 1 else 256
x = torch.randn(b, 3, 224, 224, device=dev).to(memory_format=torch.channels_last)
y = torch.randint(0, 10, (b,), device=dev)
def step():
    opt.zero_grad(set_to_none=False)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(m(x), y, label_smoothing=0.2)
    loss.backward(); opt.step()
for _ in range(5): step()
torch.cuda.synchronize(); t = time.perf_counter()
n = 20
for _ in range(n): step()
torch.cuda.synchronize(); ms = (time.perf_counter() - t) / n * 1000
r = dict(job="rn50", batch=b, mode="eager", dtype="bfloat16", ms_step=round(ms, 3), images_s=round(b / ms * 1000),
         peak_mib=round(torch.cuda.max_memory_allocated() / 2**20))
print(json.dumps(r))
out = os.environ.get("OUT")
if out:
    with open(f"{out}/pytorch_rn50.json", "w") as f: json.dump(r, f)
