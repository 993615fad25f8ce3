/* fresco plugin ABI, version 1.1: the only meeting point of the core and a backend or op library.
 * Invariants: plain C99, fixed-width integers, no bitfields, alignment <= 8; every struct starts with
 * struct_size and only grows at the end; a NULL function pointer means "not provided".
 * Ownership is stated on every pointer. Tested by tests/core/test_plugin_loader.cpp and fresco-plugin-check.
 */
#ifndef FRESCO_PLUGIN_H_
#define FRESCO_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define FR_EXPORT __declspec(dllexport)
#else
#define FR_EXPORT __attribute__((visibility("default")))
#endif

#define FR_ABI_MAJOR 1
/* 1.1: collective backends (FrCommApi, FrPlugin.comm) and FrCall.comm. */
#define FR_ABI_MINOR 1
/* The oldest minor a host of this major accepts from a plugin (and vice versa). */
#define FR_ABI_MINOR_MIN 0

/* ---- data types ------------------------------------------------------------------------------------------
 */
typedef enum FrDType { FR_F32 = 0, FR_F16 = 1, FR_BF16 = 2, FR_I32 = 3, FR_I8 = 4, FR_U8 = 5 } FrDType;
#define FR_DTYPE_BIT(t) (1u << (uint32_t)(t))

/* ---- errors: created by the side that fails (through FrHostApi.error_new), freed by the host
 * --------------- */
typedef enum FrErrorCode {
  FR_OK = 0,
  FR_ERR_INVALID_ARGUMENT = 1,
  FR_ERR_UNSUPPORTED = 2,
  FR_ERR_OUT_OF_MEMORY = 3,
  FR_ERR_DEVICE = 4,
  FR_ERR_INTERNAL = 5,
  FR_ERR_COMM = 6
} FrErrorCode;
typedef struct FrError FrError; /* opaque; NULL means success */

/* ---- what the host gives a plugin (borrowed; valid until the plugin is unloaded) --------------------------
 */
typedef enum FrLogLevel { FR_LOG_DEBUG = 0, FR_LOG_INFO = 1, FR_LOG_WARN = 2, FR_LOG_ERROR = 3 } FrLogLevel;
typedef struct FrHostApi {
  uint32_t struct_size;
  uint16_t abi_major, abi_minor;
  /* Creates an error object; message is copied. Ownership of the result passes to whoever returns it. */
  FrError* (*error_new)(int32_t code, const char* message);
  void (*log)(int32_t level, const char* plugin, const char* message);
  void* ext; /* reserved, NULL */
} FrHostApi;

/* ---- ABI info: frozen forever ----------------------------------------------------------------------------
 */
typedef struct FrAbiInfo {
  uint32_t struct_size;
  uint16_t abi_major, abi_minor;
  const char* name;    /* static string owned by the plugin */
  const char* version; /* static string owned by the plugin */
} FrAbiInfo;

/* ---- tensors and ranges as a kernel sees them (borrowed for the duration of a call) ----------------------
 */
typedef struct FrTensor {
  void* data;      /* device memory inside the host's arena; NULL during prepare() */
  uint32_t dtype;  /* FrDType */
  uint32_t ndim;   /* <= 4; logical NHWC */
  int64_t dims[4]; /* unused trailing dims are 1 */
} FrTensor;

typedef struct FrRange {
  void* data;     /* start of a contiguous region range; NULL during prepare() */
  uint64_t bytes; /* bytes covered, slot padding included */
  uint32_t dtype; /* FrDType of the elements */
  uint32_t pad_;
} FrRange;

typedef enum FrOpKind { FR_COMPUTE = 0, FR_RANGE = 1 } FrOpKind;

/* One graph node resolved against a memory plan. All pointers are borrowed for the call. */
typedef struct FrCall {
  uint32_t struct_size;
  uint32_t op; /* dense id assigned by the host at load time */
  const FrTensor* in;
  uint32_t n_in;
  uint32_t n_out;
  const FrTensor* out;
  const FrRange* rin;
  uint32_t n_rin;
  uint32_t n_rout;
  const FrRange* rout;
  const void* params; /* the op's POD params, layout in fresco/ops.h */
  uint32_t params_size;
  uint32_t pad_;
  void* stream;             /* from FrDeviceApi.stream_create; NULL on devices without streams */
  void* workspace;          /* workspace_bytes bytes owned by the host; NULL during prepare() */
  uint64_t workspace_bytes; /* as asked by prepare() */
  void* state;              /* from prepare(); NULL during prepare() */
  /* ABI 1.1 (present when struct_size covers it): this rank's communicator (FrCommApi.comm_create) for the
   * collective ops of ops.h; NULL when the job runs on one device. */
  void* comm;
} FrCall;

/* ---- kernel table
 * ------------------------------------------------------------------------------------------ */
