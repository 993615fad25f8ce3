#!/usr/bin/env bash
# The fused training head (CompileOptions::fuse_head, built in the eighth session without a GPU) on the GPU
# machine: its CUDA tests, plugin-check, then the MLP benchmark with the head fused and not, two rounds at
# batch 1024 and 128 on one tuning file. Stage with scripts/stage-device-run.sh, carry .devrun, run
# `bash bench/device/fused_head_ab.sh`. If the tests pass and the step is faster, fuse_head can become the
# default (docs/performance.md, eighth session).
source bench/device/device_env.sh
timeout 300 $B/test_cuda --gtest_filter='*FcSoftmaxXent*:*FusedHead*:*SoftmaxCrossEntropy*:*Parity*:*Golden*' \
  > $OUT/fused_head_tests.log 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure|differs" $OUT/fused_head_tests.log | head -20
timeout 200 $B/fresco-plugin-check /work/main/build-gpu/lib/libfresco-cuda.so 2>&1 | grep -E "fc_softmax|passed"
T=/tmp/fused_head_cache.tsv; rm -f $T
for r in 1 2; do for f in 0 1; do for b in 1024 128; do
  echo -n "round $r fuse-head=$f b=$b "
  FRESCO_CUDA_TUNING_CACHE=$T timeout 100 $B/bench_mlp_epoch --device cuda --batch $b --epochs 1 --steps 3000 \
    --fuse-head $f 2>>$OUT/fused_head_tests.log | grep mlp_step | grep -o '"ms_step":[0-9.]*'
done; done; done
