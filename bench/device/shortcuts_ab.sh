#!/usr/bin/env bash
# The thirty-fourth session's comparison, run through the device tool (stage with scripts/stage-device-run.sh,
# carry .devrun/stage and .devrun/pytorch_baseline.py, run `bash bench/device/shortcuts_ab.sh`): the compact
# and subsampled shortcut tests, ResNet-18 b512 with the defaults against --compact-shortcut off and
# --subsampled-shortcut off in three interleaved rounds, ResNet-50 bf16, then PyTorch's eager and whole-step
# graph on the same card. Writes fresco.json, log.txt and pytorch_rn18.json / pytorch_rn50.json under $OUT.
source bench/device/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
$B/test_cuda --gtest_filter='CudaCompact*:CudaLowPrecision.CompactShortcut*' 2>&1 | grep -E "^\[  (PASSED|FAILED)|Failure" | head
L=$OUT/log.txt
run() { timeout 60 $B/bench_resnet_step "$@" 2>>$L | grep resnet_step >> $OUT/fresco.json; }
for r in 1 2 3; do
  for p in fp16 bf16; do
    run --model resnet18 --batch 512 --precision $p
    run --model resnet18 --batch 512 --precision $p --compact-shortcut off
  done
  run --model resnet18 --batch 512 --precision bf16 --subsampled-shortcut off
done
python3 -c "
import json
for l in open('$OUT/fresco.json'):
  j=json.loads(l); print(j['dtype'], 'compact', j['compact_shortcut'], 'subsampled', j['subsampled_shortcut'], j['ms_step'], 'ms', j['device_mib'], 'MiB')"
run --model resnet50 --batch 256 --image 224 --stem imagenet --precision bf16 --steps 20
tail -1 $OUT/fresco.json | grep -o '"ms_step":[0-9.]*,"images_per_s":[0-9.]*,"device_mib":[0-9.]*'
echo "fresco done at ${SECONDS}s"
MODES=eager,graph DTYPES=float16,bfloat16 OUT=$OUT timeout 170 python3 .devrun/pytorch_baseline.py rn18 2>&1 | grep '^{'
OUT=$OUT timeout 100 python3 bench/device/pytorch_rn50.py 256 2>&1 | grep '^{' | tail -1
echo "pytorch done at ${SECONDS}s"
