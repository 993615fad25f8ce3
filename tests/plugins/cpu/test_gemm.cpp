// Tests of fresco::cpu::sgemm against a naive double-accumulation reference: every compiled kernel this CPU
// runs, all four transposes, edge tiles, padded leading dimensions, alpha / beta, k == 0, NaN-filled C with
// beta == 0, the MLP 784-1024-512-256-10 shapes, bitwise determinism across thread counts, and argument
// checks. Invariants: small-integer inputs make every product and sum exact in float, so those cases compare
// exactly; real-valued cases use the rigorous bound (k + 2) * eps * sum |terms|. Runs in a few seconds.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <tbb/task_arena.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gemm.h"

namespace {
std::atomic<int64_t> g_allocations{0};  // operator new calls, to check that sgemm never allocates
}  // namespace

// Out of line (noinline), so GCC does not pair an inlined malloc() / free() with a new-expression
// (-Wmismatched-new-delete).
__attribute__((noinline)) void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void operator delete(void* p) noexcept {
  std::free(p);
}
__attribute__((noinline)) void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace {

using fresco::cpu::GemmArgs;
using fresco::cpu::GemmKernel;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// 64-byte aligned scratch for sgemm.
struct Workspace {
  std::unique_ptr<void, FreeDeleter> mem;
  uint64_t bytes = 0;
  explicit Workspace(uint64_t n) : bytes(n) {
    if (n > 0) mem.reset(std::aligned_alloc(64, (n + 63) / 64 * 64));
  }
  void* get() const { return mem.get(); }
};

Workspace workspace_for(const GemmArgs& g, int threads = tbb::this_task_arena::max_concurrency()) {
  return Workspace(fresco::cpu::gemm_workspace_bytes(g.m, g.n, g.k, threads));
}

// A GEMM case with its own storage: op(A) is m x k, op(B) is k x n, stored with leading-dimension padding.
struct Case {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, pad = 0;
  float alpha = 1.0f, beta = 0.0f;
  bool integers = true;  // small integers: exact results
  bool nan_c = false;    // C starts as NaN (only meaningful with beta == 0)
};

std::string describe(const Case& c) {
  return "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
         " trans_a=" + std::to_string(c.trans_a) + " trans_b=" + std::to_string(c.trans_b) +
         " pad=" + std::to_string(c.pad) + " alpha=" + std::to_string(c.alpha) +
         " beta=" + std::to_string(c.beta);
}

// Floats that end exactly where an inaccessible page begins, so any read past the last one faults.
class GuardedFloats {
 public:
  GuardedFloats() = default;
  explicit GuardedFloats(size_t count) : count_(count) {
    if (count == 0) return;
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    map_bytes_ = (count * sizeof(float) + page - 1) / page * page + page;
    void* map = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) throw std::bad_alloc();
    map_ = static_cast<char*>(map);
    mprotect(map_ + map_bytes_ - page, page, PROT_NONE);
    data_ = reinterpret_cast<float*>(map_ + map_bytes_ - page) - count;
  }
  GuardedFloats(GuardedFloats&& o) noexcept { *this = std::move(o); }
  GuardedFloats& operator=(GuardedFloats&& o) noexcept {
    std::swap(map_, o.map_);
    std::swap(map_bytes_, o.map_bytes_);
    std::swap(data_, o.data_);
    std::swap(count_, o.count_);
    return *this;
  }
  ~GuardedFloats() {
    if (map_ != nullptr) munmap(map_, map_bytes_);
  }
  float* data() const { return data_; }
  size_t size() const { return count_; }
  float& operator[](size_t i) const { return data_[i]; }
  std::vector<float> to_vector() const { return std::vector<float>(data_, data_ + count_); }

 private:
  char* map_ = nullptr;
  size_t map_bytes_ = 0;
  float* data_ = nullptr;
  size_t count_ = 0;
};

struct Operands {
  GuardedFloats a, b, c;
  GemmArgs args;
  float sentinel = -12345.0f;  // fills C's padding columns, which sgemm must not touch
};

// Storage is exactly (rows - 1) * ld + cols floats, followed by a guard page: an over-read faults.
GuardedFloats random_matrix(int64_t rows, int64_t cols, int64_t ld, bool integers, std::mt19937& rng) {
  GuardedFloats v(rows == 0 ? 0 : static_cast<size_t>((rows - 1) * ld + cols));
  std::fill(v.data(), v.data() + v.size(), 7.0f);
  std::uniform_int_distribution<int> small(-4, 4);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      v[static_cast<size_t>(i * ld + j)] = integers ? static_cast<float>(small(rng)) : real(rng);
    }
  }
  return v;
}

