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
# bl LABEL "VAR=value ..." ARGS: bench_step ARGS with those variables set, its ms/step labelled in
# $OUT/labelled.txt (FAILED when it printed no JSON line); nothing once $T seconds have passed.
bl() { local label=$1 envs=$2; shift 2; [ $SECONDS -gt $T ] && return
  local n0=$(cat $OUT/fresco.json 2>/dev/null | wc -l)
  ( [ -n "$envs" ] && export $envs; bench_step "$@" )
  if [ "$(cat $OUT/fresco.json 2>/dev/null | wc -l)" -gt "$n0" ]; then
    echo "$label $(tail -1 $OUT/fresco.json | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["dtype"], j["ms_step"], j["device_mib"])')"
  else echo "$label FAILED"; fi | tee -a $OUT/labelled.txt; }
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
