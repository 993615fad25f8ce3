// Region: the semantic role of a tensor. Regions are laid out in this enum's order, each contiguous.
// Invariant: the parameter families W, E, A, G, G16, M, V list the same six kinds in the same order, so one
// range op covers "all FC weights" or "every no-decay tensor" of any family. Tested by test_memory_plan.cpp.
#pragma once

#include <cstdint>

namespace fresco {

// Kinds of parameter tensors, in layout order: the no-decay kinds (1-D) first, then the decayed ones.
enum class ParamKind : uint8_t { BN_BIAS, BN_WEIGHT, FC_BIAS, FC_WEIGHT, FIRST_CONV, DEEP_CONV, COUNT };
constexpr int kParamKinds = static_cast<int>(ParamKind::COUNT);

enum class Region : uint8_t {
  B_BN_STATS,
  // W: FP32 master weights
  W_BN_BIAS,
  W_BN_WEIGHT,
  W_FC_BIAS,
  W_FC_WEIGHT,
  W_FIRST_CONV,
  W_DEEP_CONV,
  // E: EMA weights
  E_BN_BIAS,
  E_BN_WEIGHT,
  E_FC_BIAS,
  E_FC_WEIGHT,
  E_FIRST_CONV,
  E_DEEP_CONV,
  // A: low-precision compute copies
  A_BN_BIAS,
  A_BN_WEIGHT,
  A_FC_BIAS,
  A_FC_WEIGHT,
  A_FIRST_CONV,
  A_DEEP_CONV,
  // G: FP32 gradients, G16: low-precision gradients
  G_BN_BIAS,
  G_BN_WEIGHT,
  G_FC_BIAS,
  G_FC_WEIGHT,
  G_FIRST_CONV,
  G_DEEP_CONV,
  G16_BN_BIAS,
  G16_BN_WEIGHT,
  G16_FC_BIAS,
  G16_FC_WEIGHT,
  G16_FIRST_CONV,
  G16_DEEP_CONV,
  // M, V: first and second moments (M is the momentum buffer for SGD)
  M_BN_BIAS,
  M_BN_WEIGHT,
  M_FC_BIAS,
  M_FC_WEIGHT,
  M_FIRST_CONV,
  M_DEEP_CONV,
  V_BN_BIAS,
  V_BN_WEIGHT,
  V_FC_BIAS,
  V_FC_WEIGHT,
  V_FIRST_CONV,
  V_DEEP_CONV,
  N_LARS,
  // I: A/B input buffers; labels then data, so one copy moves a whole staged batch
  I_A_LABELS,
  I_A_DATA,
  I_B_LABELS,
  I_B_DATA,
  // F: features and feature gradients (slots shared by liveness)
  F_FP32,
  F_FP16,
  // S: scalars, schedule tables, masks
  S_SCALARS,
  S_TABLES,
  // T: temporaries; R: results
  T_TEMP,
  R_RESULTS,
  COUNT
};
constexpr int kRegionCount = static_cast<int>(Region::COUNT);

enum class Family : uint8_t { B, W, E, A, G, G16, M, V, N, I, F, S, T, R };

const char* region_name(Region r) noexcept;
Family region_family(Region r) noexcept;
const char* family_name(Family f) noexcept;
// For the parameter families: the region of `kind` in `family` (W, E, A, G, G16, M, V).
Region param_region(Family family, ParamKind kind) noexcept;
// For a parameter-family region: its kind; ParamKind::COUNT otherwise.
ParamKind region_param_kind(Region r) noexcept;

}  // namespace fresco