Operands make_operands(const Case& c, std::mt19937& rng) {
  Operands o;
  GemmArgs& g = o.args;
  g.trans_a = c.trans_a;
  g.trans_b = c.trans_b;
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.alpha = c.alpha;
  g.beta = c.beta;
  const int64_t a_rows = c.trans_a ? c.k : c.m, a_cols = c.trans_a ? c.m : c.k;
  const int64_t b_rows = c.trans_b ? c.n : c.k, b_cols = c.trans_b ? c.k : c.n;
  g.lda = a_cols + c.pad;
  g.ldb = b_cols + c.pad;
  g.ldc = c.n + c.pad;
  o.a = random_matrix(a_rows, a_cols, g.lda, c.integers, rng);
  o.b = random_matrix(b_rows, b_cols, g.ldb, c.integers, rng);
  o.c = random_matrix(c.m, c.n, g.ldc, c.integers, rng);
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < g.ldc && i * g.ldc + j < static_cast<int64_t>(o.c.size()); ++j) {
      float& x = o.c[static_cast<size_t>(i * g.ldc + j)];
      if (j >= c.n) x = o.sentinel;
      if (j < c.n && c.nan_c) x = std::numeric_limits<float>::quiet_NaN();
    }
  }
  g.a = o.a.data();
  g.b = o.b.data();
  g.c = o.c.data();
  return o;
}

// ref = alpha * op(A) op(B) + beta * C0 in double; bound = sum of |terms| (for the error bound).
void reference(const GemmArgs& g, const std::vector<float>& c0, std::vector<double>& ref,
               std::vector<double>& bound) {
  const int64_t m = g.m, n = g.n, k = g.k;
  std::vector<double> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p)
      a[static_cast<size_t>(i * k + p)] = g.trans_a ? g.a[p * g.lda + i] : g.a[i * g.lda + p];
  }
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t j = 0; j < n; ++j)
      b[static_cast<size_t>(p * n + j)] = g.trans_b ? g.b[j * g.ldb + p] : g.b[p * g.ldb + j];
  }
  ref.assign(static_cast<size_t>(m * n), 0.0);
  bound.assign(static_cast<size_t>(m * n), 0.0);
  std::vector<double> acc(static_cast<size_t>(n)), mag(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    std::fill(mag.begin(), mag.end(), 0.0);
    for (int64_t p = 0; p < k; ++p) {
      const double x = a[static_cast<size_t>(i * k + p)];
      const double* brow = &b[static_cast<size_t>(p * n)];
      for (int64_t j = 0; j < n; ++j) {
        acc[static_cast<size_t>(j)] += x * brow[j];
        mag[static_cast<size_t>(j)] += std::fabs(x * brow[j]);
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      const double c =
          g.beta == 0.0f ? 0.0 : static_cast<double>(g.beta) * c0[static_cast<size_t>(i * g.ldc + j)];
      ref[static_cast<size_t>(i * n + j)] = static_cast<double>(g.alpha) * acc[static_cast<size_t>(j)] + c;
      bound[static_cast<size_t>(i * n + j)] = std::fabs(g.alpha) * mag[static_cast<size_t>(j)] + std::fabs(c);
    }
  }
}

// Runs `kernel` on the case and checks every element of C and that C's padding is untouched.
void check_case(GemmKernel kernel, const Case& c, std::mt19937& rng) {
  SCOPED_TRACE(describe(c) + " kernel=" + fresco::cpu::gemm_kernel_name(kernel));
  Operands o = make_operands(c, rng);
  const std::vector<float> c0 = o.c.to_vector();
  std::vector<double> ref, bound;
  reference(o.args, c0, ref, bound);
  Workspace ws = workspace_for(o.args);
  fresco::cpu::sgemm_with_kernel(kernel, o.args, ws.get(), ws.bytes);
  const GemmArgs& g = o.args;
  const double eps = c.integers ? 0.0 : (static_cast<double>(g.k) + 2.0) * FLT_EPSILON;
  int bad = 0;
  for (int64_t i = 0; i < g.m && bad < 5; ++i) {
    for (int64_t j = 0; j < g.ldc && i * g.ldc + j < static_cast<int64_t>(o.c.size()); ++j) {
      const float got = o.c[static_cast<size_t>(i * g.ldc + j)];
      if (j >= g.n) {
        if (got != o.sentinel) {
          ADD_FAILURE() << "C padding overwritten at (" << i << ", " << j << ")";
          ++bad;
        }
        continue;
      }
      const double want = ref[static_cast<size_t>(i * g.n + j)];
      const double tol = eps * bound[static_cast<size_t>(i * g.n + j)];
      if (!(std::fabs(got - want) <= tol)) {
        ADD_FAILURE() << "C(" << i << ", " << j << ") = " << got << ", want " << want << " (tol " << tol
                      << ")";
        ++bad;
      }
    }
  }
}

