// CPU concat over channels (NHWC) and its backward, the split: y[r, 0:Ca] = a[r], y[r, Ca:Ca+Cb] = b[r] for
// every position r. Test: test_add_gelu_flatten.cpp.
#include <cstring>

#include "cpu_common.h"
#include "fresco/concat_geometry.hpp"

namespace fresco::cpu {

using sdk::concat_shape;
using sdk::ConcatShape;

FR_CPU_KERNEL_RUN(concat) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 2, 1, 0, 0, "concat");
    const ConcatShape s = concat_shape(call->in[0], call->in[1], call->out[0], "concat");
    const float *a = sdk::data<float>(call->in[0]), *b = sdk::data<float>(call->in[1]);
    float* y = sdk::data<float>(call->out[0]);
    parallel_chunks(s.rows, 256, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        std::memcpy(y + r * (s.ca + s.cb), a + r * s.ca, static_cast<size_t>(s.ca) * sizeof(float));
        std::memcpy(y + r * (s.ca + s.cb) + s.ca, b + r * s.cb, static_cast<size_t>(s.cb) * sizeof(float));
      }
    });
  });
}

FR_CPU_KERNEL_RUN(concat_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 2, 0, 0, "concat_backward");
    const ConcatShape s = concat_shape(call->out[0], call->out[1], call->in[0], "concat_backward");
    const float* dy = sdk::data<float>(call->in[0]);
    float *da = sdk::data<float>(call->out[0]), *db = sdk::data<float>(call->out[1]);
    parallel_chunks(s.rows, 256, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        std::memcpy(da + r * s.ca, dy + r * (s.ca + s.cb), static_cast<size_t>(s.ca) * sizeof(float));
        std::memcpy(db + r * s.cb, dy + r * (s.ca + s.cb) + s.ca, static_cast<size_t>(s.cb) * sizeof(float));
      }
    });
  });
}

}  // namespace fresco::cpu
