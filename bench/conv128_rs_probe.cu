// Probe: the register-A layout of ResNet-18's stage-2 convolution (bench/conv128_rs.cuh; 3x3 128 -> 128 on
// 16x16 maps, NHWC fp16 / bf16), its forms against a direct fp32 reference and cuDNN's legacy API on the same
// buffers: the plain convolution (two k16 steps in flight and storer warps for y; one step in flight with the
// MMA warpgroups storing y; y straight from the accumulators; the mainloop alone) and the fused forms with a
// batchnorm + relu before it and y's sums after it (the batchnorm in the A fragments, in fp32 and in 16-bit
// arithmetic; applied ahead by the storer warps, staged or direct, with the applied map stored; applied by
// the MMA warpgroups in their mainloop's shadow, kInterleave). Fused forms are checked against the reference
// on the applied map (computed on the host as the apply pass does), their sums against the host's of their
// own y, their applied map bit for bit. Prints the plain forms' line, a line per fused form as it is checked,
// then the fused forms' timings; exits 2 if any check the product's arithmetic is held to fails (packed16's
// line reports its larger error without failing the run).
// Measured on H100s in the fortieth session (then inside bench_conv128_probe; bench/results/
// 2026-12-06_session40.json) and the forty-first (2026-12-06_session41.json; docs/performance.md): plain
// 64-67 us, the fused forms 89-116 us, the handoff-only diagnostic 80-82, kInterleave 104.
// A diagnostic, not part of the product.
//
// Usage: bench_conv128_rs_probe [--batch 512] [--dtype fp16|bf16] [--reps 20]
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "probe_common.h"
// after probe_common.h (check, CK)
#include "conv128_common.cuh"
#include "conv128_rs.cuh"

