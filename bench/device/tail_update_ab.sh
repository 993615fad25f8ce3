#!/usr/bin/env bash
# The fp16 update in the step's tail: by default GradScaler's semantics keep the whole conv update after the
# stem's weight gradient and the last check (about 55 us of SGD alone at the end of the step). With
# `--speculative-update on --early-parts 0` the deep conv weights are updated speculatively (backups kept,
# restored on a skipped step) in one part at the end of DEEP_FWD_BWD, beside the stem's weight gradient,
# instead of in the five parts during the backward that the thirty-sixth session measured slower. bf16: its
# default five early parts against none. ROUNDS interleaved rounds (default 4), any card. Stage with
# scripts/stage-device-run.sh, carry .devrun/stage, run `bash bench/device/tail_update_ab.sh`; means per
# setting at the end, every run in $OUT/fresco.json.
source bench/device/device_env.sh 2>/dev/null
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee -a $OUT/card.txt
run() {
  local tag=$1
  shift
  [ $SECONDS -gt ${STOP_AT:-560} ] && return
  timeout 90 $B/bench_resnet_step --model resnet18 --batch 512 --precision $P "$@" 2>>$OUT/log.txt |
    grep resnet_step | sed "s/^{/{\"variant\":\"$tag\",/" >> $OUT/fresco.json
}
for r in $(seq 1 ${ROUNDS:-4}); do
  P=fp16 run default
  P=fp16 run spec_tail --speculative-update on --early-parts 0
  P=fp16 run spec_parts --speculative-update on
  P=bf16 run default
  P=bf16 run parts0 --early-parts 0
  echo "round $r done at $SECONDS s"
done
python3 - <<'PY'
import json, collections, os
d = collections.defaultdict(list); mem = {}
for l in open(os.environ['OUT'] + '/fresco.json'):
    j = json.loads(l); k = (j['dtype'], j['variant']); d[k].append(j['ms_step']); mem[k] = j.get('device_mib')
for k, v in sorted(d.items()): print(k, v, round(sum(v) / len(v), 4), mem[k])
PY