std::vector<GemmKernel> supported_kernels() {
  std::vector<GemmKernel> out;
  for (GemmKernel k : {GemmKernel::kGeneric, GemmKernel::kAvx2, GemmKernel::kAvx512}) {
    if (fresco::cpu::gemm_kernel_supported(k)) out.push_back(k);
  }
  return out;
}

class GemmKernelTest : public ::testing::TestWithParam<GemmKernel> {
 protected:
  void SetUp() override {
    if (!fresco::cpu::gemm_kernel_supported(GetParam()))
      GTEST_SKIP() << "CPU lacks this kernel's instructions";
  }
};

// Hand-picked shapes around tile edges (mr in {4, 6, 12}, nr in {8, 16, 32}, k blocks of up to 384).
TEST_P(GemmKernelTest, EdgeShapesAllTransposesExact) {
  std::mt19937 rng(42);
  // 250 x 37 and 200 x 70: tasks with more than 16 micro-panels, where an untransposed B is packed.
  const int64_t sizes[][3] = {{1, 1, 1},     {37, 53, 71}, {12, 32, 16},  {13, 33, 17},  {11, 31, 1},
                              {24, 64, 385}, {25, 17, 2},  {5, 65, 800},  {2, 96, 3},    {97, 7, 129},
                              {36, 48, 384}, {1, 100, 9},  {250, 37, 45}, {200, 70, 40}, {64, 16, 8}};
  for (const auto& s : sizes) {
    for (int t = 0; t < 4; ++t) {
      Case c;
      c.m = s[0];
      c.n = s[1];
      c.k = s[2];
      c.trans_a = (t & 1) != 0;
      c.trans_b = (t & 2) != 0;
      check_case(GetParam(), c, rng);
    }
  }
}

// Random shapes, transposes, padding and alpha / beta; integer data, so exact.
TEST_P(GemmKernelTest, RandomShapesExact) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> dim(1, 90), pad(0, 5);
  const float alphas[] = {1.0f, -2.0f, 0.5f, 4.0f}, betas[] = {0.0f, 1.0f, -0.5f, 2.0f};
  for (int iter = 0; iter < 48; ++iter) {
    Case c;
    c.m = dim(rng);
    c.n = dim(rng);
    c.k = iter % 8 == 0 ? dim(rng) * 5 : dim(rng);
    c.trans_a = (iter & 1) != 0;
    c.trans_b = (iter & 2) != 0;
    c.pad = pad(rng);
    c.alpha = alphas[(iter / 4) % 4];
    c.beta = betas[(iter / 16) % 4 == 0 ? 0 : (iter / 3) % 4];
    check_case(GetParam(), c, rng);
  }
}

// Real-valued data with general alpha / beta, checked against the rigorous float error bound.
TEST_P(GemmKernelTest, RealValuedAlphaBeta) {
  std::mt19937 rng(99);
  const int64_t sizes[][3] = {{37, 53, 71}, {64, 100, 500}, {13, 200, 31}, {129, 33, 770}, {260, 90, 400}};
  for (const auto& s : sizes) {
    for (int t = 0; t < 4; ++t) {
      Case c;
      c.m = s[0];
      c.n = s[1];
      c.k = s[2];
      c.trans_a = (t & 1) != 0;
      c.trans_b = (t & 2) != 0;
      c.pad = 3;
      c.integers = false;
      c.alpha = 0.7f;
      c.beta = t == 3 ? 0.0f : -1.3f;
      check_case(GetParam(), c, rng);
    }
  }
}

