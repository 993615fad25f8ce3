// plugins/cuda/ops/conv3x3_wgmma.cu run directly: the forward with and without the sums partials and the
// input gradient, fp16 and bf16, against double-precision sums of the same rounded values on the host.
// Shapes: one tile (a phantom second tile), an odd tile count, and enough tiles per block (few blocks) that
// every window buffer is reused many times. The batchnorm prologue (ops.h) against the same kernels on the
// applied map. Outputs are poisoned with NaN before each run, so an element left
// unwritten fails; a second run must give the same bits. The input gradient's batchnorm epilogue against the
// plain input gradient masked on the host. Skips unless the device can run the kernels (compute
// capability 9.0).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "ops/conv3x3_wgmma.h"
#include "plugins/cuda/cuda_device_test.h"

namespace fresco::cuda {
namespace {

constexpr int kC = 64, kW = 32;

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// 16-bit values of one dtype, with their exact float values.
struct Values {
  std::vector<uint16_t> bits;
  std::vector<double> v;
};

uint16_t to_bits(float f, FrDType t) {
  if (t == FR_F16) return static_cast<__half_raw>(__float2half_rn(f)).x;
  return static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(f)).x;
}
double from_bits(uint16_t b, FrDType t) {
  if (t == FR_F16) {
    __half_raw r;
    r.x = b;
    return __half2float(__half(r));
  }
  __nv_bfloat16_raw r;
  r.x = b;
  return __bfloat162float(__nv_bfloat16(r));
}

Values random_values(size_t n, float scale, FrDType t, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-scale, scale);
  Values r;
  r.bits.resize(n);
  r.v.resize(n);
  for (size_t i = 0; i < n; ++i) r.bits[i] = to_bits(d(rng), t), r.v[i] = from_bits(r.bits[i], t);
  return r;
}

// out[n, p, q, o] = sum over taps and input channels i of in[n, p + r - 1, q + s - 1, i] * wt(o, r, s, i),
// with sum |terms| in mag (zero padding).
template <class Weight>
void reference(const std::vector<double>& in, int n, int h, Weight wt, std::vector<double>& out,
               std::vector<double>& mag) {
  out.assign(static_cast<size_t>(n) * h * kW * kC, 0.0);
  mag.assign(out.size(), 0.0);
  for (int b = 0; b < n; ++b)
    for (int p = 0; p < h; ++p)
      for (int q = 0; q < kW; ++q)
        for (int o = 0; o < kC; ++o) {
          double s = 0.0, g = 0.0;
          for (int r = 0; r < 3; ++r)
            for (int t = 0; t < 3; ++t) {
              const int y = p + r - 1, x = q + t - 1;
              if (y < 0 || y >= h || x < 0 || x >= kW) continue;
              const double* row = &in[((static_cast<size_t>(b) * h + y) * kW + x) * kC];
              for (int i = 0; i < kC; ++i) {
                const double term = row[i] * wt(o, r, t, i);
                s += term, g += std::fabs(term);
              }
            }
          const size_t at = ((static_cast<size_t>(b) * h + p) * kW + q) * kC + o;
          out[at] = s, mag[at] = g;
        }
}

struct Geometry {
  int n, h, sm_count;
};

sdk::ConvShape shape_of(const Geometry& g) {
  sdk::ConvShape s{};
  s.n = g.n, s.h = g.h, s.w = kW, s.c = kC, s.k = kC, s.r = 3, s.s = 3, s.p = g.h, s.q = kW, s.g = 1;
  s.cg = kC, s.kg = kC, s.sh = 1, s.sw = 1, s.ph = 1, s.pw = 1, s.dh = 1, s.dw = 1;
  return s;
}

