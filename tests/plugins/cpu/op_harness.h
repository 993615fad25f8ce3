// Op-conformance harness for the CPU backend: loads libfresco-cpu once (from FRESCO_LIB_DIR), finds a kernel
// by (op name, "cpu", dtype), builds an FrCall over host std::vector buffers (on the CPU device, device
// memory is host memory), calls prepare with every data pointer NULL (as the runtime does), gives run a
// 64-byte-aligned workspace pre-filled with garbage, and turns a returned FrError* into a test failure
// (OpCall::run) or a message (OpCall::run_error, for bad-input tests). Buffers are borrowed: do not resize a
// vector after taking a view of it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "fresco/core/error.h"
#include "fresco/core/plugin_loader.h"
#include "fresco/ops.h"
#include "fresco/plugin.h"

namespace fresco::test {

// The CPU plugin, loaded once per process; `ctx` is the device context kernels receive.
struct CpuPlugin {
  const FrDeviceApi* device = nullptr;
  void* ctx = nullptr;

  static const CpuPlugin& get() {
    static CpuPlugin p;
    static std::once_flag once;
    std::call_once(once, [] {
      auto& reg = PluginRegistry::instance();
      reg.load_default({FRESCO_LIB_DIR});
      p.device = reg.device("cpu");
      if (!p.device) {
        std::string why = std::string("libfresco-cpu not loaded from ") + FRESCO_LIB_DIR;
        for (const auto& r : reg.refused()) why += "\n  refused " + r.path + ": " + r.reason;
        throw std::runtime_error(why);
      }
      throw_if_error(p.device->context_create(0, &p.ctx), "cpu context_create");
    });
    return p;
  }
};

// The CPU kernel of `op` accepting `dtype`, or nullptr.
inline const FrKernelDef* find_kernel(const std::string& op, uint32_t dtype = FR_F32) {
  CpuPlugin::get();
  auto& reg = PluginRegistry::instance();
  return reg.kernel(reg.op_id(op), "cpu", dtype);
}

template <class T>
constexpr uint32_t dtype_of() {
  if constexpr (std::is_same_v<T, float>) return FR_F32;
  if constexpr (std::is_same_v<T, int32_t>) return FR_I32;
  if constexpr (std::is_same_v<T, int8_t>) return FR_I8;
  return FR_U8;
}

// A tensor view of `data` with up to four dims (unused trailing dims are 1).
template <class T>
FrTensor tensor(T* data, std::initializer_list<int64_t> dims, uint32_t dtype = dtype_of<T>()) {
  if (dims.size() == 0 || dims.size() > 4) throw std::invalid_argument("tensor: 1 to 4 dims");
  FrTensor t{};
  t.data = data;
  t.dtype = dtype;
  t.ndim = static_cast<uint32_t>(dims.size());
  for (int i = 0; i < 4; ++i) t.dims[i] = 1;
  int i = 0;
  for (int64_t d : dims) t.dims[i++] = d;
  return t;
}

// A tensor view of a whole vector; the dims must cover it exactly.
template <class T>
FrTensor tensor(std::vector<T>& v, std::initializer_list<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  if (n != static_cast<int64_t>(v.size()))
    throw std::invalid_argument("tensor: dims cover " + std::to_string(n) + " elements, vector holds " +
                                std::to_string(v.size()));
  return tensor(v.data(), dims);
}

// A range over `bytes` bytes at `data`.
inline FrRange range(void* data, uint64_t bytes, uint32_t dtype) {
  FrRange r{};
  r.data = data;
  r.bytes = bytes;
  r.dtype = dtype;
  return r;
}
template <class T>
FrRange range(std::vector<T>& v) {
  return range(v.data(), v.size() * sizeof(T), dtype_of<T>());
}
// A range over one POD struct (FrStepScalars, FrBatchResults, ...), as the S and R regions hold them.
template <class P>
FrRange pod_range(P& p) {
  return range(&p, sizeof(P), FR_U8);
}

// One kernel invocation. Build it with in/out/rin/rout/params, then run() (a test failure on error) or
// run_error() (the error message, empty on success).
class OpCall {
 public:
  explicit OpCall(std::string op, uint32_t dtype = FR_F32) : op_(std::move(op)), dtype_(dtype) {}

