#!/usr/bin/env bash
# GPU regression check run through the device tool: stage build-gpu (bin, lib, devlibs, devenv.sh after
# ../shared/tools/device-bundle build-gpu) into .devrun/stage and Fashion-MNIST into .devrun/fashion-mnist,
# carry .devrun, run `bash bench/device/check_h200.sh`. Writes its outputs under $OUT.
set -u
root=$PWD
mkdir -p /work; [ -e /work/main ] || ln -s "$root" /work/main
[ -e /work/main/build-gpu ] || ln -s "$root/.devrun/stage" /work/main/build-gpu
mkdir -p /usr/share/datasets && { [ -e /usr/share/datasets/fashion-mnist ] || ln -s "$root/.devrun/fashion-mnist" /usr/share/datasets/fashion-mnist; }
source "$root/.devrun/stage/devenv.sh"; export LD_LIBRARY_PATH="$root/.devrun/stage/lib:$LD_LIBRARY_PATH"
B=/work/main/build-gpu/bin
nvidia-smi --query-gpu=name --format=csv,noheader
$B/test_cuda 2>&1 | tee $OUT/test_cuda.log | grep -E "^\[  (PASSED|FAILED)|Failure" | head
$B/fresco golden --device cuda /work/main/tests/data/golden/mlp_adamw /work/main/tests/data/golden/mlp_sgd_nesterov_partial 2>/dev/null | tee $OUT/golden_cuda.txt
$B/fresco golden --device cuda --steps 2 /work/main/tests/data/golden/resnet_sgd 2>&1 | tail -2 | tee $OUT/resnet_cuda.txt
$B/fresco train /work/main/jobs/mlp_fashion_mnist.json --device cuda 2>&1 | tail -2 | tee $OUT/train_cuda.txt
for b in 128 1024; do $B/bench_mlp_epoch --device cuda --batch $b --epochs 2 --steps 3000 2>/dev/null | grep mlp_step; done | tee $OUT/fresco_mlp.json