// Each output element within the output's rounding (half an ulp of T, so eps = 2^-11 / 2^-8 relative) plus
// fp32 accumulation error (relative to the sum of |terms|) of the double reference.
void expect_close(const std::vector<uint16_t>& got, const std::vector<double>& want,
                  const std::vector<double>& mag, FrDType t, const std::string& what) {
  const double eps = t == FR_F16 ? 1.0 / 2048 : 1.0 / 256;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = from_bits(got[i], t);
    if (!(std::fabs(g - want[i]) <= eps * std::fabs(want[i]) + 1e-5 * mag[i] + 1e-6)) {
      if (++bad <= 5) ADD_FAILURE() << what << " element " << i << ": got " << g << ", want " << want[i];
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

class Conv3x3Wgmma : public testing::TestWithParam<FrDType> {};

// An epilogue's masked gradient and its sums: both sides of the mask exercised (passed of n elements), and
// the blocks' partials (double pairs per channel, Conv3x3GradSums's layout) added up to the host's double
// sums `want` within 1e-5 of their magnitudes `mag` (second: what the second sum is, for messages).
void expect_masked_sums(size_t passed, size_t n, const void* dpart, int blocks,
                        const std::vector<double>& want, const std::vector<double>& mag, const char* second) {
  EXPECT_GT(passed, n / 5);
  EXPECT_LT(passed, n - n / 5);
  std::vector<double> part(static_cast<size_t>(blocks) * kC * 2), got(2 * kC, 0.0);
  CUDA_OK(cudaMemcpy(part.data(), dpart, part.size() * sizeof(double), cudaMemcpyDeviceToHost));
  for (int bl = 0; bl < blocks; ++bl)
    for (int c = 0; c < kC; ++c)
      got[c] += part[(bl * kC + c) * 2], got[kC + c] += part[(bl * kC + c) * 2 + 1];
  for (int c = 0; c < 2 * kC; ++c)
    EXPECT_NEAR(got[c], want[c], 1e-5 * mag[c] + 1e-6)
        << (c < kC ? "sum g" : second) << ", channel " << c % kC;
}

// An input-gradient epilogue against the plain input gradient: the plain kernel's bits, then the epilogue's
// (launched by `fused`, which returns its blocks) twice from a poisoned dx, which must agree.
struct EpilogueRun {
  std::vector<uint16_t> plain, fused;
  int blocks = 0;
};
template <class Fused>
void run_epilogue(const sdk::ConvShape& g, FrDType t, const void* dy, const void* w, void* dx, size_t nx,
                  int sm_count, Fused fused, EpilogueRun* out) {
  EpilogueRun& r = *out;
  r = EpilogueRun{std::vector<uint16_t>(nx), std::vector<uint16_t>(nx), 0};
  std::vector<uint16_t> again(nx);
  CUDA_OK(cudaMemset(dx, 0xFF, nx * 2));
  launch_conv3x3_wgmma_backward_data(g, t, dy, w, dx, sm_count, nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(r.plain.data(), dx, nx * 2, cudaMemcpyDeviceToHost));
  for (int run = 0; run < 2; ++run) {
    CUDA_OK(cudaMemset(dx, 0xFF, nx * 2));
    r.blocks = fused();
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(run == 0 ? r.fused.data() : again.data(), dx, nx * 2, cudaMemcpyDeviceToHost));
  }
  EXPECT_EQ(r.fused, again) << "two runs differ";
}

// Every element of the epilogue's dx: kept(i) (its expected bits) where pass(i), zero elsewhere; and its sums
// with the second one over centred(i) (x - mean of element i), by expect_masked_sums.
template <class Pass, class Kept, class Centred>
void expect_epilogue(const EpilogueRun& r, FrDType t, const void* dpart, Pass pass, Kept kept,
                     Centred centred, const char* second) {
  ASSERT_GE(r.blocks, 1);
  const size_t nx = r.fused.size();
  std::vector<double> want(2 * kC, 0.0), mag(2 * kC, 0.0);
  size_t passed = 0, wrong = 0;
  for (size_t i = 0; i < nx; ++i) {
    const int c = static_cast<int>(i % kC);
    const bool p = pass(i);
    const uint16_t expect = p ? kept(i) : uint16_t{0};
    if (r.fused[i] != expect && wrong++ < 5)
      ADD_FAILURE() << "dx[" << i << "] bits " << r.fused[i] << ", expected " << expect;
    passed += p;
    const double gv = from_bits(r.fused[i], t), term = gv * centred(i);
    want[c] += gv, want[kC + c] += term, mag[c] += std::fabs(gv), mag[kC + c] += std::fabs(term);
  }
  EXPECT_EQ(wrong, 0u);
  expect_masked_sums(passed, nx, dpart, r.blocks, want, mag, second);
}

TEST_P(Conv3x3Wgmma, ForwardSumsAndBothGradientsMatchTheReference) {
  REQUIRE_GPU();
  if (!conv3x3_wgmma_available(0)) GTEST_SKIP() << "not a compute capability 9.0 device: skipped";
  const FrDType t = GetParam();
  const std::string name = t == FR_F16 ? "f16" : "bf16";
  std::mt19937 rng(11);
  for (const Geometry& geo : {Geometry{1, 4, 132}, Geometry{5, 12, 132}, Geometry{8, 32, 2}}) {
    const sdk::ConvShape g = shape_of(geo);
    SCOPED_TRACE(name + " n " + std::to_string(geo.n) + " h " + std::to_string(geo.h) +
                 " blocks <= " + std::to_string(geo.sm_count));
    ASSERT_TRUE(conv3x3_wgmma_fits(g, t));
    const size_t nx = static_cast<size_t>(geo.n) * geo.h * kW * kC, nw = static_cast<size_t>(kC) * 9 * kC;
    const Values x = random_values(nx, 1.0f, t, rng), w = random_values(nw, 0.06f, t, rng);
    DeviceBuffer dx(nx * 2), dw(nw * 2), dy(nx * 2), dpart(conv3x3_wgmma_partials_bytes(geo.sm_count));
    CUDA_OK(cudaMemcpy(dx.p, x.bits.data(), nx * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dw.p, w.bits.data(), nw * 2, cudaMemcpyHostToDevice));
    auto wv = [&](int o, int r, int s, int i) {
      return w.v[((static_cast<size_t>(o) * 3 + r) * 3 + s) * kC + i];
    };
    std::vector<double> want, mag;
    reference(x.v, geo.n, geo.h, wv, want, mag);

    // forward with the sums partials, twice (the same bits), then without
    std::vector<uint16_t> y(nx), y2(nx);
    int blocks = 0;
    for (int run = 0; run < 2; ++run) {
      CUDA_OK(cudaMemset(dy.p, 0xFF, nx * 2));
      blocks = launch_conv3x3_wgmma_forward(g, t, dx.p, dw.p, dy.p, static_cast<double*>(dpart.p),
                                            geo.sm_count, nullptr);
      CUDA_OK(cudaDeviceSynchronize());
      CUDA_OK(cudaMemcpy(run == 0 ? y.data() : y2.data(), dy.p, nx * 2, cudaMemcpyDeviceToHost));
    }
    EXPECT_EQ(y, y2) << "two runs differ";
    ASSERT_GE(blocks, 1);
    ASSERT_LE(blocks, geo.sm_count);
    expect_close(y, want, mag, t, "y");
    std::vector<double> stored(2 * kC, 0.0), abs_sums(kC, 0.0);
    for (size_t i = 0; i < nx; ++i) {
      const double v = from_bits(y[i], t);
      stored[i % kC] += v, stored[kC + i % kC] += v * v, abs_sums[i % kC] += std::fabs(v);
    }
    // the partials of `blocks` blocks added on the host against the sums of y as stored
    auto expect_sums = [&](int parts, const char* what) {
      std::vector<double> part(static_cast<size_t>(parts) * kC * 2), sums(2 * kC, 0.0);
      CUDA_OK(cudaMemcpy(part.data(), dpart.p, part.size() * sizeof(double), cudaMemcpyDeviceToHost));
      for (int b = 0; b < parts; ++b)
        for (int c = 0; c < kC; ++c)
          sums[c] += part[(b * kC + c) * 2], sums[kC + c] += part[(b * kC + c) * 2 + 1];
      for (int c = 0; c < kC; ++c) {
        EXPECT_NEAR(sums[c], stored[c], 1e-5 * abs_sums[c] + 1e-6) << what << ": sum of channel " << c;
        EXPECT_NEAR(sums[kC + c], stored[kC + c], 1e-5 * stored[kC + c] + 1e-6) << what << ": squares " << c;
      }
    };
    expect_sums(blocks, "sums");
    CUDA_OK(cudaMemset(dy.p, 0xFF, nx * 2));  // the other issue schedule: the same y, sums as close
    const int parts = launch_conv3x3_wgmma_forward(g, t, dx.p, dw.p, dy.p, static_cast<double*>(dpart.p),
                                                   geo.sm_count, nullptr, Conv3x3Schedule::kFree);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(y2.data(), dy.p, nx * 2, cudaMemcpyDeviceToHost));
    EXPECT_EQ(y, y2) << "y differs with the warpgroups issuing freely";
    expect_sums(parts, "the warpgroups issuing freely");
    CUDA_OK(cudaMemset(dy.p, 0xFF, nx * 2));
    launch_conv3x3_wgmma_forward(g, t, dx.p, dw.p, dy.p, nullptr, geo.sm_count, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(y2.data(), dy.p, nx * 2, cudaMemcpyDeviceToHost));
    EXPECT_EQ(y, y2) << "y without the sums differs";

    // input gradient: dx[n, p, q, c] = sum over k, r, s of dy[n, p + 1 - r, q + 1 - s, k] w[k, r, s, c], the
    // forward on dy with w'[c, r', s', k] = w[k, 2 - r', 2 - s', c]
    const Values d = random_values(nx, 1.0f, t, rng);
    CUDA_OK(cudaMemcpy(dy.p, d.bits.data(), nx * 2, cudaMemcpyHostToDevice));
    auto flipped = [&](int c, int r, int s, int k) { return wv(k, 2 - r, 2 - s, c); };
    reference(d.v, geo.n, geo.h, flipped, want, mag);
    CUDA_OK(cudaMemset(dx.p, 0xFF, nx * 2));
    launch_conv3x3_wgmma_backward_data(g, t, dy.p, dw.p, dx.p, geo.sm_count, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(y.data(), dx.p, nx * 2, cudaMemcpyDeviceToHost));
    expect_close(y, want, mag, t, "dx");

    // weight gradient: dw[k, r, s, c] = sum over n, p, q of dy[n, p, q, k] x[n, p + r - 1, q + s - 1, c],
    // twice (the same bits)
    CUDA_OK(cudaMemcpy(dx.p, x.bits.data(), nx * 2, cudaMemcpyHostToDevice));
    DeviceBuffer dws(conv3x3_wgmma_wgrad_workspace(g, geo.sm_count)), ddw(nw * 2);
    std::vector<double> want_w(nw, 0.0), mag_w(nw, 0.0);
    for (int b = 0; b < geo.n; ++b)
      for (int p = 0; p < geo.h; ++p)
        for (int q = 0; q < kW; ++q) {
          const double* dyp = &d.v[((static_cast<size_t>(b) * geo.h + p) * kW + q) * kC];
          for (int r = 0; r < 3; ++r)
            for (int s = 0; s < 3; ++s) {
              const int yy = p + r - 1, xx = q + s - 1;
              if (yy < 0 || yy >= geo.h || xx < 0 || xx >= kW) continue;
              const double* xp = &x.v[((static_cast<size_t>(b) * geo.h + yy) * kW + xx) * kC];
              for (int k = 0; k < kC; ++k)
                for (int c = 0; c < kC; ++c) {
                  const double term = dyp[k] * xp[c];
                  const size_t at = ((static_cast<size_t>(k) * 3 + r) * 3 + s) * kC + c;
                  want_w[at] += term, mag_w[at] += std::fabs(term);
                }
            }
        }
    std::vector<uint16_t> gw(nw), gw2(nw);
    for (int run = 0; run < 2; ++run) {
      CUDA_OK(cudaMemset(ddw.p, 0xFF, nw * 2));
      launch_conv3x3_wgmma_backward_filter(g, t, dy.p, dx.p, ddw.p, dws.p, geo.sm_count, nullptr);
      CUDA_OK(cudaDeviceSynchronize());
      CUDA_OK(cudaMemcpy(run == 0 ? gw.data() : gw2.data(), ddw.p, nw * 2, cudaMemcpyDeviceToHost));
    }
    EXPECT_EQ(gw, gw2) << "two runs of the weight gradient differ";
    expect_close(gw, want_w, mag_w, t, "dw");
  }
}