  OpCall& in(const FrTensor& t) {
    in_.push_back(t);
    return *this;
  }
  OpCall& out(const FrTensor& t) {
    out_.push_back(t);
    return *this;
  }
  OpCall& rin(const FrRange& r) {
    rin_.push_back(r);
    return *this;
  }
  OpCall& rout(const FrRange& r) {
    rout_.push_back(r);
    return *this;
  }
  template <class P>
  OpCall& params(const P& p) {
    return raw_params(&p, sizeof(P));
  }
  // The communicator a collective op reads (FrCall::comm; comm_threads.h).
  OpCall& comm(void* c) {
    comm_ = c;
    return *this;
  }
  // Any bytes as params (bad-size tests); size 0 passes a NULL pointer.
  OpCall& raw_params(const void* p, size_t size) {
    params_.assign(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + size);
    return *this;
  }

  // prepare + run; the kernel's error becomes the assertion's message. Use as ASSERT_TRUE(call.run()).
  [[nodiscard]] ::testing::AssertionResult run() {
    const std::string err = run_error();
    if (err.empty()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << err;
  }

  // prepare + run; returns "" on success, else "prepare <op>: ..." or "run <op>: ..." with the kernel's
  // message.
  std::string run_error() {
    const FrKernelDef* k = find_kernel(op_, dtype_);
    if (!k) return "no cpu kernel for op '" + op_ + "' with dtype " + std::to_string(dtype_);
    void* ctx = CpuPlugin::get().ctx;
    FrCall c{};
    c.struct_size = sizeof(FrCall);
    c.op = static_cast<uint32_t>(PluginRegistry::instance().op_id(op_));
    c.params = params_.empty() ? nullptr : params_.data();
    c.params_size = static_cast<uint32_t>(params_.size());
    c.stream = nullptr;
    c.comm = comm_;
    // 1. prepare, with data pointers hidden, as Runtime::pre_capture does.
    std::vector<FrTensor> pin = in_, pout = out_;
    std::vector<FrRange> prin = rin_, prout = rout_;
    for (auto& t : pin) t.data = nullptr;
    for (auto& t : pout) t.data = nullptr;
    for (auto& r : prin) r.data = nullptr;
    for (auto& r : prout) r.data = nullptr;
    point(c, pin, pout, prin, prout);
    void* state = nullptr;
    uint64_t ws = 0;
    if (k->prepare) {
      if (std::string e = message(k->prepare(ctx, &c, &state, &ws), "prepare " + op_); !e.empty()) return e;
    }
    workspace_bytes_ = ws;
    // 2. run, with the real buffers and a garbage-filled workspace (kernels must not expect zeros).
    std::unique_ptr<void, void (*)(void*)> work(nullptr, std::free);
    if (ws) {
      const uint64_t rounded = (ws + 63) / 64 * 64;
      work.reset(std::aligned_alloc(64, rounded));
      std::memset(work.get(), 0xFF, rounded);
    }
    point(c, in_, out_, rin_, rout_);
    c.workspace = work.get();
    c.workspace_bytes = ws;
    c.state = state;
    std::string e = message(k->run(ctx, &c), "run " + op_);
    if (state && k->destroy) k->destroy(ctx, state);
    return e;
  }

  uint64_t workspace_bytes() const noexcept { return workspace_bytes_; }

 private:
  static void point(FrCall& c, const std::vector<FrTensor>& i, const std::vector<FrTensor>& o,
                    const std::vector<FrRange>& ri, const std::vector<FrRange>& ro) {
    c.in = i.empty() ? nullptr : i.data();
    c.n_in = static_cast<uint32_t>(i.size());
    c.out = o.empty() ? nullptr : o.data();
    c.n_out = static_cast<uint32_t>(o.size());
    c.rin = ri.empty() ? nullptr : ri.data();
    c.n_rin = static_cast<uint32_t>(ri.size());
    c.rout = ro.empty() ? nullptr : ro.data();
    c.n_rout = static_cast<uint32_t>(ro.size());
  }
  // Frees the error (through throw_if_error) and returns its message; "" for success.
  static std::string message(FrError* err, const std::string& context) {
    try {
      throw_if_error(err, context);
    } catch (const Error& e) {
      return e.what();
    }
    return {};
  }

  std::string op_;
  uint32_t dtype_;
  std::vector<FrTensor> in_, out_;
  std::vector<FrRange> rin_, rout_;
  std::vector<uint8_t> params_;
  uint64_t workspace_bytes_ = 0;
  void* comm_ = nullptr;
};

// True when `haystack` contains `needle` (for error-message checks without gmock).
inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Per element |actual - expected| <= atol + rtol * |expected|; names the first mismatches.
template <class A, class E>
::testing::AssertionResult all_close(const std::vector<A>& actual, const std::vector<E>& expected,
                                     double rtol, double atol) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << "sizes differ: " << actual.size() << " vs " << expected.size();
  std::ostringstream bad;
  size_t n_bad = 0;
  double worst = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = static_cast<double>(actual[i]), e = static_cast<double>(expected[i]);
    const double err = std::fabs(a - e), tol = atol + rtol * std::fabs(e);
    if (!(err <= tol)) {
      if (n_bad < 5)
        bad << "\n  [" << i << "] actual " << a << " expected " << e << " (|diff| " << err << " > " << tol
            << ")";
      ++n_bad;
    }
    if (err > worst || std::isnan(err)) worst = err;
  }
  if (n_bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << n_bad << " of " << actual.size() << " elements differ (max |diff| " << worst << ")" << bad.str();
}

// Per element |actual - expected| <= tol[i].
template <class A>
::testing::AssertionResult within(const std::vector<A>& actual, const std::vector<double>& expected,
                                  const std::vector<double>& tol) {
  if (actual.size() != expected.size() || tol.size() != expected.size())
    return ::testing::AssertionFailure() << "sizes differ";
  std::ostringstream bad;
  size_t n_bad = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double err = std::fabs(static_cast<double>(actual[i]) - expected[i]);
    if (!(err <= tol[i])) {
      if (n_bad < 5)
        bad << "\n  [" << i << "] actual " << actual[i] << " expected " << expected[i] << " (|diff| " << err
            << " > " << tol[i] << ")";
      ++n_bad;
    }
  }
  if (n_bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << n_bad << " of " << actual.size() << " elements out of bounds" << bad.str();
}

// Bytewise equality of two buffers of the same type (determinism and "left untouched" checks).
template <class T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

inline std::vector<double> to_double(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

// Uniform floats in [lo, hi) from a fixed-seed generator.
inline std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Uniform in [-hi, -margin] U [margin, hi]: keeps inputs away from a kink at 0 (relu) for finite differences.
inline std::vector<float> random_away_from_zero(std::mt19937& rng, size_t n, float margin, float hi) {
  std::uniform_real_distribution<float> mag(margin, hi);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> v(n);
  for (auto& x : v) x = sign(rng) ? mag(rng) : -mag(rng);
  return v;
}

// Gradient check of a kernel's gradient against numerical values at `indices`: the relative error of the
// whole vector (2-norm) must be <= rel_norm, and every element must satisfy |a - n| <= rtol * |n| +
// atol_scale * max|n|.
inline ::testing::AssertionResult grad_check(const std::vector<float>& kernel,
                                             const std::vector<size_t>& indices,
                                             const std::vector<double>& numeric, double rel_norm = 1e-3,
                                             double rtol = 1e-3, double atol_scale = 1e-4) {
  if (indices.size() != numeric.size()) return ::testing::AssertionFailure() << "index/value count differ";
  double diff2 = 0.0, ref2 = 0.0, ref_max = 0.0;
  for (size_t k = 0; k < indices.size(); ++k) {
    const double d = static_cast<double>(kernel[indices[k]]) - numeric[k];
    diff2 += d * d;
    ref2 += numeric[k] * numeric[k];
    ref_max = std::max(ref_max, std::fabs(numeric[k]));
  }
  if (ref2 == 0.0)
    return ::testing::AssertionFailure() << "numerical gradient is identically zero (bad test data)";
  const double rel = std::sqrt(diff2 / ref2);
  std::ostringstream bad;
  size_t n_bad = 0;
  for (size_t k = 0; k < indices.size(); ++k) {
    const double a = kernel[indices[k]], n = numeric[k];
    const double tol = rtol * std::fabs(n) + atol_scale * ref_max;
    if (!(std::fabs(a - n) <= tol)) {
      if (n_bad < 5)
        bad << "\n  [" << indices[k] << "] kernel " << a << " numerical " << n << " (tol " << tol << ")";
      ++n_bad;
    }
  }
  if (rel <= rel_norm && n_bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "gradient relative error " << rel << " (limit " << rel_norm << "), "
                                       << n_bad << " of " << indices.size() << " elements off" << bad.str();
}

// |v| element-wise, in double (the magnitudes a float reduction's error bound is built from).
inline std::vector<double> abs_of(const std::vector<float>& v) {
  std::vector<double> a(v.size());
  for (size_t i = 0; i < v.size(); ++i) a[i] = std::fabs(static_cast<double>(v[i]));
  return a;
}

// Bound of a float reduction of length `len` whose absolute terms sum to abs_sum[i].
inline std::vector<double> float_bound(const std::vector<double>& abs_sum, int64_t len) {
  std::vector<double> t(abs_sum.size());
  for (size_t i = 0; i < t.size(); ++i)
    t[i] = static_cast<double>(len + 2) * FLT_EPSILON * abs_sum[i] + 1e-30;
  return t;
}

}  // namespace fresco::test
