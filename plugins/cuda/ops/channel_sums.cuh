// Deterministic per-channel sums over the rows of an NHWC map viewed as [rows, C], in two steps that keep
// every load coalesced: `channel_partials` gives each block a chunk of rows and 32 consecutive channels
// (threads 32 x 8: a warp reads 32 neighbouring channels of one row) and writes per-chunk sums of two
// quantities in double to a workspace; a finalize kernel then adds a channel's chunk partials in a fixed
// order (channel_totals). The chunking depends only on (rows, C), so the sums are the same on every run. Used
// by batchnorm forward (sum x, sum x^2) and backward (sum dy, sum dy (x - mean)).
#pragma once

#include <type_traits>

#include "ops/dependent_launch.cuh"
#include "ops/dtype.cuh"

namespace fresco::cuda {

constexpr int kChanLanes = 32, kRowLanes = 8;

struct ChannelChunks {
  int64_t rows, c, rows_per_chunk, chunks;
};

inline ChannelChunks channel_chunks(int64_t rows, int64_t c) {
  ChannelChunks k{rows, c, 0, 0};
  // At most 512 chunks: about one wave of the vectorized partials kernels (4 blocks of 256 threads per SM on
  // an H200's 132 SMs); 1024 chunks made two waves, the second nearly full only by luck (ResNet-18 bf16: the
  // statistics kernels 383 -> 337 us per step, backward sums 276 -> 262 us).
  // ... of at least 32 rows: ResNet-18's stage-4 maps (8192 rows) then make 256 chunks instead of 128, so
  // their partials passes keep twice the loads in flight (8 MiB from L2: the statistics pass 6.2 -> 4.8 us on
  // an H100). The step, fp16 / bf16 on an H100, three interleaved rounds: 5.030 / 4.924 ms with 64 rows,
  // 5.006 / 4.902 with 32, 5.009 / 4.901 with 16 (the backward's finalizes then read four times the
  // partials), 5.004 / 4.903 with 8 (docs/performance.md, forty-second session).
  k.rows_per_chunk = (rows + 511) / 512;
  if (k.rows_per_chunk < 32) k.rows_per_chunk = 32;
  k.chunks = (rows + k.rows_per_chunk - 1) / k.rows_per_chunk;
  return k;
}

// Workspace bytes: two doubles per (chunk, channel), then per-channel float coefficients (4 per channel).
inline uint64_t channel_workspace_bytes(const ChannelChunks& k) {
  return static_cast<uint64_t>(k.chunks * k.c) * 2 * sizeof(double) +
         static_cast<uint64_t>(k.c) * 4 * sizeof(float);
}
inline double* partials_of(void* ws) {
  return static_cast<double*>(ws);
}
inline float* coefficients_of(void* ws, const ChannelChunks& k) {
  return reinterpret_cast<float*>(static_cast<double*>(ws) + 2 * k.chunks * k.c);
}

inline dim3 partial_grid(const ChannelChunks& k) {
  return dim3(static_cast<unsigned>(k.chunks), static_cast<unsigned>((k.c + kChanLanes - 1) / kChanLanes));
}

// part[(chunk * C + c) * 2 + {0,1}] = sums over the chunk's rows of f(row, c) -> (a, b). F: (int64_t
// row, int64_t c) -> double2.
template <class F>
__device__ void channel_partials(const ChannelChunks k, double* part, F f) {
  __shared__ double sa[kRowLanes][kChanLanes], sb[kRowLanes][kChanLanes];
  const int64_t c = static_cast<int64_t>(blockIdx.y) * kChanLanes + threadIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * k.rows_per_chunk;
  const int64_t r1 = r0 + k.rows_per_chunk < k.rows ? r0 + k.rows_per_chunk : k.rows;
  double a = 0.0, b = 0.0;
  if (c < k.c)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) {
      const double2 v = f(r, c);
      a += v.x;
      b += v.y;
    }
  allow_dependent_launch();  // as in vector_channel_partials_n
  sa[threadIdx.y][threadIdx.x] = a;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && c < k.c) {
    double ta = 0.0, tb = 0.0;
    for (int i = 0; i < kRowLanes; ++i) ta += sa[i][threadIdx.x], tb += sb[i][threadIdx.x];
    part[(blockIdx.x * k.c + c) * 2] = ta;
    part[(blockIdx.x * k.c + c) * 2 + 1] = tb;
  }
}

// Vectorized partials: a block of kVecThreads threads owns one chunk of rows and all C channels; thread t
// reads 16 bytes (V = 16 / sizeof(T) consecutive channels) of a row: vector column cv = t % (C / V), row lane
// t / (C / V). Usable when C is a multiple of V and C / V <= kVecThreads (C <= 2048 in bf16). Each thread
// keeps V pairs of sums (Acc, below); the block adds its row lanes in order, so the result is deterministic.
constexpr int kVecThreads = 256;

