// Masking passes with batchnorm's gradient sums (masked_grad_sums.h).
#include "ops/masked_grad_sums.h"

#include "ops/channel_moments.h"
#include "ops/channel_sums.cuh"

namespace fresco::cuda {

namespace {
// The chunk partials of P (x, save_mean) pairs, one workspace slice each.
template <int P>
struct Parts {
  double* p[P];
};

// The masked gradient at one element, rounded to T as stored. kB: 0 no b, 1 b (full-size or compact: the
// caller passes +0 where a compact b has no value, as the full-size part held there).
template <class T, int kB>
__device__ __forceinline__ T masked(T a, T b, T y) {
  float v = to_f(a);
  if constexpr (kB != 0) v += to_f(b);
  return from_f<T>(to_f(y) > 0.0f ? v : 0.0f);
}

template <class T, int kB>
__global__ void masked_grad_partials_kernel(const T* a, const T* b, const T* y, const T* x, const float* mean,
                                            T* dx, ChannelChunks k, double* part, StridedRows cb) {
  channel_partials(k, part, [&](int64_t r, int64_t c) {
    const int64_t i = r * k.c + c;
    T bi = from_f<T>(0.0f);
    if constexpr (kB != 0) {
      const int64_t rb = cb.h ? cb.row(r) : r;
      if (rb >= 0) bi = b[rb * k.c + c];
    }
    const T d = masked<T, kB>(a[i], bi, y[i]);
    dx[i] = d;
    return grad_terms(to_f(d), to_f(x[i]), mean[c]);
  });
}

// add_relu_backward with a compact b and no sums: 16 bytes a thread, grid-stride.
template <class T>
__global__ void compact_add_relu_backward_kernel(const T* a, const T* b, const T* y, T* dx, int64_t rows,
                                                 int64_t cv, StridedRows cb) {
  constexpr int V = Vec16<T>::kN;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < rows * cv;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t rb = cb.row(i / cv);
    Vec16<T> g = load16(a, i);
    const Vec16<T> yv = load16(y, i);
    Vec16<T> bv;
    if (rb >= 0) {
      bv = load16(b, rb * cv + i % cv);
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) bv.v[j] = from_f<T>(0.0f);
    }
#pragma unroll
    for (int j = 0; j < V; ++j) g.v[j] = masked<T, 1>(g.v[j], bv.v[j], yv.v[j]);
    store16(dx, i, g);
  }
}

// The same, an element a thread (channels not a multiple of the vector or unaligned maps).
template <class T>
__global__ void compact_add_relu_backward_scalar_kernel(const T* a, const T* b, const T* y, T* dx,
                                                        int64_t rows, int64_t c, StridedRows cb) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < rows * c;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t rb = cb.row(i / c);
    dx[i] = masked<T, 1>(a[i], rb >= 0 ? b[rb * c + i % c] : from_f<T>(0.0f), y[i]);
  }
}

// The vector kernel's operands: the gradient part(s) a (+ b), the mask source y, P batchnorm inputs x with
// their saved means, and dx.
template <class T, int kB, int P>
struct MaskedOperands {
  const T *a, *b, *y;
  const T* x[P];
  const float* mean[P];
  T* dx;
  StridedRows cb;  // b's positions when compact (cb.h > 0)
};

