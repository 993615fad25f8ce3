#!/usr/bin/env bash
# Stages a GPU build for the device tool (bench/device/check_h200.sh): copies build-gpu's programs, libraries
# and test plugins into .devrun/stage (git-ignored), adds the Debian libraries the GPU machine lacks
# (../shared/tools/device-bundle), Fashion-MNIST and a copy of ../shared/bench/pytorch_baseline.py. Carry
# .devrun with the call. Build first: cmake -S . -B build-gpu -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 &&
# cmake --build build-gpu
# `--lean` leaves out what only the probes and timelines use (the probe and micro-benchmark programs, CUPTI, the
# NCCL plugin): the stage then fits one call with Fashion-MNIST and the tree (tests, the product's benchmarks,
# the accuracy runs).
set -euo pipefail
lean=0
[ "${1:-}" = "--lean" ] && lean=1
cd "$(dirname "$0")/.."
for f in test_cuda test_cuda_kernels bench_sgemm fresco-plugin-check; do
  [ -x build-gpu/bin/$f ] || { echo "stage-device-run: build-gpu/bin/$f is missing: build build-gpu (with CUDA) first" >&2; exit 66; }
done
rm -rf .devrun/stage && mkdir -p .devrun/stage
cp -a build-gpu/bin build-gpu/lib build-gpu/testplugins .devrun/stage/
# What the GPU run does not use (the device tool carries 64 MiB at most).
rm -f .devrun/stage/lib/*.a .devrun/stage/bin/{test_cpu_gemm,bench_cpu_gemm,test_core,test_cpu_ops,test_e2e,bench_cudnn_fusion_probe,bench_graph_gap}
../shared/tools/device-bundle .devrun/stage
# device-bundle copies libfresco.so.0 into devlibs too; lib/ has it (bench/device/device_env.sh puts lib/ on
# the loader path), and without the copy the stage and Fashion-MNIST fit one call with the tree (64 MiB).
rm -f .devrun/stage/devlibs/libfresco.so*
# CUPTI for the timeline tracer (bench/device/trace_h200.sh); the GPU machine's loader path may not have it.
if [ -e build-gpu/lib/libfresco_cupti_trace.so ]; then
  cp -L "$(ldd build-gpu/lib/libfresco_cupti_trace.so | awk '/libcupti/ {print $3}')" .devrun/stage/lib/
fi
if [ $lean = 1 ]; then
  rm -f .devrun/stage/lib/libfresco-nccl.so .devrun/stage/lib/libcupti* .devrun/stage/devlibs/libcupti* \
    .devrun/stage/bin/{bench_sgemm,bench_wgmma_rate_probe,test_cuda_tuning,bench_conv3x3_probe,bench_conv128_probe,bench_conv128_rs_probe} \
    .devrun/stage/bin/{mlp_fashion_mnist,bench_step_profile}
fi
[ -d .devrun/fashion-mnist ] || cp -r /usr/share/datasets/fashion-mnist .devrun/fashion-mnist
cp ../shared/bench/pytorch_baseline.py .devrun/
du -sh .devrun/stage .devrun/fashion-mnist