namespace {

using fresco::bench::check;
namespace rs = fresco::bench::rs;
using fresco::bench::conv128::kC;
using fresco::bench::conv128::kKDim;
using fresco::bench::conv128::kW;
using fresco::bench::conv128::reference_kernel;

template <class T>
int run(int batch, int reps, const char* dtype_name, cudnnDataType_t cudnn_type) {
  const int h = 16;
  const bool f16 = cudnn_type == CUDNN_DATA_HALF;
  const int64_t nx = static_cast<int64_t>(batch) * h * kW * kC, nw = static_cast<int64_t>(kC) * kKDim;
  // the same data as bench_conv128_probe's: x, w, then the batchnorm's coefficients from one generator
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  const std::vector<T> hx = fresco::bench::random_values<T>(nx, 1.0f, rng),
                       hw = fresco::bench::random_values<T>(nw, 0.04f, rng);
  std::vector<float> hcoef(2 * kC);  // scale, shift per channel
  for (int c = 0; c < kC; ++c) {
    const float gamma = 1.0f + 0.5f * d(rng), beta = 0.5f * d(rng), mean = 0.2f * d(rng),
                invstd = 1.0f + 0.2f * d(rng);
    hcoef[c] = gamma * invstd, hcoef[kC + c] = beta - mean * hcoef[c];
  }
  // the applied map as the apply pass computes it, and the weights as chunk planes [144][128][8]
  std::vector<T> ha(nx), hwp(nw);
  for (int64_t i = 0; i < nx; ++i) {
    const int c = static_cast<int>(i % kC);
    const float f = std::fmaf(static_cast<float>(hx[i]), hcoef[c], hcoef[kC + c]);
    ha[i] = fresco::bench::from_float<T>(f > 0.0f ? f : 0.0f);
  }
  for (int kc = 0; kc < kKDim / 8; ++kc)
    for (int o = 0; o < kC; ++o)
      for (int e = 0; e < 8; ++e)
        hwp[(kc * kC + o) * 8 + e] = hw[static_cast<size_t>(o) * kKDim + 8 * kc + e];
  T *x, *w, *wperm, *xa, *y, *applied;
  float *yref, *dcoef;
  CK(cudaMalloc(&x, nx * sizeof(T)));
  CK(cudaMalloc(&xa, nx * sizeof(T)));
  CK(cudaMalloc(&y, nx * sizeof(T)));
  CK(cudaMalloc(&applied, nx * sizeof(T)));
  CK(cudaMalloc(&w, nw * sizeof(T)));
  CK(cudaMalloc(&wperm, nw * sizeof(T)));
  CK(cudaMalloc(&yref, nx * sizeof(float)));
  CK(cudaMalloc(&dcoef, 2 * kC * sizeof(float)));
  CK(cudaMemcpy(x, hx.data(), nx * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(xa, ha.data(), nx * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(w, hw.data(), nw * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(wperm, hwp.data(), nw * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dcoef, hcoef.data(), 2 * kC * sizeof(float), cudaMemcpyHostToDevice));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int blocks = std::min(sms, batch);
  double* part = nullptr;
  CK(cudaMalloc(&part, static_cast<size_t>(blocks) * kC * 2 * sizeof(double)));
  const CUtensorMap map = fresco::bench::conv128::window_map(x, f16, batch, h, rs::kWin, rs::kWin);
  // launches conv128_rs_kernel form K with arguments a
  auto launcher = [&](auto kernel, const rs::Args& a) {
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, rs::kSmem));
    return [=] { kernel<<<blocks, rs::kThreads, rs::kSmem>>>(a, map); };
  };
  const rs::Args plain{wperm, y, batch, nullptr, nullptr, nullptr, nullptr};
  const rs::Args fz{wperm, y, batch, dcoef, dcoef + kC, part, applied};
  rs::Args unstored = fz, handoff = fz;
  unstored.applied = nullptr;
  handoff.handoff_only = 1;
  // the forms: conv128_rs_kernel<T, fused, prefetch, storer, mainloop, packed16, ahead, direct, interleave>
  auto conv = launcher(rs::conv128_rs_kernel<T, false, 2, true>, plain);
  auto conv_p1 = launcher(rs::conv128_rs_kernel<T, false, 1, false>, plain);
  auto conv_direct = launcher(rs::conv128_rs_kernel<T, false, 2, false, false, false, false, true>, plain);
  auto mainloop = launcher(rs::conv128_rs_kernel<T, false, 2, true, true>, plain);
  auto in_fragments = launcher(rs::conv128_rs_kernel<T, true, 2, true>, fz);
  auto in_fragments_own_stores = launcher(rs::conv128_rs_kernel<T, true, 2, false>, fz);
  auto in_fragments_p1 = launcher(rs::conv128_rs_kernel<T, true, 1, false>, fz);
  auto in_fragments_direct =
      launcher(rs::conv128_rs_kernel<T, true, 2, false, false, false, false, true>, fz);
  auto packed16 = launcher(rs::conv128_rs_kernel<T, true, 2, true, false, true>, fz);
  auto ahead = launcher(rs::conv128_rs_kernel<T, true, 2, true, false, false, true>, fz);
  auto ahead_unstored = launcher(rs::conv128_rs_kernel<T, true, 2, true, false, false, true>, unstored);
  auto ahead_handoff = launcher(rs::conv128_rs_kernel<T, true, 2, true, false, false, true>, handoff);
  auto ahead_direct = launcher(rs::conv128_rs_kernel<T, true, 2, true, false, false, true, true>, fz);
  auto ahead_direct_handoff =
      launcher(rs::conv128_rs_kernel<T, true, 2, true, false, false, true, true>, handoff);
  // (its apply sits before each step's wgmmas: placed after them, ptxas serialised the wgmmas, C7513)
  auto interleave = launcher(rs::conv128_rs_kernel<T, true, 2, false, false, false, false, true, true>, fz);
  auto interleave_unstored =
      launcher(rs::conv128_rs_kernel<T, true, 2, false, false, false, false, true, true>, unstored);

  // the reference of xin into href
  std::vector<float> href(nx);
  auto reference = [&](const T* xin) {
    reference_kernel<T><<<4096, 256>>>(xin, w, yref, batch, h);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(href.data(), yref, nx * sizeof(float), cudaMemcpyDeviceToHost));
  };
  std::vector<T> hy(nx);
  // y set to NaN everywhere (a position a form misses shows), the form run, y's largest error against href
  auto checked = [&](auto fn) {
    CK(cudaMemset(y, 0xff, nx * sizeof(T)));
    fn();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(hy.data(), y, nx * sizeof(T), cudaMemcpyDeviceToHost));
    double worst = 0.0;
    for (int64_t i = 0; i < nx; ++i) {
      const double got = static_cast<float>(hy[i]), want = href[i];
      worst = std::isnan(got) ? 1e30 : std::max(worst, std::fabs(got - want) / (0.05 + std::fabs(want)));
    }
    return worst;
  };
  // a fused form's check: y's error, its per-block sums' largest relative error against the host's of its
  // own y, and (where it stores one) its applied map's mismatches
  struct Fused {
    double y_err = 0.0, sums_err = 0.0;
    int64_t mismatches = 0;
    bool ok() const { return y_err < 0.02 && sums_err < 1e-4 && mismatches == 0; }
  };
  auto check_fused = [&](auto fn, bool stores_applied) {
    CK(cudaMemset(applied, 0xff, nx * sizeof(T)));
    CK(cudaMemset(part, 0xff,
                  static_cast<size_t>(blocks) * kC * 2 * sizeof(double)));  // NaN: sums not written
    Fused r;
    r.y_err = checked(fn);
    std::vector<double> hpart(static_cast<size_t>(blocks) * kC * 2), want(2 * kC, 0.0), have(2 * kC, 0.0);
    CK(cudaMemcpy(hpart.data(), part, hpart.size() * sizeof(double), cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < nx; ++i) {
      const double v = static_cast<float>(hy[i]);
      want[i % kC] += v, want[kC + i % kC] += v * v;
    }
    for (int b = 0; b < blocks; ++b)
      for (int c = 0; c < 2 * kC; ++c) have[c] += hpart[(static_cast<size_t>(b) * kC + c % kC) * 2 + c / kC];
    for (int c = 0; c < 2 * kC; ++c)
      r.sums_err = std::max(r.sums_err, std::fabs(have[c] - want[c]) / (1.0 + std::fabs(want[c])));
    if (stores_applied) {
      std::vector<T> happ(nx);
      CK(cudaMemcpy(happ.data(), applied, nx * sizeof(T), cudaMemcpyDeviceToHost));
      for (int64_t i = 0; i < nx; ++i) r.mismatches += std::memcmp(&happ[i], &ha[i], sizeof(T)) != 0;
    }
    return r;
  };

  const fresco::bench::BestTimer timer;
  auto us = [&](auto fn) {
    const float t = timer.us(fn, reps);
    CK(cudaGetLastError());
    return t;
  };
  const double flop = 2.0 * batch * h * kW * kC * kKDim;
  reference(x);
  const double conv_err = std::max({checked(conv), checked(conv_p1), checked(conv_direct)});
  fresco::bench::CudnnConv3x3 dnn(cudnn_type, batch, kC, kC, h, kW);
  const double dnn_err = checked([&] { dnn.forward(x, w, y); });
  const float conv_us = us(conv), dnn_us = us([&] { dnn.forward(x, w, y); });
  std::printf(
      "{\"bench\":\"conv128_rs_probe\",\"dtype\":\"%s\",\"batch\":%d,\"blocks\":%d,\"conv_us\":%.2f,"
      "\"conv_tflops\":%.1f,\"conv_prefetch1_own_stores_us\":%.2f,\"conv_direct_us\":%.2f,"
      "\"mainloop_us\":%.2f,\"conv_y_max_rel_err\":%.3g,\"cudnn_us\":%.2f,\"cudnn_algo\":%d,"
      "\"cudnn_y_max_rel_err\":%.3g}\n",
      dtype_name, batch, blocks, conv_us, flop / conv_us * 1e-6, us(conv_p1), us(conv_direct), us(mainloop),
      conv_err, dnn_us, static_cast<int>(dnn.perf[0].algo), dnn_err);
  std::fflush(stdout);
  bool ok = conv_err < 0.02;
  // each fused form checked against the reference on the applied map, one line each as it is checked (a
  // form that hangs is the one after the last line); the 16-bit form is reported, not held to the bound
  reference(xa);
  auto report = [&](const char* form, auto fn, bool stores_applied, bool held) {
    const Fused f = check_fused(fn, stores_applied);
    std::printf(
        "{\"bench\":\"conv128_rs_probe_check\",\"dtype\":\"%s\",\"form\":\"%s\",\"y_max_rel_err\":%.3g,"
        "\"sums_max_rel_err\":%.3g,\"applied_mismatches\":%lld,\"ok\":%s}\n",
        dtype_name, form, f.y_err, f.sums_err, static_cast<long long>(f.mismatches),
        f.ok() ? "true" : "false");
    std::fflush(stdout);
    ok = ok && (f.ok() || !held);
  };
  report("in_fragments", in_fragments, false, true);
  report("in_fragments_own_stores", in_fragments_own_stores, false, true);
  report("in_fragments_prefetch1", in_fragments_p1, false, true);
  report("in_fragments_direct", in_fragments_direct, false, true);
  report("packed16", packed16, false, false);
  report("ahead", ahead, true, true);
  report("ahead_direct", ahead_direct, true, true);
  report("interleave", interleave, true, true);
  std::printf(
      "{\"bench\":\"conv128_rs_probe_fused\",\"dtype\":\"%s\",\"in_fragments_us\":%.2f,"
      "\"in_fragments_own_stores_us\":%.2f,\"in_fragments_prefetch1_us\":%.2f,"
      "\"in_fragments_direct_us\":%.2f,\"packed16_us\":%.2f,\"ahead_us\":%.2f,\"ahead_unstored_us\":%.2f,"
      "\"ahead_handoff_only_us\":%.2f,\"ahead_direct_us\":%.2f,\"ahead_direct_handoff_only_us\":%.2f,"
      "\"interleave_us\":%.2f,\"interleave_unstored_us\":%.2f,\"ok\":%s}\n",
      dtype_name, us(in_fragments), us(in_fragments_own_stores), us(in_fragments_p1), us(in_fragments_direct),
      us(packed16), us(ahead), us(ahead_unstored), us(ahead_handoff), us(ahead_direct),
      us(ahead_direct_handoff), us(interleave), us(interleave_unstored), ok ? "true" : "false");
  return ok ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  return fresco::bench::probe_main(
      argc, argv, "bench_conv128_rs_probe",
      [](auto tag, int batch, int reps, const char* dtype, cudnnDataType_t type) {
        return run<decltype(tag)>(batch, reps, dtype, type);
      });
}