// A batchnorm's gamma, beta, mean and invstd ([4][64] floats) drawn per channel, beta about beta0.
std::vector<float> random_batchnorm(std::mt19937& rng, float beta0, float beta_scale) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> bn(4 * kC);
  for (int c = 0; c < kC; ++c)
    bn[c] = 1.5f * u(rng), bn[kC + c] = beta0 + beta_scale * u(rng), bn[2 * kC + c] = 0.5f * u(rng),
    bn[3 * kC + c] = 0.5f + std::fabs(u(rng));
  return bn;
}

// Channel c's value before the relu at x: one float fma with scale and shift rounded as ops.h defines them.
float bn_pre_relu(const std::vector<float>& bn, int c, double x) {
  const float scale = bn[c] * bn[3 * kC + c], shift = std::fma(-bn[2 * kC + c], scale, bn[kC + c]);
  return std::fma(static_cast<float>(x), scale, shift);
}

// The batchnorm prologue (ops.h): the forward (with its sums) on x through the prologue gives the bits it
// gives on the applied map, computed on the host (one float fma, the relu, one rounding), and writes that
// map when asked. Shifts are mostly positive, so a window whose padding went through the prologue would
// differ. With `residual` (the join prologue) a random map r is added to the fma's result in float before
// the relu (batchnorm_add's bits), halo rows included.
void check_prologue(FrDType t, bool residual) {
  std::mt19937 rng(residual ? 6 : 5);
  for (const Geometry& geo : {Geometry{1, 4, 132}, Geometry{5, 12, 132}, Geometry{8, 32, 2}}) {
    const sdk::ConvShape g = shape_of(geo);
    SCOPED_TRACE("n " + std::to_string(geo.n) + " h " + std::to_string(geo.h));
    const size_t nx = static_cast<size_t>(geo.n) * geo.h * kW * kC, nw = static_cast<size_t>(kC) * 9 * kC;
    const Values x = random_values(nx, 2.0f, t, rng), w = random_values(nw, 0.06f, t, rng);
    const Values r = residual ? random_values(nx, 1.5f, t, rng) : Values{};
    const std::vector<float> bn = random_batchnorm(rng, 0.3f, 0.5f);  // gamma, beta, mean, invstd
    std::vector<uint16_t> applied(nx);
    size_t zeros = 0;
    for (size_t i = 0; i < nx; ++i) {
      float v = bn_pre_relu(bn, static_cast<int>(i % kC), x.v[i]);
      if (residual) v += static_cast<float>(r.v[i]);
      applied[i] = to_bits(v > 0.0f ? v : 0.0f, t);
      zeros += !(v > 0.0f);
    }
    EXPECT_GT(zeros, nx / 20) << "the relu cuts";
    DeviceBuffer dx(nx * 2), da(nx * 2), dw(nw * 2), dy(nx * 2), dr(nx * 2), dbn(bn.size() * 4),
        dpart(conv3x3_wgmma_partials_bytes(geo.sm_count));
    CUDA_OK(cudaMemcpy(dx.p, x.bits.data(), nx * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dw.p, w.bits.data(), nw * 2, cudaMemcpyHostToDevice));
    if (residual) {
      CUDA_OK(cudaMemcpy(dr.p, r.bits.data(), nx * 2, cudaMemcpyHostToDevice));
    }
    CUDA_OK(cudaMemcpy(dbn.p, bn.data(), bn.size() * 4, cudaMemcpyHostToDevice));
    const auto* b = static_cast<const float*>(dbn.p);
    const Conv3x3Prologue pro{b, b + kC, b + 2 * kC, b + 3 * kC};
    const void* res = residual ? dr.p : nullptr;
    auto fetch = [&](const void* p, size_t n) {
      std::vector<uint16_t> h(n);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      return h;
    };
    auto fetch_parts = [&](int blocks) {
      std::vector<double> h(static_cast<size_t>(blocks) * kC * 2);
      EXPECT_EQ(cudaMemcpy(h.data(), dpart.p, h.size() * sizeof(double), cudaMemcpyDeviceToHost),
                cudaSuccess);
      return h;
    };
    CUDA_OK(cudaMemcpy(da.p, applied.data(), nx * 2, cudaMemcpyHostToDevice));
    // forward: on the applied map, then through the prologue
    CUDA_OK(cudaMemset(dy.p, 0xFF, nx * 2));
    const int blocks = launch_conv3x3_wgmma_forward(g, t, da.p, dw.p, dy.p, static_cast<double*>(dpart.p),
                                                    geo.sm_count, nullptr);
    const std::vector<uint16_t> y = fetch(dy.p, nx);
    const std::vector<double> sums = fetch_parts(blocks);
    if (!residual) {  // (the join prologue always writes its map: the join's output)
      CUDA_OK(cudaMemset(dy.p, 0xFF, nx * 2));
      EXPECT_EQ(launch_conv3x3_wgmma_forward(g, t, dx.p, dw.p, dy.p, static_cast<double*>(dpart.p),
                                             geo.sm_count, nullptr, kConv3x3Schedule, &pro),
                blocks);
      EXPECT_EQ(fetch(dy.p, nx), y) << "forward";
      EXPECT_EQ(fetch_parts(blocks), sums) << "forward sums";
    }
    // and writing the applied map (poisoned first: every element must be written)
    CUDA_OK(cudaMemset(dy.p, 0xFF, nx * 2));
    CUDA_OK(cudaMemset(da.p, 0xFF, nx * 2));
    EXPECT_EQ(launch_conv3x3_wgmma_forward(g, t, dx.p, dw.p, dy.p, static_cast<double*>(dpart.p),
                                           geo.sm_count, nullptr, kConv3x3Schedule, &pro, da.p, res),
              blocks);
    EXPECT_EQ(fetch(dy.p, nx), y) << "forward writing the applied map";
    EXPECT_EQ(fetch_parts(blocks), sums) << "forward sums writing the applied map";
    EXPECT_EQ(fetch(da.p, nx), applied) << "the applied map";
  }
}

