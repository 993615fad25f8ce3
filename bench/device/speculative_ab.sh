#!/usr/bin/env bash
# The thirty-fifth session's checks, for the first GPU call after it (that session had no device): stage with
# scripts/stage-device-run.sh, carry .devrun/stage, .devrun/fashion-mnist and .devrun/pytorch_baseline.py, run
# `bash bench/device/speculative_ab.sh`. The whole test_cuda (the thirty-fourth session's last refactor,
# 3fd288a, and the speculative update's CUDA side were never run on a GPU), fresco-plugin-check on the CUDA
# plugin, ResNet-18 b512 fp16 with --speculative-update on (its backups written by the updates, the default,
# and by copy nodes: the thirty-sixth session's --speculative-backups) against off and bf16 in three
# interleaved rounds, CUPTI timelines of fp16 on (in the updates) and off, then PyTorch's eager and
# whole-step graph on the same card. Writes fresco.json, log.txt, traces/ and pytorch_rn18.json under $OUT.
# The next call: bench/device/join_prologue_ab.sh.
source bench/device/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
S=$SECONDS
timeout 300 $B/test_cuda --gtest_brief=1 2>&1 | grep -E "PASSED|FAILED|SKIPPED|Failure|tests ran" | head -30
echo "test_cuda took $((SECONDS - S)) s"
$B/fresco-plugin-check $B/../lib/libfresco-cuda.so 2>&1 | tail -1
for r in 1 2 3; do
  bench_step --model resnet18 --batch 512 --precision fp16 --speculative-update on
  bench_step --model resnet18 --batch 512 --precision fp16 --speculative-update on --speculative-backups copies
  bench_step --model resnet18 --batch 512 --precision fp16 --speculative-update off
  bench_step --model resnet18 --batch 512 --precision bf16
done
python3 -c "
import json
for l in open('$OUT/fresco.json'):
  j=json.loads(l); print(j['dtype'], 'speculative', j['speculative_update'], j['speculative_backups'], j['speculative_layer'], j['ms_step'], 'ms', j['device_mib'], 'MiB')"
echo "fresco done at ${SECONDS}s"
for m in on off; do
  trace_step rn18_fp16_$m --model resnet18 --batch 512 --precision fp16 --speculative-update $m
done
echo "traces done at ${SECONDS}s"
[ $SECONDS -lt 400 ] && MODES=eager,graph DTYPES=float16,bfloat16 OUT=$OUT timeout 150 python3 .devrun/pytorch_baseline.py rn18 2>&1 | grep '^{'
echo "pytorch done at ${SECONDS}s"