// beta == 0 must not read C: NaN in C may not leak into the result.
TEST_P(GemmKernelTest, BetaZeroIgnoresNanInC) {
  std::mt19937 rng(5);
  for (int t = 0; t < 4; ++t) {
    Case c;
    c.m = 29;
    c.n = 45;
    c.k = t == 3 ? 400 : 19;  // 400: two k blocks, so the second block reads the first block's C
    c.trans_a = (t & 1) != 0;
    c.trans_b = (t & 2) != 0;
    c.pad = 2;
    c.nan_c = true;
    c.alpha = t == 2 ? -0.5f : 1.0f;
    check_case(GetParam(), c, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(AllKernels, GemmKernelTest,
                         ::testing::Values(GemmKernel::kGeneric, GemmKernel::kAvx2, GemmKernel::kAvx512),
                         [](const ::testing::TestParamInfo<GemmKernel>& param_info) {
                           return std::string(fresco::cpu::gemm_kernel_name(param_info.param));
                         });

// The hot shapes: MLP 784-1024-512-256-10 at batch 128 (forward, dX, dW), with the kernel sgemm picks.
const Case kMlpShapes[] = {
    {false, true, 128, 1024, 784}, {false, true, 128, 512, 1024},  {false, true, 128, 256, 512},
    {false, true, 128, 10, 256},   {false, false, 128, 1024, 512}, {false, false, 128, 512, 256},
    {false, false, 128, 256, 10},  {true, false, 1024, 784, 128},  {true, false, 512, 1024, 128},
    {true, false, 256, 512, 128},  {true, false, 10, 256, 128}};

TEST(Gemm, MlpShapesMatchReference) {
  std::mt19937 rng(2024);
  for (Case c : kMlpShapes) {
    c.integers = false;
    check_case(supported_kernels().back(), c, rng);
  }
}

TEST(Gemm, SgemmUsesTheBestKernel) {
  const std::string name = fresco::cpu::gemm_kernel_name();
  EXPECT_EQ(name, fresco::cpu::gemm_kernel_name(supported_kernels().back()));
  EXPECT_TRUE(name == "avx512" || name == "avx2" || name == "generic") << name;
}

// Same bits whatever the number of threads: 1, 2 and 3 (more than the cores) workers.
TEST(Gemm, BitwiseIdenticalAcrossThreadCounts) {
  std::mt19937 rng(11);
  std::vector<Case> cases(std::begin(kMlpShapes), std::end(kMlpShapes));
  cases.push_back({false, false, 300, 500, 900, 1, 0.7f, -1.1f, false});
  cases.push_back({true, true, 200, 333, 1000, 0, 1.0f, 0.0f, false});
  for (Case c : cases) {
    c.integers = false;
    SCOPED_TRACE(describe(c));
    Operands o = make_operands(c, rng);
    const std::vector<float> c0 = o.c.to_vector();
    Workspace ws = workspace_for(o.args, 3);
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2, 3}) {
      std::copy(c0.begin(), c0.end(), o.c.data());
      tbb::task_arena arena(threads);
      arena.execute([&] { fresco::cpu::sgemm(o.args, ws.get(), ws.bytes); });
      results.push_back(o.c.to_vector());
    }
    for (size_t r = 1; r < results.size(); ++r) {
      EXPECT_EQ(0, std::memcmp(results[0].data(), results[r].data(), results[0].size() * sizeof(float)))
          << "threads " << r + 1 << " differ from 1 thread";
    }
  }
}

// Packing goes to the workspace: no operator new inside sgemm (after TBB has warmed up its arena).
TEST(Gemm, SgemmDoesNotAllocate) {
  std::mt19937 rng(3);
  for (Case c : {kMlpShapes[0], kMlpShapes[4], kMlpShapes[7], kMlpShapes[3]}) {
    SCOPED_TRACE(describe(c));
    c.integers = false;
    Operands o = make_operands(c, rng);
    Workspace ws = workspace_for(o.args, 2);
    tbb::task_arena arena(2);
    arena.execute([&] {
      fresco::cpu::sgemm(o.args, ws.get(), ws.bytes);
      const int64_t before = g_allocations.load();
      fresco::cpu::sgemm(o.args, ws.get(), ws.bytes);
      EXPECT_EQ(g_allocations.load(), before);
    });
  }
}

TEST(Gemm, KZeroScalesC) {
  for (float beta : {0.0f, 2.0f}) {
    std::vector<float> c = {1.0f, std::nanf(""), 3.0f, 4.0f};
    if (beta != 0.0f) c[1] = 2.0f;
    GemmArgs g;
    g.m = 2;
    g.n = 2;
    g.k = 0;
    g.beta = beta;
    g.c = c.data();
    g.ldc = 2;
    fresco::cpu::sgemm(g, nullptr, 0);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(c[static_cast<size_t>(i)], beta * static_cast<float>(i + 1));
  }
}

TEST(Gemm, AlphaZeroDoesNotReadAOrB) {
  std::vector<float> a(6, std::nanf("")), b(6, std::nanf("")), c = {1, 2, 3, 4};
  GemmArgs g{false, false, 2, 2, 3, 0.0f, a.data(), 3, b.data(), 2, 0.5f, c.data(), 2};
  Workspace ws = workspace_for(g);
  fresco::cpu::sgemm(g, ws.get(), ws.bytes);
  EXPECT_EQ(c, (std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f}));
}

