// MemoryPlan: semantic allocation, one-cursor offset assignment, liveness sharing in F, and the four
// validations.
#include "fresco/core/memory_plan.h"

#include <algorithm>

#include "fresco/core/error.h"
#include "fresco/ops.h"

namespace fresco {

namespace {
uint64_t round_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

std::string where(const DTensor& t) {
  return "tensor '" + t.name + "' (id " + std::to_string(t.id) + ", region " + region_name(t.region) + ")";
}
}  // namespace

uint64_t slot_bytes_for(DType dtype, int64_t numel) noexcept {
  const uint64_t n = numel > 0 ? static_cast<uint64_t>(numel) : 0;
  const uint64_t half_slot = round_up(n * 2, kSlotAlign);  // the FP16 slot of this shape
  switch (dtype_size(dtype)) {
    case 4:
      return 2 * half_slot;
    case 2:
      return half_slot;
    default:
      return round_up(n, kSlotAlign);
  }
}

TensorId MemoryPlan::add(DTensor t) {
  FRESCO_CHECK(!finalized_, ErrorCode::kUsage,
               "MemoryPlan: cannot allocate '" + t.name + "' after finalize() (phase MEMORY_LOCKED)");
  FRESCO_CHECK(t.shape.n > 0 && t.shape.h > 0 && t.shape.w > 0 && t.shape.c > 0, ErrorCode::kBadConfig,
               "MemoryPlan: tensor '" + t.name + "' has a non-positive dimension " + t.shape.str());
  // 8: the bytes of an fp32 slot per element, with its fp16 twin (slot_bytes_for)
  const int64_t slot = checked_product({8, t.shape.n, t.shape.h, t.shape.w, t.shape.c});
  FRESCO_CHECK(slot >= 0 && slot <= kMaxTensorBytes, ErrorCode::kBadConfig,
               "MemoryPlan: tensor '" + t.name + "' of shape " + t.shape.str() +
                   " is too large (at most 2^40 bytes per tensor)");
  t.id = static_cast<TensorId>(tensors_.size());
  t.slot_bytes = std::max(t.slot_bytes, slot_bytes_for(t.dtype, t.shape.numel()));
  tensors_.push_back(std::move(t));
  return tensors_.back().id;
}

TensorId MemoryPlan::alloc(Region region, DType dtype, const Shape& shape, std::string name, int32_t layer) {
  DTensor t;
  t.name = std::move(name);
  t.layer = layer;
  t.region = region;
  t.dtype = dtype;
  t.shape = shape;
  return add(std::move(t));
}

TensorId MemoryPlan::alloc_param(ParamKind kind, const Shape& shape, std::string name, int32_t layer) {
  return alloc(param_region(Family::W, kind), DType::F32, shape, std::move(name), layer);
}

TensorId MemoryPlan::alloc_fc_weight(int64_t out, int64_t in, const std::string& layer_name, int32_t layer) {
  return alloc_param(ParamKind::FC_WEIGHT, Shape{out, 1, 1, in}, layer_name + ".weight", layer);
}

TensorId MemoryPlan::alloc_fc_bias(int64_t out, const std::string& layer_name, int32_t layer) {
  return alloc_param(ParamKind::FC_BIAS, Shape{1, 1, 1, out}, layer_name + ".bias", layer);
}

TensorId MemoryPlan::alloc_shadow(Family family, TensorId w, DType dtype) {
  const DTensor& p = tensor(w);
  FRESCO_CHECK(region_family(p.region) == Family::W, ErrorCode::kInternal,
               "alloc_shadow: " + where(p) + " is not a master weight");
  DTensor t;
  t.name = std::string(family_name(family)) + "(" + p.name + ")";
  t.layer = p.layer;
  t.region = param_region(family, region_param_kind(p.region));
  t.dtype = dtype;
  t.shape = p.shape;
  t.param_of = w;
  return add(std::move(t));
}

TensorId MemoryPlan::alloc_feature(const Shape& shape, std::string name, int32_t layer, int32_t live_begin,
                                   int32_t live_end, DType dtype) {
  FRESCO_CHECK(dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16, ErrorCode::kInternal,
               "alloc_feature: '" + name + "' must be f32, f16 or bf16");
  DTensor t;
  t.name = std::move(name);
  t.layer = layer;
  t.dtype = dtype;
  t.region = dtype_size(dtype) == 2 ? Region::F_FP16 : Region::F_FP32;
  t.shape = shape;
  t.live_begin = live_begin;
  t.live_end = std::max(live_begin, live_end);
  clock_ = std::max(clock_, t.live_end + 1);
  return add(std::move(t));
}

TensorId MemoryPlan::alloc_input_labels(char buffer, int64_t batch) {
  return alloc(buffer == 'A' ? Region::I_A_LABELS : Region::I_B_LABELS, DType::I32, Shape{batch, 1, 1, 1},
               std::string("input_") + buffer + ".labels");
}

TensorId MemoryPlan::alloc_input_data(char buffer, const Shape& batch_shape) {
  return alloc(buffer == 'A' ? Region::I_A_DATA : Region::I_B_DATA, DType::U8, batch_shape,
               std::string("input_") + buffer + ".data");
}

TensorId MemoryPlan::alloc_step_scalars(const char* name) {
  return alloc(Region::S_SCALARS, DType::U8, Shape{1, 1, 1, sizeof(FrStepScalars)}, name);
}

TensorId MemoryPlan::alloc_lr_table(int64_t steps, const char* name) {
  return alloc(Region::S_TABLES, DType::F32, Shape{1, 1, 1, std::max<int64_t>(steps, 1)}, name);
}

TensorId MemoryPlan::alloc_temp(DType dtype, const Shape& shape, std::string name) {
  return alloc(Region::T_TEMP, dtype, shape, std::move(name));
}

TensorId MemoryPlan::alloc_result(uint64_t bytes, std::string name) {
  return alloc(Region::R_RESULTS, DType::U8, Shape{1, 1, 1, static_cast<int64_t>(bytes)}, std::move(name));
}

const DTensor& MemoryPlan::tensor(TensorId id) const {
  FRESCO_CHECK(id >= 0 && static_cast<size_t>(id) < tensors_.size(), ErrorCode::kInternal,
               "MemoryPlan: no tensor with id " + std::to_string(id));
  return tensors_[static_cast<size_t>(id)];
}

DTensor& MemoryPlan::mutable_tensor(TensorId id) {
  (void)tensor(id);
  return tensors_[static_cast<size_t>(id)];
}

std::vector<TensorId> MemoryPlan::tensors_in(Region r) const {
  std::vector<TensorId> ids;
  for (const auto& t : tensors_)
    if (t.region == r) ids.push_back(t.id);
  if (finalized_)
    std::stable_sort(ids.begin(), ids.end(),
                     [&](TensorId a, TensorId b) { return tensor(a).offset < tensor(b).offset; });
  return ids;
}

RegionSpan MemoryPlan::region_range(Region first, Region last) const noexcept {
  const RegionSpan a = region(first), b = region(last);
  return {a.offset, b.offset + b.bytes - a.offset};
}

void MemoryPlan::finalize() {
  FRESCO_CHECK(!finalized_, ErrorCode::kUsage, "MemoryPlan::finalize() called twice");
  uint64_t cursor = 0;
  for (int ri = 0; ri < kRegionCount; ++ri) {
    const Region r = static_cast<Region>(ri);
    std::vector<DTensor*> members;
    for (auto& t : tensors_)
      if (t.region == r) members.push_back(&t);
    spans_[ri].offset = cursor;
    if (region_family(r) == Family::F) {
      // First fit by lifetime: a tensor may take bytes that no lifetime-overlapping tensor holds.
      std::vector<DTensor*> order = members;
      std::stable_sort(order.begin(), order.end(),
                       [](const DTensor* a, const DTensor* b) { return a->slot_bytes > b->slot_bytes; });
      std::vector<DTensor*> placed;
      uint64_t extent = 0;
      for (DTensor* t : order) {
        std::vector<std::pair<uint64_t, uint64_t>> busy;
        for (DTensor* p : placed)
          if (p->live_begin <= t->live_end && t->live_begin <= p->live_end)
            busy.emplace_back(static_cast<uint64_t>(p->offset) - cursor,
                              static_cast<uint64_t>(p->offset) - cursor + p->slot_bytes);
        std::sort(busy.begin(), busy.end());
        uint64_t at = 0;
        for (const auto& [b, e] : busy) {
          if (at + t->slot_bytes <= b) break;
          at = std::max(at, e);
        }
        t->offset = static_cast<int64_t>(cursor + at);
        extent = std::max(extent, at + t->slot_bytes);
        placed.push_back(t);
      }
      cursor += extent;
    } else {
      for (DTensor* t : members) {
        t->offset = static_cast<int64_t>(cursor);
        cursor += t->slot_bytes;
      }
    }
    spans_[ri].bytes = cursor - spans_[ri].offset;
  }
  total_bytes_ = cursor + kTailGuardBytes;
  finalized_ = true;
  validate();
}

void MemoryPlan::validate() const {
  FRESCO_CHECK(finalized_, ErrorCode::kUsage, "MemoryPlan::validate() before finalize()");
  // 1. Alignment.
  for (const auto& t : tensors_)
    FRESCO_CHECK(
        t.offset >= 0 && t.offset % static_cast<int64_t>(kSlotAlign) == 0 && t.slot_bytes % kSlotAlign == 0,
        ErrorCode::kInternal,
        "MemoryPlan alignment: " + where(t) + " at offset " + std::to_string(t.offset) + " with slot " +
            std::to_string(t.slot_bytes) + " bytes is not " + std::to_string(kSlotAlign) + "-byte aligned");
  // 2. Region order: spans ascend in enum order and every tensor lies inside its own region.
  uint64_t prev_end = 0;
  for (int ri = 0; ri < kRegionCount; ++ri) {
    FRESCO_CHECK(spans_[ri].offset >= prev_end, ErrorCode::kInternal,
                 std::string("MemoryPlan region order: region ") + region_name(static_cast<Region>(ri)) +
                     " starts at " + std::to_string(spans_[ri].offset) +
                     " before the end of the previous region (" + std::to_string(prev_end) + ")");
    prev_end = spans_[ri].offset + spans_[ri].bytes;
  }
  for (const auto& t : tensors_) {
    const RegionSpan s = spans_[static_cast<int>(t.region)];
    const uint64_t off = static_cast<uint64_t>(t.offset);
    FRESCO_CHECK(off >= s.offset && off + t.slot_bytes <= s.offset + s.bytes, ErrorCode::kInternal,
                 "MemoryPlan region order: " + where(t) + " occupies [" + std::to_string(off) + ", " +
                     std::to_string(off + t.slot_bytes) + ") outside its region [" +
                     std::to_string(s.offset) + ", " + std::to_string(s.offset + s.bytes) + ")");
  }
  // 3. Contiguity: outside F, a region's tensors tile it exactly (range ops cover them as one block); inside
  // F,
  //    tensors sharing bytes must have disjoint lifetimes.
  for (int ri = 0; ri < kRegionCount; ++ri) {
    const Region r = static_cast<Region>(ri);
    std::vector<const DTensor*> m;
    for (const auto& t : tensors_)
      if (t.region == r) m.push_back(&t);
    std::sort(m.begin(), m.end(), [](const DTensor* a, const DTensor* b) { return a->offset < b->offset; });
    if (region_family(r) == Family::F) {
      for (size_t i = 0; i < m.size(); ++i)
        for (size_t j = i + 1; j < m.size(); ++j) {
          const bool bytes_overlap = m[j]->offset < m[i]->offset + static_cast<int64_t>(m[i]->slot_bytes);
          const bool live_overlap = m[i]->live_begin <= m[j]->live_end && m[j]->live_begin <= m[i]->live_end;
          FRESCO_CHECK(!(bytes_overlap && live_overlap), ErrorCode::kInternal,
                       "MemoryPlan liveness: " + where(*m[i]) + " and " + where(*m[j]) +
                           " share bytes while both are alive");
        }
      continue;
    }
    uint64_t expect = spans_[ri].offset;
    for (const DTensor* t : m) {
      FRESCO_CHECK(static_cast<uint64_t>(t->offset) == expect, ErrorCode::kInternal,
                   "MemoryPlan contiguity: " + where(*t) + " starts at " + std::to_string(t->offset) +
                       ", expected " + std::to_string(expect) + " (gap or overlap inside the region)");
      expect += t->slot_bytes;
    }
    FRESCO_CHECK(expect == spans_[ri].offset + spans_[ri].bytes, ErrorCode::kInternal,
                 std::string("MemoryPlan contiguity: region ") + region_name(r) + " has " +
                     std::to_string(spans_[ri].offset + spans_[ri].bytes - expect) +
                     " unassigned bytes at its end");
  }
  // 4. Layer correspondence: every non-empty shadow family lists the W tensors of that kind, in order.
  constexpr Family kShadows[] = {Family::E, Family::A, Family::G, Family::G16, Family::M, Family::V};
  for (int k = 0; k < kParamKinds; ++k) {
    const auto kind = static_cast<ParamKind>(k);
    const std::vector<TensorId> w = tensors_in(param_region(Family::W, kind));
    for (Family f : kShadows) {
      const Region sr = param_region(f, kind);
      const std::vector<TensorId> s = tensors_in(sr);
      if (s.empty()) continue;
      FRESCO_CHECK(s.size() == w.size(), ErrorCode::kInternal,
                   std::string("MemoryPlan layer correspondence: region ") + region_name(sr) + " holds " +
                       std::to_string(s.size()) + " tensors but " +
                       region_name(param_region(Family::W, kind)) + " holds " + std::to_string(w.size()));
      for (size_t i = 0; i < s.size(); ++i) {
        const DTensor& st = tensor(s[i]);
        const DTensor& wt = tensor(w[i]);
        FRESCO_CHECK(st.param_of == wt.id, ErrorCode::kInternal,
                     "MemoryPlan layer correspondence: " + where(st) + " is at position " +
                         std::to_string(i) + " but shadows tensor id " + std::to_string(st.param_of) +
                         ", expected '" + wt.name + "'");
        const uint64_t expect_slot = dtype_size(st.dtype) == 4 ? wt.slot_bytes : wt.slot_bytes / 2;
        FRESCO_CHECK(st.slot_bytes == expect_slot, ErrorCode::kInternal,
                     "MemoryPlan layer correspondence: " + where(st) + " slot " +
                         std::to_string(st.slot_bytes) + " bytes, expected " + std::to_string(expect_slot) +
                         " (lock-step with '" + wt.name + "')");
      }
    }
  }
}

}  // namespace fresco