template <class T>
inline bool vector_partials_fit(const ChannelChunks& k, std::initializer_list<const void*> ptrs) {
  constexpr int V = Vec16<T>::kN;
  return k.c % V == 0 && k.c / V <= kVecThreads && vectorizable<T>(k.rows * k.c, ptrs);
}

// F: (row, vector column, Acc (&a)[V], Acc (&b)[V]) adds one row's contributions. Acc is the per-thread
// accumulator: double, or float for 16-bit maps, whose values carry 8-11 significant bits. A thread adds
// rows_per_chunk / lanes rows (lanes = kVecThreads / (C / V); rows_per_chunk = rows / 512): 32 on ResNet-18's
// stage-1 maps, about 200 on ResNet-50's at 224x224 with C = 256, up to rows / 512 when C / V = kVecThreads.
// Float rounding over n terms is at most ~n * 6e-8 of their magnitude (1e-4 at n = 1568), below the maps'
// own rounding (2^-8 in bf16); the block and chunk sums are double either way.
// The block's chunk partials of one pair of per-thread sums (the thread layout above), added over the row
// lanes in order through the shared arrays sa, sb (kVecSlots<V> doubles each; the caller syncs before
// reusing them). Thread t's V sums lie at slot t * (V + 1): the pad word spreads a warp's stores over all
// the banks, where V-double rows put every thread of a warp on the same two or four banks (a 16-way
// conflict in bf16 on each of the 2V stores, about 2-4 us per call at ResNet-18's shapes: every block
// reaches this at once).
template <int V>
constexpr int kVecSlots = kVecThreads*(V + 1);
template <int V, class Acc>
__device__ void write_vector_partials(const ChannelChunks k, double* part, const Acc (&a)[V],
                                      const Acc (&b)[V], double* sa, double* sb, int64_t chunk) {
  const int cvs = static_cast<int>(k.c / V), lanes = kVecThreads / cvs;
  const int cv = threadIdx.x % cvs, lane = threadIdx.x / cvs;
  if (lane < lanes) {
    const int at = (lane * cvs + cv) * (V + 1);
#pragma unroll
    for (int j = 0; j < V; ++j) sa[at + j] = a[j], sb[at + j] = b[j];
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < k.c; c += kVecThreads) {
    const int at = static_cast<int>(c / V) * (V + 1) + static_cast<int>(c % V), row = cvs * (V + 1);
    double ta = 0.0, tb = 0.0;
    for (int l = 0; l < lanes; ++l) ta += sa[l * row + at], tb += sb[l * row + at];
    part[(chunk * k.c + c) * 2] = ta;
    part[(chunk * k.c + c) * 2 + 1] = tb;
  }
}

// Chunk `chunk`'s rows, in order, to add_row(r, cv, sums...) with P pairs of per-thread sums (P * 2 arrays
// of V), then each pair's partials to part[p], through the shared arrays sa, sb (kVecSlots<V> doubles each;
// a block that adds another chunk after this one syncs before it, as the pairs do here). kAllowDependents:
// let a dependent kernel launch once the rows are read (a kernel that goes on after its chunks does not).
template <class T, class Acc, int P, bool kAllowDependents = true, class F>
__device__ __forceinline__ void vector_chunk_partials_n(const ChannelChunks k, int64_t chunk,
                                                        double* const (&part)[P], F add_row, double* sa,
                                                        double* sb) {
  constexpr int V = Vec16<T>::kN;
  const int cvs = static_cast<int>(k.c / V), lanes = kVecThreads / cvs;
  const int cv = threadIdx.x % cvs, lane = threadIdx.x / cvs;
  Acc acc[P][2][V];
#pragma unroll
  for (int p = 0; p < P; ++p)
#pragma unroll
    for (int j = 0; j < V; ++j) acc[p][0][j] = Acc(0), acc[p][1][j] = Acc(0);
  const int64_t r0 = chunk * k.rows_per_chunk;
  const int64_t r1 = r0 + k.rows_per_chunk < k.rows ? r0 + k.rows_per_chunk : k.rows;
  if (lane < lanes)
#pragma unroll 4
    for (int64_t r = r0 + lane; r < r1; r += lanes) add_row(r, cv, acc);  // rows in order: deterministic
  // The rows are read: a finalize launched as a dependent of this pass (Context::bn_grad_dependent_launch)
  // may become resident for the partials' writes (its wait still covers them).
  if constexpr (kAllowDependents) allow_dependent_launch();
#pragma unroll
  for (int p = 0; p < P; ++p) {
    if (p > 0) __syncthreads();  // the previous pair's reads of sa, sb are done
    write_vector_partials<V>(k, part[p], acc[p][0], acc[p][1], sa, sb, chunk);
  }
}

