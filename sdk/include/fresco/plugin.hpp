// Header-only C++ helpers for plugin authors: error objects, noexcept trampolines, typed access to calls.
// Invariants: nothing here throws across the ABI (every entry point goes through fresco::sdk::guard); no
// allocation on the run path except when building an error. Used by plugins/cpu and sdk/examples.
#ifndef FRESCO_PLUGIN_HPP_
#define FRESCO_PLUGIN_HPP_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <type_traits>

#include "fresco/ops.h"
#include "fresco/plugin.h"

namespace fresco::sdk {

// The host table of the loaded plugin; set once by init (under the loader's lock).
inline const FrHostApi*& host() {
  static const FrHostApi* h = nullptr;
  return h;
}

// Thrown inside a plugin, turned into an FrError* at the ABI boundary by guard().
struct KernelError : std::exception {
  int32_t code;
  std::string message;
  KernelError(int32_t c, std::string m) : code(c), message(std::move(m)) {}
  const char* what() const noexcept override { return message.c_str(); }
};

inline FrError* make_error(int32_t code, const std::string& message) {
  if (host() && host()->error_new) return host()->error_new(code, message.c_str());
  std::fprintf(stderr, "fresco plugin error (no host to report to): %s\n", message.c_str());
  return nullptr;
}

// Runs f() and converts any exception into an error object. Use it in every exported or table function.
template <class F>
FrError* guard(F&& f) noexcept {
  try {
    f();
    return nullptr;
  } catch (const KernelError& e) {
    return make_error(e.code, e.message);
  } catch (const std::bad_alloc&) {
    return make_error(FR_ERR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return make_error(FR_ERR_INTERNAL, e.what());
  } catch (...) {
    return make_error(FR_ERR_INTERNAL, "unknown exception in plugin");
  }
}

#define FR_SDK_STR2(x) #x
#define FR_SDK_STR(x) FR_SDK_STR2(x)
// Check inside a plugin: throws KernelError carrying file:line; guard() returns it as an FrError.
#define FR_PLUGIN_CHECK(cond, code, msg)                                                                \
  do {                                                                                                  \
    if (!(cond))                                                                                        \
      throw ::fresco::sdk::KernelError(                                                                 \
          (code), std::string(__FILE__ ":" FR_SDK_STR(__LINE__) ": ") + (msg) + " [check: " #cond "]"); \
  } while (0)

inline int64_t numel(const FrTensor& t) {
  int64_t n = 1;
  for (uint32_t i = 0; i < t.ndim && i < 4; ++i) n *= t.dims[i];
  return n;
}
// Rows = first dim, cols = product of the others (an NHWC map seen as a matrix).
inline int64_t rows(const FrTensor& t) {
  return t.ndim ? t.dims[0] : 1;
}
inline int64_t cols(const FrTensor& t) {
  return rows(t) ? numel(t) / rows(t) : 0;
}

// A tensor's storage as T*. Read as float or int32_t, the tensor must hold f32 or i32 (a kernel is chosen by
// its first output's dtype, so an input of another dtype would otherwise be read past its end); other T
// (16-bit and byte views, void) are not checked.
template <class T>
T* data(const FrTensor& t) {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>)
    FR_PLUGIN_CHECK(t.dtype == FR_F32, FR_ERR_INVALID_ARGUMENT,
                    "an operand read as f32 has dtype " + std::to_string(t.dtype));
  else if constexpr (std::is_same_v<U, int32_t>)
    FR_PLUGIN_CHECK(t.dtype == FR_I32, FR_ERR_INVALID_ARGUMENT,
                    "an operand read as i32 has dtype " + std::to_string(t.dtype));
  return static_cast<T*>(t.data);
}
template <class T>
T* data(const FrRange& r) {
  return static_cast<T*>(r.data);
}
template <class T>
uint64_t count(const FrRange& r) {
  return r.bytes / sizeof(T);
}

template <class P>
const P& params(const FrCall* c) {
  FR_PLUGIN_CHECK(
      c->params && c->params_size == sizeof(P), FR_ERR_INVALID_ARGUMENT,
      "params size " + std::to_string(c->params_size) + " != expected " + std::to_string(sizeof(P)));
  return *static_cast<const P*>(c->params);
}

inline void expect_arity(const FrCall* c, uint32_t n_in, uint32_t n_out, uint32_t n_rin, uint32_t n_rout,
                         const char* op) {
  FR_PLUGIN_CHECK(c->n_in >= n_in && c->n_out >= n_out && c->n_rin >= n_rin && c->n_rout >= n_rout,
                  FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": expected at least " + std::to_string(n_in) + " in/" +
                      std::to_string(n_out) + " out/" + std::to_string(n_rin) + " range-in/" +
                      std::to_string(n_rout) + " range-out, got " + std::to_string(c->n_in) + "/" +
                      std::to_string(c->n_out) + "/" + std::to_string(c->n_rin) + "/" +
                      std::to_string(c->n_rout));
}

// A collective op's operands (ops.h allreduce_mean): its one f32 range (rout[0]) and this rank's
// communicator (FrCall::comm, ABI 1.1), checked.
struct CollectiveRange {
  const FrRange& x;
  void* comm;
};
inline CollectiveRange collective_f32_range(const FrCall* c, const char* op) {
  expect_arity(c, 0, 0, 0, 1, op);
  FR_PLUGIN_CHECK(c->struct_size >= offsetof(FrCall, comm) + sizeof(void*) && c->comm,
                  FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": no communicator (the job runs on one device)");
  const FrRange& x = c->rout[0];
  FR_PLUGIN_CHECK(x.dtype == FR_F32 && x.bytes % sizeof(float) == 0, FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": needs an f32 range");
  return {x, c->comm};
}

// A map [.., C] seen as [rows, C] (channels last), checked: 1 to 4 dims and C >= 1; `op` names the op.
struct ChannelRows {
  int64_t rows, c;
};
inline ChannelRows channel_rows(const FrTensor& x, const char* op) {
  FR_PLUGIN_CHECK(x.ndim >= 1 && x.ndim <= 4, FR_ERR_INVALID_ARGUMENT, std::string(op) + ": bad ndim");
  const int64_t c = x.dims[x.ndim - 1];
  FR_PLUGIN_CHECK(c >= 1, FR_ERR_INVALID_ARGUMENT, std::string(op) + ": no channels");
  return {numel(x) / c, c};
}

// What a plugin hands the host through FrPlugin (every field past its size; absent ones NULL / 0).
struct PluginContents {
  const FrDeviceApi* device = nullptr;  // NULL for op-only libraries and collective backends
  const FrCommApi* comm = nullptr;      // ABI 1.1: a collective backend
  const FrKernelDef* kernels = nullptr;
  uint32_t n_kernels = 0;
  const FrOpSchema* schemas = nullptr;  // op libraries: the ops they add
  uint32_t n_schemas = 0;
};

// The body of fresco_plugin_init: keeps the host table for make_error, checks that the host speaks this
// header's ABI major (and at least minor `min_minor`) and that `out` is large enough, then fills it.
// `name` starts the error messages.
inline FrError* init_plugin(const FrHostApi* host, FrPlugin* out, const char* name, const PluginContents& c,
                            uint32_t min_minor = 0) {
  if (!host) return nullptr;  // nothing to report to (the loader always passes its table)
  if (host->struct_size < sizeof(FrHostApi) || !out)
    return host->error_new
               ? host->error_new(FR_ERR_INVALID_ARGUMENT, (std::string(name) + ": bad host table").c_str())
               : nullptr;
  sdk::host() = host;
  return guard([&] {
    FR_PLUGIN_CHECK(host->abi_major == FR_ABI_MAJOR && host->abi_minor >= min_minor, FR_ERR_UNSUPPORTED,
                    std::string(name) + " plugin: needs a host of ABI " + std::to_string(FR_ABI_MAJOR) + "." +
                        std::to_string(min_minor) + " or a later minor, found " +
                        std::to_string(host->abi_major) + "." + std::to_string(host->abi_minor));
    FR_PLUGIN_CHECK(out->struct_size >= sizeof(FrPlugin), FR_ERR_INVALID_ARGUMENT,
                    std::string(name) + " plugin: FrPlugin too small");
    out->device = c.device;
    out->comm = c.comm;
    out->kernels = c.kernels;
    out->n_kernels = c.n_kernels;
    out->schemas = c.schemas;
    out->n_schemas = c.n_schemas;
    out->ext = nullptr;
  });
}

// Bytes per element of a float dtype (f32 4, f16 and bf16 2); an error naming `op` for any other dtype.
inline uint64_t float_bytes(uint32_t dtype, const char* op) {
  FR_PLUGIN_CHECK(dtype == FR_F32 || dtype == FR_F16 || dtype == FR_BF16, FR_ERR_UNSUPPORTED,
                  std::string(op) + ": dtype " + std::to_string(dtype) + " is not f32, f16 or bf16");
  return dtype == FR_F32 ? 4 : 2;
}

// Element count of a cast_range: source and destination must hold the same number of elements.
inline int64_t cast_elements(const FrRange& src, const FrRange& dst, const char* op) {
  const uint64_t sb = float_bytes(src.dtype, op), db = float_bytes(dst.dtype, op);
  FR_PLUGIN_CHECK(src.bytes % sb == 0 && dst.bytes % db == 0 && src.bytes / sb == dst.bytes / db,
                  FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": source (" + std::to_string(src.bytes) + " bytes) and destination (" +
                      std::to_string(dst.bytes) + " bytes) hold different element counts");
  return static_cast<int64_t>(dst.bytes / db);
}

// An optimizer update's gradient input rin[0]: f32, or f16 / bf16 (ops.h, FR_KERNEL_HALF_GRADS), checked to
// hold `n` elements (w's count).
inline const FrRange& update_grads(const FrCall* call, uint64_t n, const char* op) {
  const FrRange& g = call->rin[0];
  const uint64_t b = float_bytes(g.dtype, op);
  FR_PLUGIN_CHECK(g.bytes == b * n, FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": the gradients (" + std::to_string(g.bytes) +
                      " bytes) do not hold one " + std::to_string(b) + "-byte value per weight (" +
                      std::to_string(n) + ")");
  return g;
}

// The optional weight copy of an optimizer update (ops.h, FR_KERNEL_WEIGHT_COPY): the call's last range
// output before `tail` trailing ones (its backups, update_backups) when there are more than `fixed` and it is
// f16 or bf16 (an f32 one past `fixed`, such as a momentum buffer passed to an update without momentum, is
// not a copy), checked to hold `n` elements (w's count); NULL when the call has none.
inline const FrRange* weight_copy(const FrCall* call, uint32_t fixed, uint64_t n, const char* op,
                                  uint32_t tail = 0) {
  if (call->n_rout <= fixed + tail) return nullptr;
  const FrRange& c = call->rout[call->n_rout - 1 - tail];
  if (c.dtype != FR_F16 && c.dtype != FR_BF16) return nullptr;
  FR_PLUGIN_CHECK(c.bytes == 2 * n, FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": the weight copy (" + std::to_string(c.bytes) +
                      " bytes) does not hold one 16-bit value per weight (" + std::to_string(n) + ")");
  return &c;
}

// The backups of an optimizer update (ops.h, FR_KERNEL_UPDATE_BACKUPS): with `backups` 1 (its params) the
// call's last `count` range outputs, the i-th with rout[i]'s bytes, into out[0 .. count - 1]; with 0 none
// (out null). Returns how many trailing outputs they take (weight_copy's `tail`).
inline uint32_t update_backups(const FrCall* call, int32_t backups, uint32_t count, void** out,
                               const char* op) {
  FR_PLUGIN_CHECK(backups == 0 || backups == 1, FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": params.backups must be 0 or 1, got " + std::to_string(backups));
  for (uint32_t i = 0; i < count; ++i) out[i] = nullptr;
  if (!backups) return 0;
  FR_PLUGIN_CHECK(call->n_rout == 2 * count || call->n_rout == 2 * count + 1, FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": with backups the " + std::to_string(count) +
                      " f32 range outputs it writes take as many backups after them (and at most a weight "
                      "copy between), got " +
                      std::to_string(call->n_rout) + " range outputs");
  for (uint32_t i = 0; i < count; ++i) {
    const FrRange& b = call->rout[call->n_rout - count + i];
    FR_PLUGIN_CHECK(b.bytes == call->rout[i].bytes, FR_ERR_INVALID_ARGUMENT,
                    std::string(op) + ": backup " + std::to_string(i) + " has " + std::to_string(b.bytes) +
                        " bytes, the range it keeps " + std::to_string(call->rout[i].bytes));
    out[i] = b.data;
  }
  return count;
}

// The step scalars (S region) a range holds, checked for size.
inline FrStepScalars* step_scalars(const FrRange& r, const char* op) {
  FR_PLUGIN_CHECK(r.bytes >= sizeof(FrStepScalars), FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": step scalars range too small");
  return static_cast<FrStepScalars*>(r.data);
}

// check_grads' operands (ops.h): the gradients rin[0] (f32, f16 or bf16, a whole number of elements; their
// count in *n) and the step scalars rout[0], checked.
inline FrStepScalars* check_grads_operands(const FrCall* call, int64_t* n) {
  expect_arity(call, 0, 0, 1, 1, "check_grads");
  const FrRange& g = call->rin[0];
  const uint64_t b = float_bytes(g.dtype, "check_grads");
  FR_PLUGIN_CHECK(g.bytes % b == 0, FR_ERR_INVALID_ARGUMENT,
                  "check_grads: the gradients' bytes are not a whole number of elements");
  *n = static_cast<int64_t>(g.bytes / b);
  return step_scalars(call->rout[0], "check_grads");
}

// restore_if_skipped's operands (ops.h): each group's destinations and sources of equal bytes, its weight
// copy (f16 or bf16) holding one value per f32 value of the group's first destination; returns the step
// scalars (the last range input) and the group count in *groups.
inline FrStepScalars* restore_operands(const FrCall* call, const FrRestoreParams& p, int64_t* groups) {
  const char* op = "restore_if_skipped";
  FR_PLUGIN_CHECK(p.per_group >= 1 && (p.weight_copy == 0 || p.weight_copy == 1), FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": per_group must be >= 1 and weight_copy 0 or 1");
  const uint32_t out_group = static_cast<uint32_t>(p.per_group + p.weight_copy);
  FR_PLUGIN_CHECK(call->n_in == 0 && call->n_out == 0 && call->n_rin >= 2 &&
                      (call->n_rin - 1) % static_cast<uint32_t>(p.per_group) == 0,
                  FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": expects groups of " + std::to_string(p.per_group) +
                      " range inputs and the step scalars, and no tensors");
  const uint32_t g = (call->n_rin - 1) / static_cast<uint32_t>(p.per_group);
  FR_PLUGIN_CHECK(call->n_rout == g * out_group, FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": " + std::to_string(g) + " groups need " +
                      std::to_string(g * out_group) + " range outputs, got " + std::to_string(call->n_rout));
  for (uint32_t k = 0; k < g; ++k) {
    for (int32_t i = 0; i < p.per_group; ++i) {
      const FrRange& src = call->rin[k * static_cast<uint32_t>(p.per_group) + static_cast<uint32_t>(i)];
      const FrRange& dst = call->rout[k * out_group + static_cast<uint32_t>(i)];
      FR_PLUGIN_CHECK(src.bytes == dst.bytes, FR_ERR_INVALID_ARGUMENT,
                      std::string(op) + ": group " + std::to_string(k) + "'s source " + std::to_string(i) +
                          " has " + std::to_string(src.bytes) + " bytes, its destination " +
                          std::to_string(dst.bytes));
    }
    if (p.weight_copy) {
      const FrRange& w = call->rout[k * out_group];
      const FrRange& c = call->rout[k * out_group + static_cast<uint32_t>(p.per_group)];
      FR_PLUGIN_CHECK(w.dtype == FR_F32 && (c.dtype == FR_F16 || c.dtype == FR_BF16) && w.bytes % 4 == 0 &&
                          c.bytes * 2 == w.bytes,
                      FR_ERR_INVALID_ARGUMENT,
                      std::string(op) + ": group " + std::to_string(k) +
                          "'s weight copy must be f16 or bf16 with one value per f32 weight");
    }
  }
  *groups = static_cast<int64_t>(g);
  return step_scalars(call->rin[call->n_rin - 1], op);
}

// The lr table of a schedule-evaluating op: rin[0] for a table schedule (checked for size), else nullptr.
inline const float* schedule_table(const FrCall* c, const FrScheduleParams& p, const char* op) {
  if (p.kind != FR_SCHED_TABLE || p.table_len <= 0) return nullptr;  // an empty table means base_lr
  FR_PLUGIN_CHECK(c->n_rin >= 1 && p.table_len > 0 &&
                      c->rin[0].bytes >= static_cast<uint64_t>(p.table_len) * sizeof(float),
                  FR_ERR_INVALID_ARGUMENT, std::string(op) + ": table range too small");
  return static_cast<const float*>(c->rin[0].data);
}

}  // namespace fresco::sdk

#endif  // FRESCO_PLUGIN_HPP_
