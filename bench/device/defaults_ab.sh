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
run() {
  local tag=$1
  shift
  [ $SECONDS -gt 540 ] && return
  env "$@" timeout 60 $B/bench_resnet_step --model resnet18 --batch 512 --precision $P $ARGS 2>>$OUT/log.txt |
    grep resnet_step | sed "s/^{/{\"variant\":\"$tag\",/" >> $OUT/fresco.json
}
for r in 1 2 3 4; do
  for P in fp16 bf16; do
    ARGS="" run default X=0
    ARGS="--fork-shortcuts 0" run fork0 X=0
    ARGS="" run sms77 FRESCO_CUDA_WGMMA_WGRAD_SMS=77
    ARGS="" run sms88 FRESCO_CUDA_WGMMA_WGRAD_SMS=88
    ARGS="--join-lag 0" run lag0 X=0
    ARGS="--fork-shortcuts 0" run old FRESCO_CUDA_WGMMA_WGRAD_SMS=99
  done
  echo "round $r done at $SECONDS s"
done
python3 - <<'PY'
import json, collections, os
d = collections.defaultdict(list); mem = {}
for l in open(os.environ['OUT'] + '/fresco.json'):
    j = json.loads(l); k = (j['dtype'], j['variant']); d[k].append(j['ms_step']); mem[k] = j.get('device_mib')
for k, v in sorted(d.items()): print(k, v, round(sum(v) / len(v), 4), mem[k])
PY