// 16 bytes per load; the accumulators, terms (channel_sums.cuh), row order and chunks of
// bn_grad_sums_vec_kernel (batchnorm_backward.cu), so the partials are those batchnorm's own pass would add
// from the stored dx; P batchnorm inputs x (one or two: both branches of a projection join), each with its
// own pair of sums and partials.
template <class T, int kB, int P>
__global__ void __launch_bounds__(kVecThreads)
    masked_grad_partials_vec_kernel(MaskedOperands<T, kB, P> o, ChannelChunks k, Parts<P> parts) {
  constexpr int V = Vec16<T>::kN;
  using Acc = GradAcc<T>;
  Acc mu[P][V];
#pragma unroll
  for (int p = 0; p < P; ++p) thread_channel_means<T>(k, o.mean[p], mu[p]);
  vector_channel_partials_n<T, Acc, P>(k, parts.p, [&](int64_t r, int cv, Acc(&acc)[P][2][V]) {
    const int64_t i = r * (k.c / V) + cv;
    Vec16<T> g = load16(o.a, i);
    const Vec16<T> yv = load16(o.y, i);
    Vec16<T> bv = g;
    if constexpr (kB == 1) bv = load16(o.b, i);
    if constexpr (kB == 2) {  // compact: b's row at this position, or +0 as the full-size part held
      const int64_t rb = o.cb.row(r);
      if (rb >= 0) {
        bv = load16(o.b, rb * (k.c / V) + cv);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) bv.v[j] = from_f<T>(0.0f);
      }
    }
#pragma unroll
    for (int j = 0; j < V; ++j) g.v[j] = masked < T, kB == 0 ? 0 : 1 > (g.v[j], bv.v[j], yv.v[j]);
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const Vec16<T> xv = load16(o.x[p], i);
#pragma unroll
      for (int j = 0; j < V; ++j)
        add_grad_terms<Acc>(to_f(g.v[j]), to_f(xv.v[j]), mu[p][j], acc[p][0][j], acc[p][1][j]);
    }
    store16(o.dx, i, g);
  });
}
}  // namespace

uint64_t masked_grad_sums_workspace(int64_t rows, int64_t c) {
  return conv_sums_workspace(rows, c);  // the chunk partials (channel_moments.h)
}

void launch_masked_grad_sums(const Context* ctx, uint32_t dtype, const void* a, const void* b, const void* y,
                             const sdk::GradSumsOperands& g, void* dx, void* ws, cudaStream_t s,
                             const StridedRows& cb) {
  const ChannelChunks k = channel_chunks(g.rows, g.c);
  double* part[sdk::kMaxGradSumsTargets];
  for (int t = 0; t < g.targets; ++t) part[t] = partials_of(ws) + 2 * k.chunks * k.c * t;
  with_float_type(dtype, "masked gradient sums", [&](auto tag) {
    using T = decltype(tag);
    const T *at = static_cast<const T*>(a), *bt = static_cast<const T*>(b), *yt = static_cast<const T*>(y);
    T* dxt = static_cast<T*>(dx);
    auto go = [&](auto two, auto targets) {
      constexpr int kB = decltype(two)::value;
      constexpr int P = decltype(targets)::value;
      MaskedOperands<T, kB, P> o{at, bt, yt, {}, {}, dxt, cb};
      Parts<P> parts{};
      bool vec = vector_partials_fit<T>(k, {at, kB ? bt : at, yt, dxt});
      for (int t = 0; t < P; ++t) {
        o.x[t] = static_cast<const T*>(g.x[t]), o.mean[t] = g.mean[t], parts.p[t] = part[t];
        vec = vec && vector_partials_fit<T>(k, {g.x[t], g.mean[t]});
      }
      if (vec) {
        masked_grad_partials_vec_kernel<T, kB, P>
            <<<static_cast<unsigned>(k.chunks), kVecThreads, 0, s>>>(o, k, parts);
        return;
      }
      // scalar kernels: the first target's pass writes dx; each further target's masks the stored dx again
      // (the same values) while adding its sums
      for (int t = 0; t < P; ++t) {
        const T* src = t == 0 ? at : dxt;
        if (t == 0)
          masked_grad_partials_kernel<T, kB == 0 ? 0 : 1>
              <<<partial_grid(k), dim3(kChanLanes, kRowLanes), 0, s>>>(src, bt, yt, o.x[t], o.mean[t], dxt, k,
                                                                       part[t], cb);
        else
          masked_grad_partials_kernel<T, 0><<<partial_grid(k), dim3(kChanLanes, kRowLanes), 0, s>>>(
              src, nullptr, yt, o.x[t], o.mean[t], dxt, k, part[t], StridedRows{});
      }
    };
    auto targets = [&](auto two) {
      if (g.targets == 2)
        go(two, std::integral_constant<int, 2>{});
      else
        go(two, std::integral_constant<int, 1>{});
    };
    if (!b)
      targets(std::integral_constant<int, 0>{});
    else if (cb.h == 0)
      targets(std::integral_constant<int, 1>{});
    else
      targets(std::integral_constant<int, 2>{});
  });
  FR_CUDA_LAUNCH_CHECK();
  launch_sums_finalize(ctx, k.chunks, g.c, part, g.sums, g.targets, s);
}