/* FrKernelDef::flags: the kernel implements the per-channel sums operands of ops.h (conv2d's second output,
 * a training batchnorm's fourth / batchnorm_add's fifth input; the gradient sums of relu_backward,
 * add_relu_backward and batchnorm_backward). */
#define FR_KERNEL_SUMS_OPERANDS (1u << 0)
/* The batchnorm prologue forms of ops.h: conv2d's four prologue inputs (and its applied-map output), a
 * training batchnorm's statistics-only form (two outputs). */
#define FR_KERNEL_CONV_PROLOGUE (1u << 1)
/* The batchnorm gradient prologue of a weight gradient (ops.h): conv2d_backward's five prologue inputs on a
 * part that writes no dx, batchnorm_backward's weights-only form (two outputs). */
#define FR_KERNEL_WGRAD_BN_PROLOGUE (1u << 2)
/* The join epilogue of an input gradient (ops.h): conv2d_backward's three join inputs on a part that writes
 * dx. */
#define FR_KERNEL_CONV_JOIN_EPILOGUE (1u << 3)
/* The per-step momentum of ops.h: sgd_update's, lars_update's and adam_update's third range input, a table
 * of the momentum (Adam: beta1) of every step, as a schedule that cycles it (one-cycle) gives. */
#define FR_KERNEL_STEP_MOMENTUM (1u << 4)
/* The weight copy of ops.h: sgd_update's and adam_update's last range output, the 16-bit compute copy of the
 * weights they update (mixed precision's A region), written in the same pass. */
#define FR_KERNEL_WEIGHT_COPY (1u << 5)
/* The 16-bit gradients of ops.h: sgd_update's and adam_update's gradient input (rin[0]) f16 or bf16, unscaled
 * by the step's loss scale as it is read. */
#define FR_KERNEL_HALF_GRADS (1u << 6)
/* The compact gradient part of a strided 1x1 conv (ops.h): conv2d_backward's input gradient written at dy's
 * positions only, add_relu_backward's second part b at those positions (FrAddReluBackwardParams). */
#define FR_KERNEL_COMPACT_GRAD (1u << 7)
/* batchnorm_add's subsampled output (ops.h): a fourth output with y's values at its even rows and columns. */
#define FR_KERNEL_SUBSAMPLED_OUTPUT (1u << 8)
/* The join prologue of ops.h: conv2d's fifth prologue input, the residual join's other branch, added before
 * the relu (the batchnorm prologue forms, FR_KERNEL_CONV_PROLOGUE, with one more operand). */
#define FR_KERNEL_CONV_JOIN_PROLOGUE (1u << 9)
/* The backups of ops.h: sgd_update's and adam_update's trailing range outputs (params.backups), the f32
 * values they overwrite as they were before the step. */
#define FR_KERNEL_UPDATE_BACKUPS (1u << 10)

typedef struct FrKernelDef {
  uint32_t struct_size;
  uint32_t kind; /* FrOpKind */
  const char* op_name;
  const char* device;  /* "cpu", "cuda", ... */
  uint32_t dtype_mask; /* FR_DTYPE_BIT of every dtype the kernel accepts for its main tensors */
  /* FR_KERNEL_* bits: optional operand forms of ops.h the kernel implements. The runtime refuses a node that
   * uses a form its kernel does not declare (a clear error, never a silently ignored operand). Earlier
   * headers named this field pad_ and always passed 0, so older plugins declare none. */
  uint32_t flags;
  /* Called once per node before capture, with data pointers NULL. May set *state (owned by the plugin, freed
   * through destroy) and *workspace_bytes. May be NULL (no state, no workspace). */
  FrError* (*prepare)(void* device_ctx, const FrCall* call, void** state, uint64_t* workspace_bytes);
  /* Enqueues the work on call->stream (or runs it, on a synchronous device). Never allocates. */
  FrError* (*run)(void* device_ctx, const FrCall* call);
  void (*destroy)(void* device_ctx, void* state); /* may be NULL */
} FrKernelDef;

/* ---- device API (one per backend that owns memory) -------------------------------------------------------
 */
