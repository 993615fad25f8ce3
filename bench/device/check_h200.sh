#!/usr/bin/env bash
# GPU check run through the device tool: stage build-gpu into .devrun (scripts/stage-device-run.sh: bin, lib,
# testplugins, devlibs and devenv.sh after ../shared/tools/device-bundle, Fashion-MNIST, a copy of
# ../shared/bench/pytorch_baseline.py), carry .devrun, run `bash bench/device/check_h200.sh`.
# Writes at most 8 files under $OUT (the device tool's limit): tests.log (the kernels' and the plugin's CUDA
# tests, plugin-check, benchmark errors), fresco_resnet.json, fresco_mlp.json, parity_rn18.txt and PyTorch's
# pytorch_*.json, all from the same card in the same call.
source bench/device/device_env.sh
L=$OUT/tests.log
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 120 $B/test_cuda_kernels > $L 2>&1; echo "test_cuda_kernels rc=$?"
timeout 400 $B/test_cuda >> $L 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|Failure|differs|Expected|epoch 15" $L | head -30
timeout 200 $B/fresco-plugin-check /work/main/build-gpu/lib/libfresco-cuda.so >> $L 2>&1
echo "plugin-check rc=$?"; grep -E "FAIL|passed" $L | grep -v '^\[' | head -5
echo "tests done at ${SECONDS}s"
run() { timeout 200 $B/bench_resnet_step "$@" 2>>$L | grep resnet_step | tee -a $OUT/fresco_resnet.json; }
run --model resnet18 --batch 512 --precision fp16
run --model resnet18 --batch 512 --precision bf16
run --model resnet18 --batch 512 --precision fp32 --steps 20
run --model resnet50 --batch 256 --image 224 --stem imagenet --precision bf16 --steps 20
echo "fresco ResNet done at ${SECONDS}s"
for b in 128 1024; do $B/bench_mlp_epoch --device cuda --batch $b --epochs 2 --steps 3000 2>>$L | grep mlp_; done | tee $OUT/fresco_mlp.json
# Then the batch-1024 step with its GEMMs chosen by the step's time (scripts/tune_step.py, on the same cache).
export FRESCO_CUDA_TUNING_CACHE=${FRESCO_CUDA_TUNING_CACHE:-$HOME/.cache/fresco/cuda-tuning.tsv}
timeout 200 python3 scripts/tune_step.py --cache "$FRESCO_CUDA_TUNING_CACHE" --batch 1024 -- \
  $B/bench_mlp_epoch --device cuda --batch 1024 --epochs 1 --steps 3000 2>&1 | tail -3
$B/bench_mlp_epoch --device cuda --batch 1024 --epochs 1 --steps 3000 2>>$L | grep mlp_step | tee -a $OUT/fresco_mlp.json
echo "fresco MLP done at ${SECONDS}s"
MODES=eager,graph DTYPES=bfloat16,float16 OUT=$OUT timeout 150 python3 .devrun/pytorch_baseline.py rn18 2>&1 | grep -v Warn | tail -4
OUT=$OUT timeout 100 python3 bench/device/pytorch_rn50.py 256 2>&1 | grep -v Warn | tail -1
FMNIST=$root/.devrun/fashion-mnist OUT=$OUT timeout 150 python3 .devrun/pytorch_baseline.py mlp 2>&1 | grep '^{' | tail -4
echo "PyTorch done at ${SECONDS}s"
# ResNet-18 fp32 CPU vs CUDA parity: fresco's and PyTorch's own on the same job (docs/decisions.md)
timeout 200 $B/fresco parity /work/main/jobs/resnet18_parity.json --steps 10 --samples 320 > $OUT/parity_rn18.txt 2>&1
grep -E "^step|worst" $OUT/parity_rn18.txt | tail -3
# and resynced: every CUDA step from the CPU's state (each step's arithmetic on its own), both frameworks
timeout 200 $B/fresco parity /work/main/jobs/resnet18_parity.json --steps 10 --samples 320 --resync --verbose >> $OUT/parity_rn18.txt 2>&1
grep -E "worst" $OUT/parity_rn18.txt | tail -1
mkdir -p /tmp/rn18_parity
FMNIST=$root/.devrun/fashion-mnist OUT=/tmp/rn18_parity timeout 200 python3 bench/device/pytorch_rn18_parity.py 2>&1 | tail -1
FMNIST=$root/.devrun/fashion-mnist RESYNC=1 OUT=/tmp/rn18_parity timeout 200 python3 bench/device/pytorch_rn18_parity.py 2>&1 | tail -1
echo "all done at ${SECONDS}s"
