#!/usr/bin/env bash
# The ResNet-18 goals on an H200 first, the rest after: fresco fp16 and bf16 (ROUNDS interleaved rounds,
# default 3) and PyTorch's eager and whole-step graph on the same card (about 3 minutes in all), then, while
# the call has time (STOP_AT seconds, default 540), the CUDA tests. For a call with little device time left:
# the measurement the goals need comes before anything else. Stage with scripts/stage-device-run.sh --lean,
# carry .devrun/stage and .devrun/pytorch_baseline.py, run `bash bench/device/goals_h200.sh`. Writes
# fresco.json (every run, tagged by round), PyTorch's pytorch_*.json and tests.log under $OUT.
source bench/device/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee $OUT/card.txt
for r in $(seq 1 ${ROUNDS:-3}); do
  for P in fp16 bf16; do ab_run "round$r"; done
done
ab_summary
echo "fresco done at ${SECONDS}s"
MODES=eager,graph DTYPES=bfloat16,float16 OUT=$OUT timeout 200 python3 .devrun/pytorch_baseline.py rn18 2>&1 |
  grep -v Warn | tail -4
echo "PyTorch done at ${SECONDS}s"
left=$(( ${STOP_AT:-540} - SECONDS ))
if [ $left -gt 60 ]; then
  timeout $(( left > 400 ? 400 : left )) $B/test_cuda > $OUT/tests.log 2>&1; echo "test_cuda rc=$?"
  grep -E "^\[  (PASSED|FAILED)|Failure" $OUT/tests.log | head -10
fi
echo "all done at ${SECONDS}s"
