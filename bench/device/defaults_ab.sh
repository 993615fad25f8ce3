#!/usr/bin/env bash
# The forty-third session's scheduling defaults against the old ones and their neighbours, fp16 and bf16,
# four interleaved rounds of ResNet-18 b512: the default (the stage-1 weight gradient on 3/4 of the SMs on an
# H200, 7/12 under 30 GB/s of memory bandwidth an SM; projection shortcuts forked) against unforked, 77 and
# 88 SMs, no join lag, and the old defaults together (99 SMs, unforked). By default it runs only on an H200
# (the card the ResNet-18 goals are set on; the H100's rounds are in docs/performance.md), ANY_CARD=1 runs
# it anywhere. Stage with scripts/stage-device-run.sh, carry .devrun/stage, run
# `bash bench/device/defaults_ab.sh`; means per setting at the end, every run in $OUT/fresco.json.
source bench/device/device_env.sh 2>/dev/null
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee $OUT/card.txt
case "$(cat $OUT/card.txt)" in
  *H200*) ;;
  *) [ "${ANY_CARD:-0}" = 1 ] || { echo "not an H200: nothing run (ANY_CARD=1 runs it anyway)"; exit 0; } ;;
esac
for r in 1 2 3 4; do
  for P in fp16 bf16; do
    ab_run default
    ab_run fork0 -- --fork-shortcuts 0
    ab_run sms77 FRESCO_CUDA_WGMMA_WGRAD_SMS=77
    ab_run sms88 FRESCO_CUDA_WGMMA_WGRAD_SMS=88
    ab_run lag0 -- --join-lag 0
    ab_run old FRESCO_CUDA_WGMMA_WGRAD_SMS=99 -- --fork-shortcuts 0
  done
  echo "round $r done at $SECONDS s"
done
ab_summary