TEST(Gemm, EmptyOutputIsANoOp) {
  std::vector<float> b(35, 1.0f);
  GemmArgs g;
  g.m = 0;
  g.n = 5;
  g.k = 7;
  g.b = b.data();
  g.ldb = 5;
  EXPECT_EQ(fresco::cpu::gemm_workspace_bytes(0, 5, 7, 4), 0u);
  EXPECT_NO_THROW(fresco::cpu::sgemm(g, nullptr, 0));
}

TEST(Gemm, WorkspaceSizeDependsOnlyOnShapeAndThreads) {
  const uint64_t one = fresco::cpu::gemm_workspace_bytes(128, 1024, 784, 1);
  EXPECT_GT(one, 0u);
  EXPECT_EQ(fresco::cpu::gemm_workspace_bytes(128, 1024, 784, 2), 2 * one);
  EXPECT_EQ(fresco::cpu::gemm_workspace_bytes(128, 1024, 784, 1), one);
}

// Runs sgemm on a valid 8 x 9 x 10 product after `mutate`, expecting std::invalid_argument mentioning
// `needle`.
template <class Mutate>
void expect_invalid(Mutate mutate, const std::string& needle) {
  std::vector<float> a(80, 1.0f), b(90, 1.0f), c(72, 0.0f);
  GemmArgs g{false, false, 8, 9, 10, 1.0f, a.data(), 10, b.data(), 9, 0.0f, c.data(), 9};
  Workspace ws = workspace_for(g);
  void* w = ws.get();
  uint64_t bytes = ws.bytes;
  mutate(g, w, bytes);
  try {
    fresco::cpu::sgemm(g, w, bytes);
    ADD_FAILURE() << "no exception; expected one mentioning '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Gemm, RejectsInconsistentArguments) {
  expect_invalid([](GemmArgs& g, void*&, uint64_t&) { g.a = nullptr; }, "A is null");
  expect_invalid([](GemmArgs& g, void*&, uint64_t&) { g.b = nullptr; }, "B is null");
  expect_invalid([](GemmArgs& g, void*&, uint64_t&) { g.c = nullptr; }, "C is null");
  expect_invalid([](GemmArgs& g, void*&, uint64_t&) { g.lda = 9; }, "lda");
  expect_invalid([](GemmArgs& g, void*&, uint64_t&) { g.ldb = 8; }, "ldb");
  expect_invalid([](GemmArgs& g, void*&, uint64_t&) { g.ldc = 8; }, "ldc");
  expect_invalid([](GemmArgs& g, void*&, uint64_t&) { g.k = -1; }, "negative");
  // Transposed: A is stored k x m = 10 x 8, so lda >= 8 is enough and lda = 7 is not.
  expect_invalid(
      [](GemmArgs& g, void*&, uint64_t&) {
        g.trans_a = true;
        g.lda = 7;
      },
      "lda");
  expect_invalid(
      [](GemmArgs& g, void*&, uint64_t&) {
        g.trans_b = true;
        g.ldb = 9;
      },
      "ldb");
}

TEST(Gemm, RejectsTooSmallOrMisalignedWorkspace) {
  expect_invalid([](GemmArgs&, void*&, uint64_t& bytes) { bytes -= 1; }, "workspace has");
  expect_invalid([](GemmArgs&, void*&, uint64_t& bytes) { bytes = 0; }, "workspace has");
  expect_invalid([](GemmArgs&, void*& w, uint64_t&) { w = nullptr; }, "workspace is null");
  expect_invalid([](GemmArgs&, void*& w, uint64_t&) { w = static_cast<char*>(w) + 4; }, "aligned");
  // Sized for one thread but run in an arena of two.
  std::vector<float> a(80, 1.0f), b(90, 1.0f), c(72, 0.0f);
  GemmArgs g{false, false, 8, 9, 10, 1.0f, a.data(), 10, b.data(), 9, 0.0f, c.data(), 9};
  Workspace ws = workspace_for(g, 1);
  tbb::task_arena arena(2);
  arena.execute([&] { EXPECT_THROW(fresco::cpu::sgemm(g, ws.get(), ws.bytes), std::invalid_argument); });
}

TEST(Gemm, UnsupportedKernelIsRejected) {
  for (GemmKernel k : {GemmKernel::kAvx2, GemmKernel::kAvx512}) {
    if (fresco::cpu::gemm_kernel_supported(k)) continue;
    std::vector<float> c(1);
    GemmArgs g;
    g.m = g.n = 1;
    g.c = c.data();
    g.ldc = 1;
    EXPECT_THROW(fresco::cpu::sgemm_with_kernel(k, g, nullptr, 0), std::invalid_argument);
  }
}

}  // namespace
