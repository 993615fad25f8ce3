// Reference cases for fresco-plugin-check: for each built-in op, random inputs in the op's tensor/range order
// (sdk/include/fresco/ops.h) and a comparison of the kernel's outputs with the double-precision reference
// implementations of tests/reference. An op without a case is reported as unchecked.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fresco/ops.h"
#include "fresco/plugin.h"

namespace fresco::check {

struct Operand {
  std::vector<uint8_t> host;  // initial contents (also the size)
  uint32_t dtype = FR_F32;
  int64_t dims[4] = {1, 1, 1, 1};
  // The operand starts this many bytes past an aligned allocation: a kernel's vector paths must check their
  // pointers (the SDK promises no alignment) and fall back.
  uint32_t offset = 0;
};

struct OpCase {
  std::vector<Operand> in, out, rin, rout;
  std::vector<uint8_t> params;
  uint32_t dtype = FR_F32;  // the dtype the kernel is asked for
  double tolerance = 1e-5;  // on the worst relative error, max|a - ref| / max|ref|
  // FR_KERNEL_* bits of an optional operand form the case uses: checked only on kernels that declare them.
  uint32_t requires_flags = 0;
  // Worst relative error of the kernel's results: out tensors then rout ranges, as downloaded.
  std::function<double(const std::vector<std::vector<uint8_t>>& out,
                       const std::vector<std::vector<uint8_t>>& rout)>
      error;
};

// Fills `c` for op `name`; false when there is no reference for it.
bool make_case(const std::string& name, uint32_t seed, OpCase* c);

// The op's optional operand forms (ops.h) beyond make_case's, each named: conv2d with its sums output and
// with a batchnorm prologue, batchnorm and batchnorm_add given sums, batchnorm's statistics-only form,
// normalize_input with the labels and with unaligned operands, sgd_update and adam_update with the 16-bit
// gradients, check_grads on finite gradients. Empty for other ops.
std::vector<std::pair<std::string, OpCase>> make_variant_cases(const std::string& name, uint32_t seed);

}  // namespace fresco::check
