// fresco's own strict-fp32 GEMM (see sgemm.h). A thread block owns a BM x BN tile of C and walks k in steps
// of 16: each step's A and B slices are loaded into registers while the previous step is multiplied out of
// shared memory, then stored into the other of two shared buffers (one barrier per step). Shared tiles are
// k-major ([16][BM + 4]): an operand whose k is contiguous in memory is transposed on its way in, one whose m
// or n is contiguous is copied as it is. Each thread holds 16 x 8 outputs as 4 x 2 blocks of 4 x 4, so its
// shared reads are 16-byte broadcasts; 16 x 8 (not 8 x 8) because an H100/H200 multiprocessor does 128 FFMA
// but reads only 32 floats of shared memory per cycle, and 8 x 8 needs exactly that ratio (measured: under
// half the FFMA rate). The threads of a block form 1-8 slices that split each step's k between them, so even
// small outputs get several warps per multiprocessor; the slices' sums are added in slice order at the end.
// Every output is thus summed in one fixed order.
#include <algorithm>

#include "cuda_common.h"
#include "ops/pointwise.cuh"
#include "ops/sgemm.h"

namespace fresco::cuda {

namespace {
constexpr int kBK = 16;  // k per step
constexpr int kPad = 4;  // floats after each shared row

// Block tile and k slices (threads = BM/16 * BN/8 * slices, 128 to 256 of them).
struct TileShape {
  int bm, bn, slices;
};
constexpr TileShape kTiles[] = {{128, 128, 1}, {128, 128, 2}, {128, 64, 2}, {128, 64, 4},
                                {64, 128, 2},  {64, 128, 4},  {64, 64, 4},  {64, 64, 8}};
constexpr int kTileCount = sizeof(kTiles) / sizeof(kTiles[0]);
constexpr int kSplits[] = {2, 3, 4, 6, 8};
constexpr int64_t kMinKPerSplit = 32;

// One operand's slice of R rows (m for A, n for B) by kBK values of k, global -> registers -> shared.
// K_INNER: element (r, kk) at p[r * ld + kk]; otherwise at p[kk * ld + r]. Each thread's elements keep a
// pointer that advances by one slice per step, and their fixed row (or k-row) offsets.
template <int R, bool K_INNER, int THREADS>
struct SliceLoader {
  static constexpr int kVec = R * kBK / 4 / THREADS;  // float4 per thread
  static constexpr int kLd = R + kPad;
  static_assert(kVec >= 1 && kVec * THREADS * 4 == R * kBK, "tile and thread count disagree");
  static_assert(THREADS % (kBK / 4) == 0 && (THREADS * 4) % R == 0, "index layout");
  float4 v[kVec];
  const float* ptr;   // element 0's address at the current step; element i is at ptr + i * stride
  int64_t stride;     // address step between a thread's elements
  int kofs;           // element 0's k within the slice (element i: + i * kofs_step)
  bool row_ok[kVec];  // row inside the matrix

  // Element i of thread tid: K_INNER: row idx / 2, k (idx % 2) * 4; else k-row idx / (R/4), row (idx % (R/4))
  // * 4, with idx = tid + i * THREADS. THREADS is a multiple of 2 and of R/4, so only the row (K_INNER) or
  // the k-row moves with i.
  static constexpr int kRowStep = K_INNER ? THREADS / (kBK / 4) : 0;
  static constexpr int kKStep = K_INNER ? 0 : THREADS / (R / 4);

  __device__ __forceinline__ void init(const float* __restrict__ p, int64_t ld, int64_t r0, int64_t r_end,
                                       int64_t k0, int tid) {
    const int64_t r = K_INNER ? r0 + tid / (kBK / 4) : r0 + (tid % (R / 4)) * 4;
    kofs = K_INNER ? (tid % (kBK / 4)) * 4 : tid / (R / 4);
    ptr = K_INNER ? p + r * ld + k0 + kofs : p + (k0 + kofs) * ld + r;
    stride = K_INNER ? static_cast<int64_t>(kRowStep) * ld : static_cast<int64_t>(kKStep) * ld;
#pragma unroll
    for (int i = 0; i < kVec; ++i) row_ok[i] = r + i * kRowStep < r_end;
  }
  // Loads the slice whose first k is k0 (the pointer is already there) and steps the pointer to the next.
  // k and the contiguous extent are multiples of 4 (sgemm_fits): a float4 is wholly inside or outside.
  __device__ __forceinline__ void load(int64_t k0, int64_t k_end, int64_t ld) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const bool ok = row_ok[i] && k0 + kofs + i * kKStep < k_end;
      v[i] =
          ok ? __ldg(reinterpret_cast<const float4*>(ptr + i * stride)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    ptr += K_INNER ? kBK : kBK * ld;
  }

