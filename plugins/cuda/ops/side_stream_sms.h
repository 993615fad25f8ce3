// How many SMs the weight gradients take on the side stream, beside the main stream's chain of input
// gradients and memory-bound batchnorm passes. Both kinds are persistent (about one block an SM that stays
// resident), so the SMs they leave are the ones the main stream's small kernels (finalizes, dx passes) can
// start on before the weight gradient ends; for cuDNN's, how many to leave depends on the memory bandwidth an
// SM has. Pure functions of the device's SM count, its peak memory bandwidth (GB/s, 0 when the driver does
// not say) and the environment's overrides; test: tests/plugins/cuda/ops/test_side_stream_sms.cpp.
#pragma once

namespace fresco::cuda {

// Under 30 GB/s of memory bandwidth an SM: an H100 SXM (3.35 TB/s over 132 SMs, 25 GB/s); an H200 has 36.
constexpr bool lean_memory_per_sm(int sm_count, double memory_gbs) {
  return memory_gbs > 0 && memory_gbs / (sm_count > 0 ? sm_count : 1) < 30.0;
}

// Blocks of fresco's Hopper 3x3 weight gradient (ops/conv3x3_wgmma.h; one block holds an SM's whole
// register file): seven twelfths of the SMs (77 of 132). History: the sixteenth session's H200 took 4.79 ms
// fp16 with 66 blocks against 4.89-4.90 with 132; the twenty-second's, with the join epilogue, preferred 100
// to 66, 80 and 88, so three quarters were the default; on H100s (forty-second and forty-third sessions) 77
// blocks were 19-33 us a step faster than 99 in both precisions, and the forty-fifth session's H200 agreed
// with the current build (six interleaved rounds: fp16 4.562 ms at 77 against 4.576 at 99 and 4.573 at 88,
// bf16 4.520 against 4.535 and 4.530; 66 and 70 slower; docs/performance.md). `override_sms` > 0
// (FRESCO_CUDA_WGMMA_WGRAD_SMS) names them, at most every SM.
constexpr int conv3x3_wgrad_blocks(int sm_count, int override_sms) {
  if (override_sms > 0) return override_sms < sm_count ? override_sms : sm_count;
  const int blocks = sm_count * 7 / 12;
  return blocks > 1 ? blocks : 1;
}

// The SMs asked of cuDNN's weight-gradient engines (CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET), 0 for no target
// (every SM): for fp16 (`f16`) 7/8 of the SMs to the nearest (116 of 132) under 30 GB/s an SM, every SM
// otherwise (the twelfth session's H200: fewer no faster). Forty-fourth session, ResNet-18 b512 on H100s,
// each run timing its engines afresh (near-tied engines move the step by +-23 us from one choice to the
// next): 116 SMs against every SM over eight runs each, fp16 4.927 against 4.970 ms, bf16 4.885
// against 4.868; one cached choice each: fp16 108-116 SMs 31-37 us faster on one card, 116 9 us slower on
// another, bf16 even on the first and 28 us slower on the second, and the final check's one bf16 run with
// it 4.974 ms, the slowest bf16 step of the session. bf16 runs its early updates in parts beside the
// backward, which may take the SMs left free; it keeps every SM. The engine and its time alone stay the same
// (engine 65). `override_sms` >= 0 (FRESCO_CUDNN_WGRAD_SMS) names them in every precision, 0 or at least
// sm_count meaning every SM.
constexpr int cudnn_wgrad_sm_target(int sm_count, double memory_gbs, int override_sms, bool f16) {
  const int want = override_sms >= 0                                 ? override_sms
                   : f16 && lean_memory_per_sm(sm_count, memory_gbs) ? (sm_count * 7 + 4) / 8
                                                                     : 0;
  return want > 0 && want < sm_count ? want : 0;
}

}  // namespace fresco::cuda
