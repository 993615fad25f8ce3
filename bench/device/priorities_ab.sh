#!/usr/bin/env bash
# Kernel priorities by stream (FRESCO_CUDA_STREAM_PRIORITIES, docs/decisions.md "Stream priorities") against
# the default, interleaved, for fp16 and bf16 and fp16's speculative update: stage with
# scripts/stage-device-run.sh, carry .devrun/stage, run `bash bench/device/priorities_ab.sh` (T=seconds to
# stop starting runs, default 400). Each run's JSON line goes to $OUT/fresco.json, its label to
# $OUT/labelled.txt.
source bench/device/device_env.sh
T=${T:-400}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
A="--model resnet18 --batch 512"
bl() { local label=$1 envs=$2; shift 2; [ $SECONDS -gt $T ] && return
  local line=$(env $envs timeout 60 $B/bench_resnet_step "$@" 2>>$OUT/log.txt | grep resnet_step)
  if [ -n "$line" ]; then echo "$line" >> $OUT/fresco.json; echo "$label $(echo "$line" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["dtype"], j["ms_step"], j["device_mib"])')" | tee -a $OUT/labelled.txt
  else echo "$label FAILED" | tee -a $OUT/labelled.txt; fi; }
for r in 1 2 3; do
  [ $SECONDS -gt $((T - 40)) ] && break
  echo "round $r at ${SECONDS}s"
  bl alone "" $A --precision fp16
  bl prio-main FRESCO_CUDA_STREAM_PRIORITIES=0,2,0,0,0 $A --precision fp16
  bl prio-main-side FRESCO_CUDA_STREAM_PRIORITIES=0,2,1,1,0 $A --precision fp16
  bl default "" $A --precision bf16
  bl prio-main FRESCO_CUDA_STREAM_PRIORITIES=0,2,0,0,0 $A --precision bf16
  bl spec+prio FRESCO_CUDA_STREAM_PRIORITIES=0,2,1,1,0 $A --precision fp16 --speculative-update on
done
echo "A/B done at ${SECONDS}s"
sort $OUT/labelled.txt