TEST_P(Conv3x3Wgmma, PrologueGivesTheBitsOfTheAppliedMap) {
  REQUIRE_GPU();
  if (!conv3x3_wgmma_available(0)) GTEST_SKIP() << "not a compute capability 9.0 device: skipped";
  check_prologue(GetParam(), false);
}

// The join prologue (ops.h): the same with the join's other branch added before the relu.
TEST_P(Conv3x3Wgmma, JoinPrologueGivesTheBitsOfTheJoinsMap) {
  REQUIRE_GPU();
  if (!conv3x3_wgmma_available(0)) GTEST_SKIP() << "not a compute capability 9.0 device: skipped";
  check_prologue(GetParam(), true);
}

// The input gradient's batchnorm epilogue (ops.h, conv2d_backward's gradient sums): dx masked by the
// batchnorm's relu recomputed from its input bx gives the plain input gradient's bits where the applied map
// (computed on the host as in the prologue test) is positive and zero elsewhere, and the partials add up to
// the double sums of that masked dx and of it times (bx - mean).
TEST_P(Conv3x3Wgmma, GradientSumsMaskTheInputGradient) {
  REQUIRE_GPU();
  if (!conv3x3_wgmma_available(0)) GTEST_SKIP() << "not a compute capability 9.0 device: skipped";
  const FrDType t = GetParam();
  std::mt19937 rng(7);
  for (const Geometry& geo : {Geometry{1, 4, 132}, Geometry{5, 12, 132}, Geometry{8, 32, 2}}) {
    const sdk::ConvShape g = shape_of(geo);
    SCOPED_TRACE("n " + std::to_string(geo.n) + " h " + std::to_string(geo.h));
    const size_t nx = static_cast<size_t>(geo.n) * geo.h * kW * kC, nw = static_cast<size_t>(kC) * 9 * kC;
    const Values bx = random_values(nx, 2.0f, t, rng), w = random_values(nw, 0.06f, t, rng),
                 d = random_values(nx, 1.0f, t, rng);
    const std::vector<float> bn = random_batchnorm(rng, 0.0f, 0.3f);  // gamma, beta, mean, invstd
    DeviceBuffer dbx(nx * 2), dw(nw * 2), ddy(nx * 2), ddx(nx * 2), dbn(bn.size() * 4),
        dpart(conv3x3_wgmma_partials_bytes(geo.sm_count));
    CUDA_OK(cudaMemcpy(dbx.p, bx.bits.data(), nx * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dw.p, w.bits.data(), nw * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(ddy.p, d.bits.data(), nx * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dbn.p, bn.data(), bn.size() * 4, cudaMemcpyHostToDevice));
    const auto* b = static_cast<const float*>(dbn.p);
    const Conv3x3GradSums sums{{b, b + kC, b + 2 * kC, b + 3 * kC}, dbx.p, static_cast<double*>(dpart.p)};
    EpilogueRun r;
    ASSERT_NO_FATAL_FAILURE(run_epilogue(
        g, t, ddy.p, dw.p, ddx.p, nx, geo.sm_count,
        [&] {
          return launch_conv3x3_wgmma_backward_data(g, t, ddy.p, dw.p, ddx.p, geo.sm_count, nullptr, &sums);
        },
        &r));
    auto channel = [](size_t i) { return static_cast<int>(i % kC); };
    ASSERT_NO_FATAL_FAILURE(expect_epilogue(
        r, t, dpart.p,
        [&](size_t i) { return from_bits(to_bits(bn_pre_relu(bn, channel(i), bx.v[i]), t), t) > 0.0; },
        [&](size_t i) { return r.plain[i]; }, [&](size_t i) { return bx.v[i] - bn[2 * kC + channel(i)]; },
        "sum g (bx - mean)"));
  }
}

// The input gradient's join epilogue (ops.h, add_relu_backward folded into conv2d_backward): dx is the plain
// input gradient's bits plus the other part b, rounded, where the mask source is positive and zero elsewhere
// (add_relu_backward's arithmetic on the host), and the partials add up to the double sums of that dx and of
// it times (x - mean).
TEST_P(Conv3x3Wgmma, JoinSumsAddMaskAndSumTheInputGradient) {
  REQUIRE_GPU();
  if (!conv3x3_wgmma_available(0)) GTEST_SKIP() << "not a compute capability 9.0 device: skipped";
  const FrDType t = GetParam();
  std::mt19937 rng(11);
  for (const Geometry& geo : {Geometry{1, 4, 132}, Geometry{5, 12, 132}, Geometry{8, 32, 2}}) {
    const sdk::ConvShape g = shape_of(geo);
    SCOPED_TRACE("n " + std::to_string(geo.n) + " h " + std::to_string(geo.h));
    const size_t nx = static_cast<size_t>(geo.n) * geo.h * kW * kC, nw = static_cast<size_t>(kC) * 9 * kC;
    const Values w = random_values(nw, 0.06f, t, rng), d = random_values(nx, 1.0f, t, rng),
                 b = random_values(nx, 1.0f, t, rng), x = random_values(nx, 2.0f, t, rng);
    Values mask = random_values(nx, 1.0f, t, rng);  // a relu's output: about half zero
    for (size_t i = 0; i < nx; ++i)
      if (mask.v[i] < 0.0) mask.bits[i] = 0, mask.v[i] = 0.0;
    std::vector<float> mean(kC);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    for (float& m : mean) m = u(rng);
    DeviceBuffer dw(nw * 2), ddy(nx * 2), ddx(nx * 2), db(nx * 2), dmask(nx * 2), dxin(nx * 2), dmean(kC * 4),
        dpart(conv3x3_wgmma_partials_bytes(geo.sm_count));
    CUDA_OK(cudaMemcpy(dw.p, w.bits.data(), nw * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(ddy.p, d.bits.data(), nx * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(db.p, b.bits.data(), nx * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dmask.p, mask.bits.data(), nx * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dxin.p, x.bits.data(), nx * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dmean.p, mean.data(), kC * 4, cudaMemcpyHostToDevice));
    const Conv3x3JoinSums join{db.p, dmask.p, dxin.p, static_cast<const float*>(dmean.p),
                               static_cast<double*>(dpart.p)};
    EpilogueRun r;
    ASSERT_NO_FATAL_FAILURE(run_epilogue(
        g, t, ddy.p, dw.p, ddx.p, nx, geo.sm_count,
        [&] {
          return launch_conv3x3_wgmma_backward_data(g, t, ddy.p, dw.p, ddx.p, geo.sm_count, nullptr, nullptr,
                                                    &join);
        },
        &r));
    ASSERT_NO_FATAL_FAILURE(expect_epilogue(
        r, t, dpart.p, [&](size_t i) { return mask.v[i] > 0.0; },
        [&](size_t i) {
          return to_bits(static_cast<float>(from_bits(r.plain[i], t)) + static_cast<float>(b.v[i]), t);
        },
        [&](size_t i) { return x.v[i] - mean[i % kC]; }, "sum g (x - mean)"));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Conv3x3Wgmma, testing::Values(FR_F16, FR_BF16),
                         [](const testing::TestParamInfo<FrDType>& i) {
                           return i.param == FR_F16 ? "f16" : "bf16";
                         });

TEST(Conv3x3WgmmaFits, OnlyTheShapeItImplements) {
  sdk::ConvShape g = shape_of({2, 8, 1});
  EXPECT_TRUE(conv3x3_wgmma_fits(g, FR_F16));
  EXPECT_TRUE(conv3x3_wgmma_fits(g, FR_BF16));
  EXPECT_FALSE(conv3x3_wgmma_fits(g, FR_F32));
  auto without = [&](auto change) {
    sdk::ConvShape c = g;
    change(c);
    return conv3x3_wgmma_fits(c, FR_F16);
  };
  EXPECT_FALSE(without([](sdk::ConvShape& c) { c.h = c.p = 6; }));  // rows not a multiple of 4
  EXPECT_FALSE(without([](sdk::ConvShape& c) { c.w = c.q = 16; }));
  EXPECT_FALSE(without([](sdk::ConvShape& c) { c.c = c.cg = 128; }));
  EXPECT_FALSE(without([](sdk::ConvShape& c) { c.k = c.kg = 128; }));
  EXPECT_FALSE(without([](sdk::ConvShape& c) { c.sh = c.sw = 2, c.p = 4, c.q = 16; }));
  EXPECT_FALSE(without([](sdk::ConvShape& c) { c.dh = c.dw = 2; }));
  EXPECT_FALSE(without([](sdk::ConvShape& c) { c.r = c.s = 1, c.ph = c.pw = 0; }));
  EXPECT_FALSE(without([](sdk::ConvShape& c) { c.g = 2, c.cg = 32, c.kg = 32; }));
  EXPECT_FALSE(
      without([](sdk::ConvShape& c) { c.n = int64_t{1} << 24, c.h = c.p = 8; }));  // positions > 2^31
}

}  // namespace
}  // namespace fresco::cuda
