#!/usr/bin/env bash
# The stage-2 own-kernel probes (bench/conv128_rs_probe.cu, then bench/conv128_probe.cu) on the GPU machine,
# both 16-bit types: stage with scripts/stage-device-run.sh (without --lean it keeps both programs), carry
# .devrun/stage and this checkout's scripts, run `bash bench/device/probe_conv128.sh`. Writes $OUT/probe.txt
# (one JSON line per measurement).
source bench/device/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for d in fp16 bf16; do
  timeout 90 $B/bench_conv128_rs_probe --dtype $d
  echo "rc=$?"
  timeout 120 $B/bench_conv128_probe --dtype $d
  echo "rc=$?"
done | tee $OUT/probe.txt
