// Region names, families and the family x kind mapping.
#include "fresco/core/region.h"

namespace fresco {

namespace {
constexpr const char* kRegionNames[kRegionCount] = {
    "B_BN_STATS",    "W_BN_BIAS",   "W_BN_WEIGHT",   "W_FC_BIAS",   "W_FC_WEIGHT",   "W_FIRST_CONV",
    "W_DEEP_CONV",   "E_BN_BIAS",   "E_BN_WEIGHT",   "E_FC_BIAS",   "E_FC_WEIGHT",   "E_FIRST_CONV",
    "E_DEEP_CONV",   "A_BN_BIAS",   "A_BN_WEIGHT",   "A_FC_BIAS",   "A_FC_WEIGHT",   "A_FIRST_CONV",
    "A_DEEP_CONV",   "G_BN_BIAS",   "G_BN_WEIGHT",   "G_FC_BIAS",   "G_FC_WEIGHT",   "G_FIRST_CONV",
    "G_DEEP_CONV",   "G16_BN_BIAS", "G16_BN_WEIGHT", "G16_FC_BIAS", "G16_FC_WEIGHT", "G16_FIRST_CONV",
    "G16_DEEP_CONV", "M_BN_BIAS",   "M_BN_WEIGHT",   "M_FC_BIAS",   "M_FC_WEIGHT",   "M_FIRST_CONV",
    "M_DEEP_CONV",   "V_BN_BIAS",   "V_BN_WEIGHT",   "V_FC_BIAS",   "V_FC_WEIGHT",   "V_FIRST_CONV",
    "V_DEEP_CONV",   "N_LARS",      "I_A_LABELS",    "I_A_DATA",    "I_B_LABELS",    "I_B_DATA",
    "F_FP32",        "F_FP16",      "S_SCALARS",     "S_TABLES",    "T_TEMP",        "R_RESULTS"};

constexpr Family kParamFamilies[] = {Family::W,   Family::E, Family::A, Family::G,
                                     Family::G16, Family::M, Family::V};
constexpr int kFirstParamRegion = static_cast<int>(Region::W_BN_BIAS);
}  // namespace

const char* region_name(Region r) noexcept {
  int i = static_cast<int>(r);
  return i >= 0 && i < kRegionCount ? kRegionNames[i] : "?";
}

Family region_family(Region r) noexcept {
  int i = static_cast<int>(r);
  if (r == Region::B_BN_STATS) return Family::B;
  if (i >= kFirstParamRegion && i < kFirstParamRegion + 7 * kParamKinds)
    return kParamFamilies[(i - kFirstParamRegion) / kParamKinds];
  switch (r) {
    case Region::N_LARS:
      return Family::N;
    case Region::I_A_LABELS:
    case Region::I_A_DATA:
    case Region::I_B_LABELS:
    case Region::I_B_DATA:
      return Family::I;
    case Region::F_FP32:
    case Region::F_FP16:
      return Family::F;
    case Region::S_SCALARS:
    case Region::S_TABLES:
      return Family::S;
    case Region::T_TEMP:
      return Family::T;
    default:
      return Family::R;
  }
}

const char* family_name(Family f) noexcept {
  constexpr const char* names[] = {"B", "W", "E", "A", "G", "G16", "M", "V", "N", "I", "F", "S", "T", "R"};
  return names[static_cast<int>(f)];
}

Region param_region(Family family, ParamKind kind) noexcept {
  for (int f = 0; f < 7; ++f)
    if (kParamFamilies[f] == family)
      return static_cast<Region>(kFirstParamRegion + f * kParamKinds + static_cast<int>(kind));
  return Region::COUNT;
}

ParamKind region_param_kind(Region r) noexcept {
  int i = static_cast<int>(r);
  if (i >= kFirstParamRegion && i < kFirstParamRegion + 7 * kParamKinds)
    return static_cast<ParamKind>((i - kFirstParamRegion) % kParamKinds);
  return ParamKind::COUNT;
}

}  // namespace fresco
