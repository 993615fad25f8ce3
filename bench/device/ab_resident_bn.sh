#!/usr/bin/env bash
# A/B of the resident batchnorm kernels (FRESCO_CUDA_BN_RESIDENT, FRESCO_CUDA_BN_RESIDENT_BACKWARD;
# plugins/cuda/ops/bn_resident.h) and of fp16's fused cuDNN statistics (FRESCO_CUDNN_GENSTATS=1 with
# --conv-stats on: faster, not reproducible), run through the device tool like check_h200.sh (stage with
# scripts/stage-device-run.sh, carry .devrun/stage, .devrun/fashion-mnist and .devrun/pytorch_baseline.py:
# 64 MiB at most, so first rm -f .devrun/stage/bin/{bench_sgemm,bench_wgmma_rate_probe,test_cuda_tuning}). First the bit-equality and determinism tests, then ResNet-18 at
# batch 512 in bf16 and fp16 for each setting, interleaved over ROUNDS rounds (default 3). Writes tests.log,
# ab.json (one line per run, "tag" first) and bench.err under $OUT.
source bench/device/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 240 $B/test_cuda --gtest_filter="CudaCheckpoint.*:CudaBnResident*:CudaCapture.Resident*:CudaCapture.Batchnorm*" \
  > $OUT/tests.log 2>&1
echo "tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|differs|Which is|\.cpp:[0-9]+: " $OUT/tests.log | cut -c1-220 | head -40
export FRESCO_CUDA_TUNING_CACHE=/tmp/rn18-ab-tuning.tsv
# run TAG [VAR=VALUE ...]: one bench_resnet_step with $ARGS, its JSON line tagged
run() {
  local tag=$1
  shift
  env "$@" timeout 90 $B/bench_resnet_step --model resnet18 --batch 512 $ARGS 2>>$OUT/bench.err | grep resnet_step |
    sed "s/^{/{\"tag\":\"$tag\",/" | tee -a $OUT/ab.json | grep -o '"tag":"[^"]*"\|"ms_step":[0-9.]*' | tr '\n' ' '
  echo
}
for p in bf16 fp16; do ARGS="--precision $p" run warm_$p FRESCO_X=0; done  # the tuning cache, filled once
for round in $(seq 1 ${ROUNDS:-3}); do
  for p in bf16 fp16; do
    ARGS="--precision $p"
    run base_$p FRESCO_X=0
    run fwd1_$p FRESCO_CUDA_BN_RESIDENT=1
    run fwd2_$p FRESCO_CUDA_BN_RESIDENT=2
    run bwd2_$p FRESCO_CUDA_BN_RESIDENT_BACKWARD=2
    run both2_$p FRESCO_CUDA_BN_RESIDENT=2 FRESCO_CUDA_BN_RESIDENT_BACKWARD=2
  done
  ARGS="--precision fp16 --conv-stats on" run genstats_fp16 FRESCO_CUDNN_GENSTATS=1
done
echo "done at ${SECONDS}s"
