#!/usr/bin/env bash
# The stage-2 own-kernel probe (bench/conv128_probe.cu) on the GPU machine, both 16-bit types: stage with
# scripts/stage-device-run.sh (it keeps bin/bench_conv128_probe), carry .devrun/stage and this checkout's
# scripts, run `bash bench/device/probe_conv128.sh`. Writes $OUT/probe.txt (one JSON line per measurement).
source bench/device/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for d in fp16 bf16; do
  timeout 120 $B/bench_conv128_probe --dtype $d
  echo "rc=$?"
done | tee $OUT/probe.txt
