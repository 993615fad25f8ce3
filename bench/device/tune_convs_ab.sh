#!/usr/bin/env bash
# cuDNN engines chosen by the whole step (scripts/tune_step.py --convs) against those each run chooses alone,
# fp16 and bf16, interleaved, beside PyTorch's eager and whole-step graph. Alone, a problem's best engines
# often tie within 1% while they differ by 40-80 us inside the step (the thirty-eighth session, H100s: fp16's
# stage-2 input gradient on engine #2 against #10 or #3, stage 3's on #26 against #1: 4.94-4.98 ms against
# 5.01-5.03), so which one a fresh run picks is a draw; the step-tuned cache settles it (on the thirty-ninth
# session's H200 the default's draw was as fast; a tie-break by cluster size was slower there and is gone:
# docs/decisions.md). The default times once and later rounds read its cache. Stage with
# scripts/stage-device-run.sh, carry .devrun/stage and .devrun/pytorch_baseline.py, run
# `T=SECONDS bash bench/device/tune_convs_ab.sh` (default 220: stops starting runs then).
source bench/device/device_env.sh
T=${T:-220}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
A="--model resnet18 --batch 512"
# bl LABEL "VAR=value ..." ARGS: one run's JSON line to $OUT/fresco.json, its label and ms/step to labelled.txt
bl() {
  local label=$1 envs=$2; shift 2
  local line=$(env $envs timeout 30 $B/bench_resnet_step "$@" 2>>$OUT/log.txt | grep resnet_step)
  echo "$line" >> $OUT/fresco.json
  echo "$label $(echo "$line" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["dtype"], j["ms_step"], j["device_mib"])')" | tee -a $OUT/labelled.txt
}
bl default "" $A --precision fp16  # writes the default cache (~/.cache/fresco/cuda-tuning.tsv): later runs read it
bl default "" $A --precision bf16
for p in fp16 bf16; do
  timeout 60 python3 scripts/tune_step.py --cache /tmp/step_$p.tsv --convs --passes 1 --top 2 --min-us 40 -- \
    $B/bench_resnet_step $A --precision $p 2>&1 | grep -E "^tune_step"
  echo "$p tuned at ${SECONDS}s"
done
cp /tmp/step_*.tsv ~/.cache/fresco/cuda-tuning.tsv $OUT/ 2>/dev/null
for r in 1 2 3; do
  [ $SECONDS -gt $((T - 60)) ] && break
  for p in fp16 bf16; do
    bl default "" $A --precision $p
    bl step-tuned FRESCO_CUDA_TUNING_CACHE=/tmp/step_$p.tsv $A --precision $p
  done
done
[ $SECONDS -lt $((T - 45)) ] && MODES=eager,graph DTYPES=float16,bfloat16 OUT=$OUT timeout 45 python3 .devrun/pytorch_baseline.py rn18 2>&1 | grep '^{'
sort $OUT/labelled.txt; echo "done at ${SECONDS}s"
