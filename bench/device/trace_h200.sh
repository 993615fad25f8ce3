#!/usr/bin/env bash
# CUPTI timelines of captured steps on the GPU machine (bench/trace/): the MLP at batch 1024 and 128 and
# ResNet-18 fp16 / bf16 at batch 512. Stage with scripts/stage-device-run.sh (it copies libcupti), carry .devrun,
# run `bash bench/device/trace_h200.sh`. Writes $OUT/traces.tgz (CSV + summaries); prints the summaries' heads.
source bench/device/device_env.sh
T=/tmp/traces; mkdir -p $T
trace() {  # name, then the command
  local name=$1; shift
  CUDA_INJECTION64_PATH=/work/main/build-gpu/lib/libfresco_cupti_trace.so FRESCO_TRACE_OUT=$T/$name.csv \
    FRESCO_TRACE_KEEP=${KEEP:-20000} timeout 200 "$@" > $T/$name.log 2>&1
  python3 bench/trace/timeline.py $T/$name.csv --last ${LAST:-50} > $T/$name.txt 2>&1
  echo "== $name"; head -1 $T/$name.txt
}
trace mlp1024 $B/bench_mlp_epoch --device cuda --batch 1024 --epochs 1 --steps 300
trace mlp128 $B/bench_mlp_epoch --device cuda --batch 128 --epochs 1 --steps 300
KEEP=60000 LAST=20 trace rn18_fp16 $B/bench_resnet_step --model resnet18 --batch 512 --precision fp16 --steps 40
KEEP=60000 LAST=20 trace rn18_bf16 $B/bench_resnet_step --model resnet18 --batch 512 --precision bf16 --steps 40
tar czf $OUT/traces.tgz -C $T .
