// MemoryPlan: slot rule (256-byte alignment, FP32 slot = 2 x FP16 slot), region order, liveness sharing, and
// each of the four validations rejecting a deliberately broken layout.
#include <gtest/gtest.h>

#include "fresco/core/error.h"
#include "fresco/core/memory_plan.h"

using namespace fresco;

namespace {
// A small valid plan: two fc layers with G and M shadows, inputs, features, scalars.
MemoryPlan small_plan() {
  MemoryPlan p;
  TensorId w0 = p.alloc_fc_weight(7, 5, "fc0", 0);
  TensorId b0 = p.alloc_fc_bias(7, "fc0", 0);
  TensorId w1 = p.alloc_fc_weight(3, 7, "fc1", 1);
  for (TensorId w : {w0, b0, w1}) p.alloc_shadow(Family::G, w);
  for (TensorId w : {w0, b0, w1}) p.alloc_shadow(Family::M, w);
  p.alloc_input_labels('A', 4);
  p.alloc_input_data('A', Shape{4, 2, 2, 1});
  p.alloc_feature(Shape{4, 1, 1, 7}, "a", 0, 0, 3);
  p.alloc_feature(Shape{4, 1, 1, 7}, "b", 1, 4, 5);
  p.alloc_step_scalars();
  return p;
}

void expect_error_containing(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    FAIL() << "expected fresco::Error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(MemoryPlan, SlotRule) {
  for (int64_t n : {1, 7, 64, 127, 128, 129, 1000, 784 * 1024}) {
    const uint64_t s32 = slot_bytes_for(DType::F32, n), s16 = slot_bytes_for(DType::F16, n);
    EXPECT_EQ(s16 % 256, 0u);
    EXPECT_EQ(s32, 2 * s16) << n;
    EXPECT_GE(s16, static_cast<uint64_t>(n) * 2);
    EXPECT_EQ(slot_bytes_for(DType::BF16, n), s16);
    EXPECT_EQ(slot_bytes_for(DType::U8, n) % 256, 0u);
  }
}

TEST(MemoryPlan, OffsetsAlignedOrderedAndContiguous) {
  MemoryPlan p = small_plan();
  p.finalize();
  uint64_t prev_end = 0;
  for (int r = 0; r < kRegionCount; ++r) {
    const RegionSpan s = p.region(static_cast<Region>(r));
    EXPECT_GE(s.offset, prev_end);
    prev_end = s.offset + s.bytes;
  }
  for (const auto& t : p.tensors()) EXPECT_EQ(t.offset % 256, 0) << t.name;
  // W, G and M of the same kind are in lock-step: same count, same slot sizes, same order.
  const auto w = p.tensors_in(Region::W_FC_WEIGHT), g = p.tensors_in(Region::G_FC_WEIGHT);
  ASSERT_EQ(w.size(), 2u);
  ASSERT_EQ(g.size(), 2u);
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(p.tensor(g[i]).param_of, w[i]);
    EXPECT_EQ(p.tensor(g[i]).slot_bytes, p.tensor(w[i]).slot_bytes);
  }
  EXPECT_EQ(p.region(Region::W_FC_WEIGHT).bytes, p.region(Region::G_FC_WEIGHT).bytes);
  EXPECT_GE(p.total_bytes(), prev_end + kTailGuardBytes);
}

TEST(MemoryPlan, FeaturesShareSlotsOnlyWhenLifetimesAreDisjoint) {
  MemoryPlan p = small_plan();
  p.finalize();
  const auto f = p.tensors_in(Region::F_FP32);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(p.tensor(f[0]).offset, p.tensor(f[1]).offset);  // [0,3] and [4,5] do not overlap
  MemoryPlan q;
  q.alloc_feature(Shape{4, 1, 1, 7}, "a", 0, 0, 3);
  q.alloc_feature(Shape{4, 1, 1, 7}, "b", 1, 3, 5);
  q.finalize();
  const auto g = q.tensors_in(Region::F_FP32);
  EXPECT_NE(q.tensor(g[0]).offset, q.tensor(g[1]).offset);
}

TEST(MemoryPlan, RejectsMisalignment) {
  MemoryPlan p = small_plan();
  p.finalize();
  p.mutable_tensor(0).offset += 128;
  expect_error_containing([&] { p.validate(); }, "alignment");
}

TEST(MemoryPlan, RejectsTensorOutsideItsRegion) {
  MemoryPlan p = small_plan();
  p.finalize();
  const TensorId scalars = p.tensors_in(Region::S_SCALARS).at(0);
  p.mutable_tensor(scalars).offset = p.region(Region::W_FC_WEIGHT).offset;
  expect_error_containing([&] { p.validate(); }, "region order");
}

TEST(MemoryPlan, RejectsGapInsideRangeRegion) {
  MemoryPlan p = small_plan();
  p.finalize();
  const auto w = p.tensors_in(Region::W_FC_WEIGHT);
  // Move the first weight up by one alignment unit: it stays in its region and aligned, but leaves a gap.
  p.mutable_tensor(w[0]).offset += 256;
  expect_error_containing([&] { p.validate(); }, "contiguity");
}

TEST(MemoryPlan, RejectsLiveTensorsSharingBytes) {
  MemoryPlan p;
  p.alloc_feature(Shape{4, 1, 1, 7}, "a", 0, 0, 3);
  p.alloc_feature(Shape{4, 1, 1, 7}, "b", 1, 3, 5);
  p.finalize();
  const auto f = p.tensors_in(Region::F_FP32);
  p.mutable_tensor(f[1]).offset = p.tensor(f[0]).offset;
  expect_error_containing([&] { p.validate(); }, "liveness");
}

TEST(MemoryPlan, RejectsBrokenLayerCorrespondence) {
  MemoryPlan p;
  TensorId w0 = p.alloc_fc_weight(7, 5, "fc0", 0);
  p.alloc_fc_weight(3, 7, "fc1", 1);
  p.alloc_shadow(Family::G, w0);  // the gradient of fc1 is missing
  expect_error_containing([&] { p.finalize(); }, "layer correspondence");
}

TEST(MemoryPlan, RejectsAllocationAfterFinalizeAndBadShapes) {
  MemoryPlan p = small_plan();
  EXPECT_THROW(p.alloc_fc_weight(0, 5, "bad", 3), Error);
  p.finalize();
  expect_error_containing([&] { p.alloc_fc_bias(3, "late", 2); }, "after finalize");
}
