#!/usr/bin/env bash
# The thirty-sixth session's join prologue (CompileOptions::join_prologue; docs/decisions.md "Join
# prologue"), built without a GPU: for a GPU call after bench/device/speculative_ab.sh (stage with
# scripts/stage-device-run.sh, carry .devrun/stage, run `bash bench/device/join_prologue_ab.sh`). The
# Hopper kernel's prologue tests (the join prologue's bits against the host's), the training bits tests
# (join prologue ON against batchnorm_add, and the plain prologue's as before), then ResNet-18 b512 in both
# precisions with --join-prologue on against off in three interleaved rounds, and CUPTI timelines of bf16
# with it on and off (the stage-1 conv that applies the join against the join's apply pass and the conv).
# Writes fresco.json, log.txt and traces/ under $OUT.
source bench/device/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 120 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='*Conv3x3Wgmma*Prologue*' 2>&1 |
  grep -E "PASSED|FAILED|SKIPPED|Failure|tests ran" | head -20
timeout 200 $B/test_cuda --gtest_brief=1 \
  --gtest_filter='CudaLowPrecision.JoinPrologue*:CudaLowPrecision.ConvPrologue*:CudaLowPrecision.ALaterOverflow*' 2>&1 |
  grep -E "PASSED|FAILED|SKIPPED|Failure|tests ran|\[          \]" | head -30
echo "tests done at ${SECONDS}s"
for r in 1 2 3; do
  for p in bf16 fp16; do
    bench_step --model resnet18 --batch 512 --precision $p --join-prologue on
    bench_step --model resnet18 --batch 512 --precision $p --join-prologue off
  done
done
python3 -c "
import json
for l in open('$OUT/fresco.json'):
  j=json.loads(l); print(j['dtype'], 'join prologues', j['join_prologues'], j['ms_step'], 'ms', j['device_mib'], 'MiB')"
echo "fresco done at ${SECONDS}s"
for m in on off; do
  trace_step rn18_bf16_join_$m --model resnet18 --batch 512 --precision bf16 --join-prologue $m
done
echo "traces done at ${SECONDS}s"
