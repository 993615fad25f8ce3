// Reference cases of the built-in ops for fresco-plugin-check (see op_cases.h): make_case asks each family
// of cases (cases/*_cases.cpp) in turn; the optional operand forms are in cases/variant_cases.cpp.
#include "op_cases.h"

#include "cases/case_families.h"

namespace fresco::check {

bool make_case(const std::string& op, uint32_t seed, OpCase* c) {
  std::mt19937 rng(seed);
  *c = OpCase{};
  for (auto* family : {pointwise_case, dense_case, conv_case, batchnorm_case, step_case})
    if (family(op, rng, c)) return true;
  return false;
}

}  // namespace fresco::check
