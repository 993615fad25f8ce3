#!/usr/bin/env bash
# GPU run through the device tool for CompileOptions::conv_join_lag_max (docs/decisions.md, "A conv input
# gradient may leave the latest weight gradient running"): the CUDA capture tests (ConvJoinLagGivesTheSameBits
# among them), then ResNet-18 at batch 512, fp16 and bf16, with the joins of conv input gradients over at most
# N values per sample lagged (a conv's input per sample with the CIFAR stem: stage 1 32x32x64 = 65536, stage 2
# 16x16x128, stage 3 8x8x256, stage 4 4x4x512 = 8192; each stage's first conv reads the stage before's): N = 0
# (off), 8192, 16384, 32768, 65536 (every conv), two rounds each on one tuning file. Stage first
# (scripts/stage-device-run.sh), carry .devrun, run `bash bench/device/join_lag_h200.sh`. Writes tests.log and
# join_lag.json under $OUT.
source bench/device/device_env.sh
L=$OUT/tests.log
timeout 200 $B/test_cuda --gtest_filter='CudaCapture.*' > $L 2>&1; echo "capture tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|Failure|differs" $L | head -10
export FRESCO_CUDA_TUNING_CACHE=/tmp/join_lag.tsv
R="$B/bench_resnet_step --model resnet18 --batch 512"
for pr in fp16 bf16; do timeout 100 $R --precision $pr --steps 5 > /dev/null 2>&1; done  # tune once
for r in 1 2; do for pr in fp16 bf16; do for lag in 0 8192 16384 32768 65536; do
  timeout 100 $R --precision $pr --join-lag $lag 2>>$L | grep resnet_step | tee -a $OUT/join_lag.json |
    grep -o '"dtype":"[a-z0-9]*"\|"ms_step":[0-9.]*\|"device_mib":[0-9.]*\|"join_lag":[0-9]*' | tr '\n' ' '
  echo
done; done; done
echo "all done at ${SECONDS}s"
