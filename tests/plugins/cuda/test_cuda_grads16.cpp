// The 16-bit gradients of ops.h (FR_KERNEL_HALF_GRADS; CompileOptions::update_from_grads16) on the GPU:
// sgd_update and adam_update reading f16 / bf16 gradients give the bits of unscale_grads' cast form followed
// by the update on the f32 gradients (scaled and unit loss scales, a skipped step, sizes with a tail past the
// 4-wide groups, with and without the weight copy); check_grads sets the skip flag exactly where
// unscale_grads does, on the CPU's bits. Training with the option on and off:
// CudaLowPrecision.EarlyUpdateGivesTheSameBits (test_cuda_low_precision_training.cpp).
#include <cstring>
#include <string>
#include <vector>

#include "plugins/cuda/gpu_fixture.h"

using namespace fresco;
using namespace fresco::gpu_test;

namespace {
RangeRef vals(TensorId id, DType t = DType::F32) {
  return RangeRef::values_of(id, t);
}
RangeRef bytes(TensorId id) {
  return RangeRef::of(id, DType::U8);
}
}  // namespace

TEST(CudaGrads16, UpdatesFromHalfGradsGiveTheBitsOfTheUnscaleCastFirst) {
  FRESCO_REQUIRE_GPU();
  for (DType low : {DType::F16, DType::BF16})
    for (int which = 0; which < 3; ++which)  // sgd nesterov, plain sgd, adamw
      for (Fill scalars : {Fill::SCALARS_SCALED, Fill::SCALARS, Fill::SCALARS_SKIP})
        for (bool copy : {true, false})
          for (int64_t n : {int64_t{4096 + 17}, int64_t{8192 * 33 + 3}}) {
            const Shape s{1, 1, 1, n};
            // 0 w, 1 m, 2 v, 3 g (f32, random), 4 g16 (its cast), 5 g unscaled (f32), 6 scalars, 7 the copy
            OpCase half;
            half.tensors = {{DType::F32, s, Fill::RANDOM},
                            {DType::F32, s, Fill::RANDOM},
                            {DType::F32, s, Fill::POSITIVE},
                            {DType::F32, s, Fill::RANDOM},
                            {low, s, Fill::ZERO},
                            {DType::F32, s, Fill::ZERO},
                            {DType::U8, {1, 1, 1, sizeof(FrStepScalars)}, scalars},
                            {low, s, Fill::ZERO}};
            std::vector<RangeRef> rout = {vals(0)};
            if (which != 1) rout.push_back(vals(1));
            if (which == 2) rout.push_back(vals(2));
            if (copy) rout.push_back(vals(7, low));
            half.node =
                range_node(which == 2 ? FR_OP_ADAM_UPDATE : FR_OP_SGD_UPDATE, {vals(4, low), bytes(6)}, rout);
            if (which == 2)
              half.node.with_params(FrAdamParams{0.9f, 0.999f, 1e-8f, 1e-2f, 1, 0});
            else
              half.node.with_params(FrSgdParams{which == 0 ? 0.9f : 0.0f, 5e-4f, which == 0 ? 1 : 0, 0});
            half.before = {range_node(FR_OP_CAST_RANGE, {vals(3)}, {vals(4, low)})};
            OpCase apart = half;
            apart.before.push_back(range_node(FR_OP_UNSCALE_GRADS, {vals(4, low)}, {vals(5), bytes(6)}));
            apart.node.rin[0] = vals(5);
            half.outputs = apart.outputs = {0, 1, 2, 6, 7};
            const std::string what = std::string(which == 2   ? "adamw"
                                                 : which == 1 ? "sgd"
                                                              : "sgd nesterov") +
                                     " " + dtype_name(low) + " n=" + std::to_string(n) +
                                     (scalars == Fill::SCALARS_SKIP     ? " skipped"
                                      : scalars == Fill::SCALARS_SCALED ? " scale 1024"
                                                                        : "") +
                                     (copy ? " with the copy" : "");
            const auto a = run_case("cuda", half, 3), b = run_case("cuda", apart, 3);
            ASSERT_EQ(a.size(), b.size());
            const char* names[] = {"w", "m", "v", "scalars", "copy"};
            for (size_t i = 0; i < a.size(); ++i)
              EXPECT_TRUE(a[i] == b[i]) << what << ": " << names[i] << " differs";
          }
}

TEST(CudaGrads16, CheckGradsFlagsAsUnscaleDoesAndAsTheCpu) {
  FRESCO_REQUIRE_GPU();
  for (DType t : {DType::F16, DType::BF16, DType::F32})
    for (Fill src : {Fill::RANDOM, Fill::RANDOM_INF})
      for (int64_t n : {int64_t{1000}, int64_t{1001}, int64_t{8192 * 33 + 3}}) {  // four a thread, and one
        const Shape s{1, 1, 1, n};
        // 0 the f32 source, 1 the gradients (its cast), 2 unscale's f32 output, 3 check's scalars, 4
        // unscale's
        OpCase check;
        check.tensors = {{DType::F32, s, src},
                         {t, s, Fill::ZERO},
                         {DType::F32, s, Fill::ZERO},
                         {DType::U8, {1, 1, 1, sizeof(FrStepScalars)}, Fill::SCALARS_SCALED},
                         {DType::U8, {1, 1, 1, sizeof(FrStepScalars)}, Fill::SCALARS_SCALED}};
        if (t == DType::F32)  // the gradients, and unscale_grads on a copy of them in place
          check.before = {range_node(FR_OP_COPY, {vals(0)}, {vals(1)}),
                          range_node(FR_OP_COPY, {vals(0)}, {vals(2)}),
                          range_node(FR_OP_UNSCALE_GRADS, {}, {vals(2), bytes(4)})};
        else  // the gradients, and unscale_grads' cast form from them
          check.before = {range_node(FR_OP_CAST_RANGE, {vals(0)}, {vals(1, t)}),
                          range_node(FR_OP_UNSCALE_GRADS, {vals(1, t)}, {vals(2), bytes(4)})};
        check.node = range_node(FR_OP_CHECK_GRADS, {vals(1, t)}, {bytes(3)});
        check.outputs = {3, 4};
        const std::string what = std::string(dtype_name(t)) + " n=" + std::to_string(n) +
                                 (src == Fill::RANDOM_INF ? " with an inf" : "");
        for (uint32_t seed : {1u, 2u}) {
          const auto gpu = run_case("cuda", check, seed), cpu = run_case("cpu", check, seed);
          ASSERT_EQ(gpu.size(), 2u);
          FrStepScalars flagged{}, unscaled{};
          std::memcpy(&flagged, gpu[0].data(), sizeof flagged);
          std::memcpy(&unscaled, gpu[1].data(), sizeof unscaled);
          EXPECT_EQ(flagged.skip_step, src == Fill::RANDOM_INF ? 1 : 0) << what;
          EXPECT_EQ(flagged.skip_step, unscaled.skip_step) << what;
          EXPECT_TRUE(gpu[0] == cpu[0]) << what << ": the GPU's scalars differ from the CPU's";
        }
      }
}
