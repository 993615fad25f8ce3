#!/usr/bin/env bash
# What determinism costs ResNet-18 b512: cuDNN's engines restricted to deterministic ones (the default)
# against FRESCO_CUDNN_DETERMINISTIC=0 (non-deterministic engines admitted; cuDNN's fused statistics off,
# FRESCO_CUDNN_GENSTATS=0, so that only the engine choice differs) and against it with genstats at their
# default for that mode (1: when they measured faster than the separate sums pass). fp16 and bf16, ROUNDS
# interleaved rounds (default 3) after one run per setting that times the engines (FRESCO_CUDNN_LOG=1: the
# choices in $OUT/log.txt). Any card. Stage with scripts/stage-device-run.sh, carry .devrun/stage, run
# `bash bench/device/determinism_ab.sh`; means per setting at the end, every run in $OUT/fresco.json.
source bench/device/device_env.sh 2>/dev/null
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee -a $OUT/card.txt
for P in fp16 bf16; do  # the engines timed once per setting (kept in the tuning cache for the rounds)
  echo "== $P default" >> $OUT/log.txt; ab_run warm_det FRESCO_CUDNN_LOG=1
  echo "== $P nondet" >> $OUT/log.txt
  ab_run warm_nondet FRESCO_CUDNN_LOG=1 FRESCO_CUDNN_DETERMINISTIC=0 FRESCO_CUDNN_GENSTATS=0
  echo "== $P nondet genstats" >> $OUT/log.txt; ab_run warm_nondet_gs FRESCO_CUDNN_LOG=1 FRESCO_CUDNN_DETERMINISTIC=0
done
echo "engines timed at $SECONDS s"
for r in $(seq 1 ${ROUNDS:-3}); do
  for P in fp16 bf16; do
    ab_run det
    ab_run nondet FRESCO_CUDNN_DETERMINISTIC=0 FRESCO_CUDNN_GENSTATS=0
    ab_run nondet_gs FRESCO_CUDNN_DETERMINISTIC=0
  done
  echo "round $r done at $SECONDS s"
done
ab_summary