uint64_t masked_grad_sums_prepare(const FrCall* call, uint32_t x_at, const char* op) {
  const sdk::GradSumsOperands g = sdk::grad_sums_operands(call, x_at, op);
  return g.targets ? g.targets * masked_grad_sums_workspace(g.rows, g.c) : 0;
}

bool run_masked_grad_sums(const Context* ctx, const FrCall* call, uint32_t x_at, const char* op) {
  const sdk::GradSumsOperands g = sdk::grad_sums_operands(call, x_at, op);
  if (!g.targets) return false;
  const FrTensor& dx = call->out[0];
  const int64_t n = sdk::numel(dx);
  StridedRows cb;
  if (x_at == 3) {  // add_relu_backward: b full-size or compact (ops.h; checked there)
    const sdk::CompactPart part = sdk::add_relu_backward_part(call, op);
    cb = compact_b(part);
    FR_PLUGIN_CHECK(!part.compact() || (g.c == part.c && g.rows == part.n * part.h * part.w),
                    FR_ERR_INVALID_ARGUMENT,
                    std::string(op) + ": with a compact part the batchnorm inputs x must have a's channels");
  }
  for (uint32_t i = 0; i < x_at; ++i)
    FR_PLUGIN_CHECK((i == 1 && cb.h) || (sdk::numel(call->in[i]) == n && call->in[i].dtype == dx.dtype),
                    FR_ERR_INVALID_ARGUMENT,
                    std::string(op) + ": input " + std::to_string(i) + " differs from dx in size or dtype");
  FR_PLUGIN_CHECK(
      call->workspace && call->workspace_bytes >= g.targets * masked_grad_sums_workspace(g.rows, g.c),
      FR_ERR_INVALID_ARGUMENT, std::string(op) + ": run without the workspace asked by prepare");
  const bool two = x_at == 3;  // add_relu_backward: a, b, y
  launch_masked_grad_sums(ctx, dx.dtype, call->in[0].data, two ? call->in[1].data : nullptr,
                          call->in[two ? 2 : 1].data, g, dx.data, call->workspace, stream_of(call), cb);
  return true;
}

void launch_compact_add_relu_backward(uint32_t dtype, const void* a, const void* b, const void* y, void* dx,
                                      int64_t rows, int64_t c, const StridedRows& cb, int sm_count,
                                      cudaStream_t s) {
  with_float_type(dtype, "add_relu_backward", [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = Vec16<T>::kN;
    const T *at = static_cast<const T*>(a), *bt = static_cast<const T*>(b), *yt = static_cast<const T*>(y);
    T* dxt = static_cast<T*>(dx);
    if (c % V == 0 && vectorizable<T>(rows * c, {a, b, y, dx}))
      compact_add_relu_backward_kernel<T>
          <<<grid_for(rows * (c / V), 256, sm_count), 256, 0, s>>>(at, bt, yt, dxt, rows, c / V, cb);
    else
      compact_add_relu_backward_scalar_kernel<T>
          <<<grid_for(rows * c, 256, sm_count), 256, 0, s>>>(at, bt, yt, dxt, rows, c, cb);
  });
  FR_CUDA_LAUNCH_CHECK();
}

}  // namespace fresco::cuda
