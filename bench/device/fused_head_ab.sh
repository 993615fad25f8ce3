#!/usr/bin/env bash
# The fused training head (CompileOptions::fuse_head) on the GPU machine: its CUDA tests, plugin-check, then
# the MLP benchmark with the head fused and not, two rounds at batch 1024 and 128 on one tuning file (the first
# run of each batch tunes afresh). Stage with scripts/stage-device-run.sh, carry .devrun, run
# `bash bench/device/fused_head_ab.sh` (eighth session, call 11: docs/performance.md).
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
