#!/usr/bin/env bash
# fp16's cuDNN engines chosen by the whole step (scripts/tune_step.py --convs) against those chosen alone: the
# thirty-sixth session's same-card timelines (H100) showed fp16's stage-2 input gradients on 256x128 tiles at
# 87 and 119 us where bf16's 128x128 ran 63-64 us beside the same weight gradients. Stage with
# scripts/stage-device-run.sh, carry .devrun/stage, run `bash bench/device/tune_fp16_convs.sh`: the tuning
# (about 4 minutes at most), three interleaved rounds of the two caches, the step-tuned cache and a timeline
# under $OUT.
source bench/device/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
R="$B/bench_resnet_step --model resnet18 --batch 512 --precision fp16"
timeout 250 python3 scripts/tune_step.py --cache /tmp/step.tsv --convs --passes 1 --top 2 --min-us 40 -- $R 2>&1 | tail -25
echo "tuned at ${SECONDS}s"
for r in 1 2 3; do
  bench_step --model resnet18 --batch 512 --precision fp16
  FRESCO_CUDA_TUNING_CACHE=/tmp/step.tsv bench_step --model resnet18 --batch 512 --precision fp16
done
python3 -c "
import json
for i, l in enumerate(open('$OUT/fresco.json')):
  j=json.loads(l); print(j['dtype'], 'alone' if i % 2 == 0 else 'step-tuned', j['ms_step'], 'ms')"
cp /tmp/step.tsv $OUT/ 2>/dev/null
[ $SECONDS -lt 330 ] && FRESCO_CUDA_TUNING_CACHE=/tmp/step.tsv trace_step rn18_fp16_steptuned --model resnet18 --batch 512 --precision fp16
echo "done at ${SECONDS}s"
