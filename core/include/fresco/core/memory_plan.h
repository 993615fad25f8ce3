// MemoryPlan: every tensor of a compiled job gets a fixed byte offset in its semantic region.
// Invariants (checked by finalize()): regions in enum order, each contiguous; 256-byte aligned slots; an FP32
// slot is exactly twice the FP16 slot of the same shape; W/G/M/V/E/A list the same tensors in the same layer
// order; F-region slots are shared only by tensors whose lifetimes do not overlap. Tested by
// test_memory_plan.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "fresco/core/region.h"
#include "fresco/core/types.h"

namespace fresco {

using TensorId = int32_t;
constexpr TensorId kNoTensor = -1;
constexpr uint64_t kSlotAlign = 256;
constexpr uint64_t kTailGuardBytes = 256;

// A descriptor, never memory. The same DTensor has the same offset on every rank and in every variant.
struct DTensor {
  TensorId id = kNoTensor;
  std::string name;    // e.g. "fc1.weight", "relu2.out", "grad(fc1.out)"
  int32_t layer = -1;  // index into the ArchPlan, -1 for job-level tensors
  Region region = Region::T_TEMP;
  DType dtype = DType::F32;
  Shape shape;                           // the shape in this plan's variant
  uint64_t slot_bytes = 0;               // the largest slot over all variants
  int64_t offset = -1;                   // set by finalize()
  int32_t live_begin = 0, live_end = 0;  // F-region lifetime in the step timeline (inclusive)
  TensorId param_of = kNoTensor;         // for G/M/V/E/A tensors: the W tensor they shadow
  bool batched = false;                  // shape.n is the batch size of the plan's variant
};

struct RegionSpan {
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// Bytes of a slot holding `numel` elements of `dtype` (the slot rule).
uint64_t slot_bytes_for(DType dtype, int64_t numel) noexcept;
// The largest slot one tensor may take (1 TiB, far beyond any device; a larger or overflowing shape is a
// configuration error, refused when the tensor is added).
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 40;

class MemoryPlan {
 public:
  // Generic allocation; prefer the semantic alloc_* below, which name the role.
  TensorId alloc(Region region, DType dtype, const Shape& shape, std::string name, int32_t layer = -1);

  TensorId alloc_param(ParamKind kind, const Shape& shape, std::string name, int32_t layer);
  TensorId alloc_fc_weight(int64_t out, int64_t in, const std::string& layer_name, int32_t layer);
  TensorId alloc_fc_bias(int64_t out, const std::string& layer_name, int32_t layer);
  // The shadow of W tensor `w` in another parameter family (G, M, V, E, A, G16).
  TensorId alloc_shadow(Family family, TensorId w, DType dtype = DType::F32);
  // A feature map or feature gradient, alive over [live_begin, live_end]: in F_FP32, or in F_FP16 for the
  // 2-byte dtypes (f16, bf16).
  TensorId alloc_feature(const Shape& shape, std::string name, int32_t layer, int32_t live_begin,
                         int32_t live_end, DType dtype = DType::F32);
  TensorId alloc_input_labels(char buffer, int64_t batch);
  TensorId alloc_input_data(char buffer, const Shape& batch_shape);
  TensorId alloc_step_scalars(const char* name = "step_scalars");         // also the deferred update's copy
  TensorId alloc_lr_table(int64_t steps, const char* name = "lr_table");  // also the momentum table
  TensorId alloc_temp(DType dtype, const Shape& shape, std::string name);
  TensorId alloc_result(uint64_t bytes, std::string name);

  // Assigns offsets with one cursor over the regions in order, then validates. Throws fresco::Error naming
  // the region and tensor on any violation.
  void finalize();
  // The four validations, callable again after finalize() (tests break a layout on purpose and call this).
  void validate() const;
  bool finalized() const noexcept { return finalized_; }

  const DTensor& tensor(TensorId id) const;
  DTensor& mutable_tensor(TensorId id);  // shapes per variant; offsets only in tests
  const std::vector<DTensor>& tensors() const noexcept { return tensors_; }
  size_t size() const noexcept { return tensors_.size(); }
  uint64_t total_bytes() const noexcept { return total_bytes_; }
  RegionSpan region(Region r) const noexcept { return spans_[static_cast<int>(r)]; }
  // Contiguous span from the start of `first` to the end of `last` (inclusive).
  RegionSpan region_range(Region first, Region last) const noexcept;
  // Tensors of a region in layout order.
  std::vector<TensorId> tensors_in(Region r) const;
  int32_t lifetime_clock() const noexcept { return clock_; }

 private:
  TensorId add(DTensor t);
  std::vector<DTensor> tensors_;
  std::array<RegionSpan, kRegionCount> spans_{};
  uint64_t total_bytes_ = 0;
  int32_t clock_ = 0;
  bool finalized_ = false;
};

}  // namespace fresco