// The block's chunk (blockIdx.x), as above.
template <class T, class Acc, int P, class F>
__device__ void vector_channel_partials_n(const ChannelChunks k, double* const (&part)[P], F add_row) {
  constexpr int V = Vec16<T>::kN;
  __shared__ double sa[kVecSlots<V>], sb[kVecSlots<V>];
  vector_chunk_partials_n<T, Acc, P>(k, static_cast<int64_t>(blockIdx.x), part, add_row, sa, sb);
}

template <class T, class Acc, class F>
__device__ void vector_channel_partials(const ChannelChunks k, double* part, F add_row) {
  constexpr int V = Vec16<T>::kN;
  double* const parts[1] = {part};
  vector_channel_partials_n<T, Acc, 1>(
      k, parts, [&](int64_t r, int cv, Acc(&acc)[1][2][V]) { add_row(r, cv, acc[0][0], acc[0][1]); });
}

// Totals over all chunks of the kCh channels from c0, by one block of kFinalizeThreads threads: the group's
// 2 kCh partials of a chunk (a channel's two are adjacent) are 16 kCh contiguous bytes, so a warp reads
// 32 / (2 kCh) chunks per load (one with kCh = 16: 256 bytes), warp w adds its chunks in order, and warp 0
// adds the warps' (and a warp's chunk groups') sums in a fixed order (deterministic).
// Returns channel c0 + l's totals in lane l < kCh of warp 0 (finalize_owner); once per kernel: the shared
// scratch has no trailing barrier. kFinalizeChannels (16): few blocks of whole-sector loads because a
// finalize often runs beside a weight gradient that holds all but a dozen SMs: one block per channel with a
// 16-byte load per chunk and thread (the previous form) made up to 512 blocks there, 11-18 us each. (One warp
// per channel, before that, left each lane up to 32 dependent loads: 5-13 us per call, 386 us of a ResNet-18
// step.) kCh = 4: four times the blocks, each warp's loads a quarter as deep, for the forward's finalizes,
// which nothing runs beside.
// A block of kWarps < kFinalizeWarps warps (a divisor) does the same adds in the same order, each warp in
// turn for every kWarps-th of the kFinalizeWarps warps above (the resident batchnorm, ops/bn_resident.cu);
// kCoherent reads the partials through L2 only, for a kernel that wrote them itself (after a grid barrier).
constexpr int kFinalizeChannels = 16, kFinalizeWarps = 16, kFinalizeThreads = 32 * kFinalizeWarps;
template <int kCh = kFinalizeChannels, int kWarps = kFinalizeWarps, bool kCoherent = false>
__device__ inline double2 channel_totals(const ChannelChunks k, const double* __restrict__ part, int64_t c0) {
  static_assert(kCh == 16 || kCh == 8 || kCh == 4, "a chunk's group is a whole fraction of a warp");
  static_assert(kWarps >= 1 && kFinalizeWarps % kWarps == 0, "each warp takes whole shares");
  constexpr int W = 2 * kCh, G = 32 / W;  // doubles per chunk's group, chunks per warp-wide load
  __shared__ double s[kFinalizeWarps][32];
  const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x >> 5);
  const int64_t col = 2 * c0 + lane % W, row = 2 * k.c;
#pragma unroll
  for (int vw = warp; vw < kFinalizeWarps; vw += kWarps) {
    double v = 0.0;
    if (col < row) {
#pragma unroll 8
      for (int64_t i = vw * G + lane / W; i < k.chunks; i += kFinalizeWarps * G)
        v += kCoherent ? __ldcg(part + i * row + col) : __ldg(part + i * row + col);
    }
    s[vw][lane] = v;
  }
  __syncthreads();
  double t = 0.0;
  if (warp == 0 && lane < W)
    for (int w = 0; w < kFinalizeWarps; ++w)
#pragma unroll
      for (int g = 0; g < G; ++g) t += s[w][g * W + lane];
  const double a = __shfl_sync(0xffffffffu, t, (2 * lane) & 31);
  const double b = __shfl_sync(0xffffffffu, t, (2 * lane + 1) & 31);
  return make_double2(a, b);
}

// f(std::integral_constant<int, kCh>{}) with kCh = 4 when `channels` is 4, else kFinalizeChannels: the
// finalizes' channels per block (Context::bn_finalize_channels, grad_finalize_channels).
template <class F>
void with_finalize_channels(int channels, F&& f) {
  if (channels == 4)
    f(std::integral_constant<int, 4>{});
  else
    f(std::integral_constant<int, kFinalizeChannels>{});
}

