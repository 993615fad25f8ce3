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
for r in $(seq 1 ${ROUNDS:-4}); do
  P=fp16 ab_run default
  P=fp16 ab_run spec_tail -- --speculative-update on --early-parts 0
  P=fp16 ab_run spec_parts -- --speculative-update on
  P=bf16 ab_run default
  P=bf16 ab_run parts0 -- --early-parts 0
  echo "round $r done at $SECONDS s"
done
ab_summary
