// CPU input normalisation: uint8 NHWC -> f32, y = (x / 255 - mean[c]) / std[c]; optionally copies the batch's
// labels. Test: tests/plugins/cpu/test_normalize_input.cpp.
#include <cstring>

#include "cpu_common.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(normalize_input) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "normalize_input");
    const auto& p = sdk::params<FrNormalizeParams>(call);
    const auto& xt = call->in[0];
    expect_dtype(xt, FR_U8, "normalize_input x");
    const int64_t n = sdk::numel(xt), c = p.channels;
    FR_PLUGIN_CHECK(
        c >= 1 && c <= FR_MAX_NORM_CHANNELS && xt.dims[3] == c, FR_ERR_INVALID_ARGUMENT,
        "normalize_input: channels " + std::to_string(c) + " vs tensor C " + std::to_string(xt.dims[3]));
    FR_PLUGIN_CHECK(sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT, "normalize_input: sizes differ");
    if (call->n_in >= 2 && call->n_out >= 2) {  // the batch's labels, copied in the same node
      expect_dtype(call->in[1], FR_I32, "normalize_input labels");
      const int64_t nl = sdk::numel(call->in[1]);
      FR_PLUGIN_CHECK(sdk::numel(call->out[1]) == nl, FR_ERR_INVALID_ARGUMENT,
                      "normalize_input: label sizes differ");
      std::memcpy(call->out[1].data, call->in[1].data, static_cast<size_t>(nl) * sizeof(int32_t));
    }
    const uint8_t* x = sdk::data<uint8_t>(xt);
    float* y = sdk::data<float>(call->out[0]);
    if (c == 1) {  // the common grey-scale case as a flat loop, so it vectorises
      const float mean = p.mean[0], stdv = p.std[0];
      parallel_chunks(n, 1 << 15, [&](int64_t a, int64_t b) {
        for (int64_t i = a; i < b; ++i) y[i] = (static_cast<float>(x[i]) / 255.0f - mean) / stdv;
      });
      return;
    }
    parallel_chunks(n / c, 1 << 13, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i)
        for (int64_t ch = 0; ch < c; ++ch)
          y[i * c + ch] = (static_cast<float>(x[i * c + ch]) / 255.0f - p.mean[ch]) / p.std[ch];
    });
  });
}

}  // namespace fresco::cpu