  __device__ __forceinline__ void store(float* __restrict__ s, int tid) const {
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const int idx = tid + i * THREADS;
      if (K_INNER) {
        const int row = idx / (kBK / 4), kq = (idx % (kBK / 4)) * 4;
        s[(kq + 0) * kLd + row] = v[i].x;
        s[(kq + 1) * kLd + row] = v[i].y;
        s[(kq + 2) * kLd + row] = v[i].z;
        s[(kq + 3) * kLd + row] = v[i].w;
      } else {
        const int krow = idx / (R / 4), c = (idx % (R / 4)) * 4;
        *reinterpret_cast<float4*>(s + krow * kLd + c) = v[i];
      }
    }
  }
};

__device__ __forceinline__ float4 relu4(float4 v) {
  const ReluF r;  // ops/pointwise.cuh, as the CPU kernel: NaN -> 0
  return make_float4(r(v.x), r(v.y), r(v.z), r(v.w));
}
// partial == nullptr: C = acc (+ bias) (relu). Otherwise the split's raw sums go to partial[z][m][n].
// S slices of (BM/16) x (BN/8) threads share the block's tiles, slice s taking k = s*(kBK/S) .. of each step
// (sliced k: more warps per output tile, each with a 16 x 8 register tile); at the end the slices' sums are
// added through shared memory in slice order, and slice 0 writes the tile.
template <int BM, int BN, int S, bool A_K_INNER, bool B_K_INNER>
__global__ void __launch_bounds__((BM / 16) * (BN / 8) * S)
    sgemm_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                 const float* __restrict__ bias, float* __restrict__ partial, int64_t m, int64_t n, int64_t k,
                 int64_t k_chunk, bool relu) {
  constexpr int kGroup = (BM / 16) * (BN / 8);  // threads of one slice
  constexpr int kThreads = kGroup * S;
  constexpr int kPerSlice = kBK / S;                // k values of a step per slice
  constexpr int kWx = (BN / 8) < 8 ? (BN / 8) : 8;  // threads of a warp along n
  constexpr int kWy = 32 / kWx;
  constexpr int kWarpsX = (BN / 8) / kWx;
  static_assert(kGroup % 32 == 0 && (BM / 16) % kWy == 0 && kBK % S == 0, "thread layout");
  using LoadA = SliceLoader<BM, A_K_INNER, kThreads>;
  using LoadB = SliceLoader<BN, B_K_INNER, kThreads>;
  constexpr int kTileFloats = kBK * (LoadA::kLd + LoadB::kLd);
  constexpr int kReduceFloats = S > 1 ? BM * (BN / 2) : 0;
  constexpr int kSmemFloats = 2 * kTileFloats > kReduceFloats ? 2 * kTileFloats : kReduceFloats;
  __shared__ __align__(16) float smem[kSmemFloats];

  const int tid = static_cast<int>(threadIdx.x);
  const int slice = tid / kGroup, gt = tid % kGroup;
  const int lane = gt & 31, warp = gt >> 5;
  const int tx = (warp % kWarpsX) * kWx + lane % kWx;  // columns h * BN/2 + tx*4 + j
  const int ty = (warp / kWarpsX) * kWy + lane / kWx;  // rows g * BM/4 + ty*4 + i
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * BM, n0 = static_cast<int64_t>(blockIdx.x) * BN;
  const int64_t k_begin = static_cast<int64_t>(blockIdx.z) * k_chunk;
  const int64_t k_end = k_begin + k_chunk < k ? k_begin + k_chunk : k;
  const int64_t lda = A_K_INNER ? k : m, ldb = B_K_INNER ? k : n;

  float acc[16][8];
#pragma unroll
  for (int i = 0; i < 16; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

  const int64_t steps = k_end > k_begin ? (k_end - k_begin + kBK - 1) / kBK : 0;
  LoadA la;
  LoadB lb;
  la.init(a, lda, m0, m, k_begin, tid);
  lb.init(b, ldb, n0, n, k_begin, tid);
  if (steps > 0) {
    la.load(k_begin, k_end, lda);
    lb.load(k_begin, k_end, ldb);
    la.store(smem, tid);
    lb.store(smem + kBK * LoadA::kLd, tid);
    __syncthreads();
  }
  for (int64_t t = 0; t < steps; ++t) {
    float* const cur = smem + (t & 1) * kTileFloats;
    float* const next = smem + ((t + 1) & 1) * kTileFloats;
    const bool more = t + 1 < steps;
    if (more) {
      const int64_t k1 = k_begin + (t + 1) * kBK;
      la.load(k1, k_end, lda);
      lb.load(k1, k_end, ldb);
    }
    const float* as = cur + slice * kPerSlice * LoadA::kLd + ty * 4;
    const float* bs = cur + kBK * LoadA::kLd + slice * kPerSlice * LoadB::kLd + tx * 4;
#pragma unroll
    for (int kk = 0; kk < kPerSlice; ++kk) {
      float av[16], bv[8];
#pragma unroll
      for (int g = 0; g < 4; ++g) {
        const float4 v = *reinterpret_cast<const float4*>(as + kk * LoadA::kLd + g * (BM / 4));
        av[g * 4 + 0] = v.x, av[g * 4 + 1] = v.y, av[g * 4 + 2] = v.z, av[g * 4 + 3] = v.w;
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float4 v = *reinterpret_cast<const float4*>(bs + kk * LoadB::kLd + h * (BN / 2));
        bv[h * 4 + 0] = v.x, bv[h * 4 + 1] = v.y, bv[h * 4 + 2] = v.z, bv[h * 4 + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < 16; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    if (more) {
      la.store(next, tid);
      lb.store(next + kBK * LoadA::kLd, tid);
    }
    __syncthreads();
  }

  if constexpr (S > 1) {
    // Slice 0 adds the others' sums in slice order, half the columns at a time (the tile buffers are free:
    // the loop ended on a barrier).
#pragma unroll
    for (int h = 0; h < 2; ++h)
      for (int s = 1; s < S; ++s) {
        if (slice == s)
#pragma unroll
          for (int i = 0; i < 16; ++i)
            *reinterpret_cast<float4*>(smem + ((i / 4) * (BM / 4) + ty * 4 + i % 4) * (BN / 2) + tx * 4) =
                make_float4(acc[i][h * 4 + 0], acc[i][h * 4 + 1], acc[i][h * 4 + 2], acc[i][h * 4 + 3]);
        __syncthreads();
        if (slice == 0)
#pragma unroll
          for (int i = 0; i < 16; ++i) {
            const float4 v = *reinterpret_cast<const float4*>(
                smem + ((i / 4) * (BM / 4) + ty * 4 + i % 4) * (BN / 2) + tx * 4);
            acc[i][h * 4 + 0] += v.x, acc[i][h * 4 + 1] += v.y, acc[i][h * 4 + 2] += v.z,
                acc[i][h * 4 + 3] += v.w;
          }
        __syncthreads();
      }
    if (slice != 0) return;
  }

  float* out = partial ? partial + static_cast<int64_t>(blockIdx.z) * m * n : c;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int64_t row = m0 + (i / 4) * (BM / 4) + ty * 4 + i % 4;
    if (row >= m) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t col = n0 + h * (BN / 2) + tx * 4;
      if (col >= n) continue;  // n is a multiple of 4: the float4 is wholly inside
      float4 v = make_float4(acc[i][h * 4 + 0], acc[i][h * 4 + 1], acc[i][h * 4 + 2], acc[i][h * 4 + 3]);
      if (!partial) {
        if (bias) {
          const float4 bb = __ldg(reinterpret_cast<const float4*>(bias + col));
          v.x += bb.x, v.y += bb.y, v.z += bb.z, v.w += bb.w;
        }
        if (relu) v = relu4(v);
      }
      *reinterpret_cast<float4*>(out + row * n + col) = v;
    }
  }
}

// C = sum of the splits' partials in split order (+ bias) (relu), a float4 per thread.
__global__ void splitk_reduce_kernel(const float4* __restrict__ partial, int splits, int64_t mn4, int64_t n4,
                                     const float4* __restrict__ bias, bool relu, float4* __restrict__ c) {
  FR_CUDA_GRID_LOOP(i, mn4) {
    float4 s = partial[i];
    for (int z = 1; z < splits; ++z) {
      const float4 p = partial[z * mn4 + i];
      s.x += p.x, s.y += p.y, s.z += p.z, s.w += p.w;
    }
    if (bias) {
      const float4 bb = bias[i % n4];
      s.x += bb.x, s.y += bb.y, s.z += bb.z, s.w += bb.w;
    }
    if (relu) s = relu4(s);
    c[i] = s;
  }
}

template <int BM, int BN, int S, bool AK, bool BK>
void launch(const SgemmProblem& p, int splits, int64_t k_chunk, const float* a, const float* b, float* c,
            const float* bias, float* partial, cudaStream_t s) {
  constexpr int kThreads = (BM / 16) * (BN / 8) * S;
  const dim3 grid(static_cast<unsigned>((p.n + BN - 1) / BN), static_cast<unsigned>((p.m + BM - 1) / BM),
                  static_cast<unsigned>(splits));
  sgemm_kernel<BM, BN, S, AK, BK>
      <<<grid, kThreads, 0, s>>>(a, b, c, bias, partial, p.m, p.n, p.k, k_chunk, p.relu);
}

template <int BM, int BN, int S>
void launch_layout(const SgemmProblem& p, int splits, int64_t k_chunk, const float* a, const float* b,
                   float* c, const float* bias, float* partial, cudaStream_t s) {
  // A's k is contiguous unless A is stored transposed; B's k is contiguous when B is stored transposed.
  if (!p.trans_a && p.trans_b)
    return launch<BM, BN, S, true, true>(p, splits, k_chunk, a, b, c, bias, partial, s);
  if (!p.trans_a && !p.trans_b)
    return launch<BM, BN, S, true, false>(p, splits, k_chunk, a, b, c, bias, partial, s);
  if (p.trans_a && !p.trans_b)
    return launch<BM, BN, S, false, false>(p, splits, k_chunk, a, b, c, bias, partial, s);
  return launch<BM, BN, S, false, true>(p, splits, k_chunk, a, b, c, bias, partial, s);
}

int64_t k_chunk_of(int64_t k, int splits) {
  const int64_t per = (k + splits - 1) / splits;
  return (per + kBK - 1) / kBK * kBK;
}

}  // namespace

bool sgemm_fits(const SgemmProblem& p) {
  constexpr int64_t kMax = (int64_t{1} << 31) - 1;
  const auto in_range = [](int64_t v) { return v >= 1 && v <= kMax; };
  return in_range(p.m) && in_range(p.n) && in_range(p.k) && p.n % 4 == 0 && p.k % 4 == 0 &&
         (!p.trans_a || p.m % 4 == 0) && (p.m + 63) / 64 <= 65535;
}

int sgemm_tile_count() {
  return kTileCount;
}

uint64_t sgemm_workspace(const SgemmProblem& p, SgemmConfig c) {
  return c.splits > 1 ? static_cast<uint64_t>(c.splits) * p.m * p.n * sizeof(float) : 0;
}

std::string sgemm_name(SgemmConfig c) {
  if (c.tile < 0 || c.tile >= kTileCount) return "none";
  return std::to_string(kTiles[c.tile].bm) + "x" + std::to_string(kTiles[c.tile].bn) + "k" +
         std::to_string(kTiles[c.tile].slices) + "/s" + std::to_string(c.splits);
}

std::vector<SgemmConfig> sgemm_configs(const SgemmProblem& p, int sm_count, uint64_t max_workspace) {
  std::vector<SgemmConfig> out;
  if (!sgemm_fits(p)) return out;
  const int64_t sms = sm_count > 0 ? sm_count : 132;
  for (int t = 0; t < kTileCount; ++t) {
    out.push_back({t, 1});
    const int64_t blocks =
        ((p.m + kTiles[t].bm - 1) / kTiles[t].bm) * ((p.n + kTiles[t].bn - 1) / kTiles[t].bn);
    if (blocks >= sms) continue;  // the grid fills the machine already
    for (int s : kSplits) {
      const SgemmConfig c{t, s};
      // Every split, the last one too (k_chunk is rounded up to whole steps), keeps at least kMinKPerSplit.
      const int64_t last = p.k - (s - 1) * k_chunk_of(p.k, s);
      if (last < kMinKPerSplit || blocks * s > 2 * sms || sgemm_workspace(p, c) > max_workspace) continue;
      out.push_back(c);
    }
  }
  return out;
}

void sgemm_run(const SgemmProblem& p, SgemmConfig cfg, const float* a, const float* b, float* c,
               const float* bias, void* workspace, uint64_t workspace_bytes, cudaStream_t s) {
  FR_PLUGIN_CHECK(sgemm_fits(p), FR_ERR_INVALID_ARGUMENT,
                  "sgemm: problem " + std::to_string(p.m) + "x" + std::to_string(p.n) + "x" +
                      std::to_string(p.k) + " does not fit the kernels");
  FR_PLUGIN_CHECK(cfg.tile >= 0 && cfg.tile < kTileCount && cfg.splits >= 1 && cfg.splits <= 64,
                  FR_ERR_INVALID_ARGUMENT, "sgemm: no configuration " + sgemm_name(cfg));
  FR_PLUGIN_CHECK(aligned16({a, b, c}) && (!p.bias || (bias && aligned16({bias}))), FR_ERR_INVALID_ARGUMENT,
                  "sgemm: operands must be 16-byte aligned (and the bias given)");
  const uint64_t need = sgemm_workspace(p, cfg);
  FR_PLUGIN_CHECK(workspace_bytes >= need && (need == 0 || (workspace && aligned16({workspace}))),
                  FR_ERR_INVALID_ARGUMENT,
                  "sgemm: " + sgemm_name(cfg) + " needs " + std::to_string(need) +
                      " workspace bytes, given " + std::to_string(workspace_bytes));
  const int64_t k_chunk = cfg.splits > 1 ? k_chunk_of(p.k, cfg.splits) : p.k;
  float* partial = cfg.splits > 1 ? static_cast<float*>(workspace) : nullptr;
  const float* bias_or_null = p.bias ? bias : nullptr;
  const float* epilogue_bias = partial ? nullptr : bias_or_null;
  using Launch = void (*)(const SgemmProblem&, int, int64_t, const float*, const float*, float*, const float*,
                          float*, cudaStream_t);
  static constexpr Launch kLaunch[kTileCount] = {launch_layout<128, 128, 1>, launch_layout<128, 128, 2>,
                                                 launch_layout<128, 64, 2>,  launch_layout<128, 64, 4>,
                                                 launch_layout<64, 128, 2>,  launch_layout<64, 128, 4>,
                                                 launch_layout<64, 64, 4>,   launch_layout<64, 64, 8>};
  kLaunch[cfg.tile](p, cfg.splits, k_chunk, a, b, c, epilogue_bias, partial, s);
  FR_CUDA_LAUNCH_CHECK();
  if (partial) {
    const int64_t mn4 = p.m * p.n / 4;
    splitk_reduce_kernel<<<grid_for(mn4, 256, 0), 256, 0, s>>>(
        reinterpret_cast<const float4*>(partial), cfg.splits, mn4, p.n / 4,
        reinterpret_cast<const float4*>(bias_or_null), p.relu, reinterpret_cast<float4*>(c));
    FR_CUDA_LAUNCH_CHECK();
  }
}

}  // namespace fresco::cuda