// Element-wise passes over [rows, C] in 16-byte vectors where each thread keeps its channels' coefficients in
// registers: with blocks of kFixedThreads threads and C / V dividing kFixedThreads, the grid stride is a
// multiple of the vectors per row, so a thread always sees the same V channels (fixed_channel_base).
constexpr int kFixedThreads = 256;
template <class T>
inline bool fixed_channels_fit(int64_t c) {
  constexpr int V = Vec16<T>::kN;
  return c % V == 0 && c / V <= kFixedThreads && kFixedThreads % (c / V) == 0;
}
// First vector index and channel base of the calling thread.
template <class T>
__device__ __forceinline__ int64_t fixed_first_vector() {
  return static_cast<int64_t>(blockIdx.x) * kFixedThreads + threadIdx.x;
}
// A block's first vector is a multiple of the vectors per row (kFixedThreads is), so the thread's vector
// within its row is threadIdx.x's: a 32-bit remainder instead of a 64-bit one ahead of every pass's first
// load.
template <class T>
__device__ __forceinline__ int64_t fixed_channel_base(int64_t c) {
  return static_cast<int64_t>(threadIdx.x % static_cast<unsigned>(c / Vec16<T>::kN)) * Vec16<T>::kN;
}
// The row (of C / V vectors) of the thread's first vector, and the rows each grid stride advances it by:
// the same layout, in 32-bit divisions, for passes that need the row as well (a subsampled output).
template <class T>
__device__ __forceinline__ int64_t fixed_first_row(int64_t c) {
  const auto cv = static_cast<unsigned>(c / Vec16<T>::kN);
  return static_cast<int64_t>(blockIdx.x) * (kFixedThreads / cv) + threadIdx.x / cv;
}
template <class T>
__device__ __forceinline__ int64_t fixed_row_stride(int64_t c) {
  return static_cast<int64_t>(gridDim.x) * (kFixedThreads / static_cast<unsigned>(c / Vec16<T>::kN));
}

// out[j] = p[ch + j] for a thread's V channels, as V / 4 16-byte loads (p + ch 16-byte aligned: ch is a
// multiple of V and the launch checked p). Neighbouring threads hold neighbouring channel vectors, so one
// warp-wide load spans 32 x 4V bytes whatever its width; scalar loads took V of those per array, which on
// the small maps of a ResNet's last stages cost more than the pass itself (ncu, H200).
template <int V>
__device__ __forceinline__ void load_channels(const float* p, int64_t ch, float (&out)[V]) {
  static_assert(V % 4 == 0, "channel vectors are whole float4s");
  const float4* q = reinterpret_cast<const float4*>(p + ch);
#pragma unroll
  for (int j = 0; j < V / 4; ++j) {
    const float4 v = q[j];
    out[4 * j] = v.x, out[4 * j + 1] = v.y, out[4 * j + 2] = v.z, out[4 * j + 3] = v.w;
  }
}

// Finalize kernels run one block per kCh channels (channel_totals): the block's first channel, and the
// channel whose totals the calling thread holds, or -1.
template <int kCh = kFinalizeChannels>
inline unsigned finalize_blocks(int64_t c) {
  return static_cast<unsigned>((c + kCh - 1) / kCh);
}
template <int kCh = kFinalizeChannels>
__device__ inline int64_t finalize_first_channel() {
  return static_cast<int64_t>(blockIdx.x) * kCh;
}
template <int kCh = kFinalizeChannels>
__device__ inline int64_t finalize_owner(const ChannelChunks k, int64_t c0) {
  const int64_t c = c0 + threadIdx.x;
  return threadIdx.x < kCh && c < k.c ? c : -1;
}

// Batchnorm's two gradient sums (sum g, sum g (x - mean)), shared by its own sums pass
// (batchnorm_backward.cu) and the masking passes that hand them over (masked_grad_sums.cu), so both add the
// same terms in the same order. Per-thread sums in float for f16 / bf16 maps (measured faster, as fp32
// implementations do), in double for f32 maps; blocks and chunks add in double either way.
template <class T>
using GradAcc = std::conditional_t<std::is_same_v<T, float>, double, float>;

// The calling thread's channel means in a vector_channel_partials kernel (its vector column's V channels).
template <class T, int V>
__device__ __forceinline__ void thread_channel_means(const ChannelChunks& k, const float* mean,
                                                     GradAcc<T> (&mu)[V]) {
  float mf[V];
  load_channels(mean, static_cast<int64_t>(threadIdx.x % (k.c / V)) * V, mf);
#pragma unroll
  for (int j = 0; j < V; ++j) mu[j] = mf[j];
}

// One element's terms: gradient g at x of a channel with mean mu.
template <class Acc>
__device__ __forceinline__ void add_grad_terms(Acc g, Acc x, Acc mu, Acc& sum, Acc& sum_x) {
  sum += g;
  sum_x += g * (x - mu);
}
__device__ __forceinline__ double2 grad_terms(double g, double x, float mu) {
  return make_double2(g, g * (x - mu));
}

}  // namespace fresco::cuda