typedef struct FrDeviceApi {
  uint32_t struct_size;
  uint32_t pad_;
  const char* name; /* "cpu", "cuda": the device string kernels name */
  int32_t (*device_count)(void);
  FrError* (*context_create)(int32_t device_index, void** ctx); /* ctx owned by the plugin */
  void (*context_destroy)(void* ctx);
  /* One-time allocations, made at compile time only. The arena comes back zero-filled. */
  FrError* (*arena_alloc)(void* ctx, uint64_t bytes, void** ptr);
  void (*arena_free)(void* ctx, void* ptr);
  FrError* (*host_alloc)(void* ctx, uint64_t bytes, void** ptr); /* pinned where the device has it */
  void (*host_free)(void* ctx, void* ptr);
  FrError* (*stream_create)(void* ctx, void** stream); /* NULL stream is valid on synchronous devices */
  void (*stream_destroy)(void* ctx, void* stream);
  FrError* (*stream_sync)(void* ctx, void* stream);
  /* kind: 0 host->device, 1 device->host, 2 device->device. */
  FrError* (*memcpy_async)(void* ctx, void* dst, const void* src, uint64_t bytes, int32_t kind, void* stream);
  /* Optional native capture. When NULL the host replays the resolved call list itself. */
  FrError* (*capture_begin)(void* ctx, void* stream);
  FrError* (*capture_end)(void* ctx, void* stream, void** graph);
  FrError* (*graph_launch)(void* ctx, void* graph, void* stream);
  void (*graph_destroy)(void* ctx, void* graph);
  /* Optional events for cross-stream ordering and host waits; NULL on synchronous devices. Created at compile
   * time only (never inside a capture). */
  FrError* (*event_create)(void* ctx, void** event);
  void (*event_destroy)(void* ctx, void* event);
  FrError* (*event_record)(void* ctx, void* event, void* stream);
  FrError* (*stream_wait_event)(void* ctx, void* stream, void* event);
  FrError* (*event_sync)(void* ctx, void* event);
  /* Optional: bytes of device memory in use by this context's allocations (arena, workspaces, library state).
   */
  uint64_t (*memory_in_use)(void* ctx);
  void* ext; /* reserved, NULL */
} FrDeviceApi;

/* ---- collective backends (ABI 1.1; DESIGN §10) -----------------------------------------------------------
 * Data parallelism: the ranks of one job are host threads of one process, each with its own device context
 * and arena. A collective backend groups them; its kernels (collective ops of ops.h, in the kernel table
 * under its device's name) read the rank's communicator from FrCall.comm. */
typedef struct FrCommApi {
  uint32_t struct_size;
  uint32_t pad_;
  const char* name;   /* "threads", "nccl" (static string) */
  const char* device; /* FrDeviceApi.name of the device whose memory and streams its collectives use */
  /* A group of `world` ranks; *group owned by the plugin until group_destroy, which comes after every
   * rank's comm_destroy. */
  FrError* (*group_create)(int32_t world, void** group);
  void (*group_destroy)(void* group);
  /* Rank `rank`'s communicator on its device context (device_ctx from FrDeviceApi.context_create for
   * device_index), called on that rank's thread; it may wait until every rank has called it. */
  FrError* (*comm_create)(void* group, int32_t rank, void* device_ctx, int32_t device_index, void** comm);
  void (*comm_destroy)(void* comm);
  /* Any thread: every collective of the group waiting now or called later fails (FR_ERR_COMM) instead of
   * waiting for a rank that stopped, and so does a comm_create waiting for the others. */
  void (*group_abort)(void* group);
  void* ext; /* reserved, NULL */
} FrCommApi;

/* ---- op schemas: custom ops an op library adds (usable in a BluePrint by name)
 * ----------------------------- */
/* An op with n_in inputs and n_out outputs, optionally with POD params. For a layer op (1 in, 1 out) the
 * backward op takes in {dy, x, y} (gradient w.r.t. the output, the input, the output) and writes out {dx}. */
typedef struct FrOpSchema {
  uint32_t struct_size;
  uint32_t params_size; /* 0: no params */
  uint32_t n_in, n_out; /* forward arity (tensors); layers in a BluePrint take 1 and 1 in ABI 1.0 */
  const char* name;     /* forward op; kernels for it are in the kernel table (static string) */
  const char* backward; /* backward op name (static string), or NULL when gradients do not flow through */
  /* Per-sample output shape (dims[4], NHWC with N = 1) from the input's; NULL = same shape (element-wise). */
  FrError* (*infer_shape)(const int64_t in_dims[4], int64_t out_dims[4], const void* params);
  void* ext; /* reserved, NULL */
} FrOpSchema;

/* ---- what a plugin hands back from init (the tables are static, owned by the plugin) --------------------
 */
typedef struct FrPlugin {
  uint32_t struct_size;
  uint32_t n_kernels;
  const FrDeviceApi* device; /* NULL for op-only libraries */
  const void* comm;          /* ABI 1.1: a const FrCommApi* (static), or NULL; 1.0 plugins pass NULL */
  const FrKernelDef* kernels;
  const FrOpSchema* schemas; /* op libraries: the ops they add (static, owned by the plugin); else NULL */
  uint32_t n_schemas;
  uint32_t pad_;
  void* ext; /* reserved, NULL */
} FrPlugin;

/* The two exported symbols. The loader calls fresco_plugin_abi() before any other plugin code. */
typedef FrAbiInfo (*FrPluginAbiFn)(void);
typedef FrError* (*FrPluginInitFn)(const FrHostApi* host, FrPlugin* out);
#define FR_PLUGIN_ABI_SYMBOL "fresco_plugin_abi"
#define FR_PLUGIN_INIT_SYMBOL "fresco_plugin_init"

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FRESCO_PLUGIN_H_ */
