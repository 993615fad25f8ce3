// Runtime: arena, staging, streams, kernel resolution, prepare, capture and launch.
#include "fresco/core/runtime.h"

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>
#include "fresco/core/error.h"
#include "fresco/core/log.h"
#include "fresco/core/plugin_loader.h"
#include "fresco/ops.h"

namespace fresco {

namespace {
FrTensor tensor_view(const DTensor& t, uint8_t* base) {
  FrTensor f{};
  f.data = base ? base + t.offset : nullptr;
  f.dtype = static_cast<uint32_t>(t.dtype);
  f.ndim = 4;
  f.dims[0] = t.shape.n;
  f.dims[1] = t.shape.h;
  f.dims[2] = t.shape.w;
  f.dims[3] = t.shape.c;
  return f;
}
}  // namespace

Runtime::Runtime(const std::string& device, int device_index) : device_(device) {
  auto& reg = PluginRegistry::instance();
  api_ = reg.device(device);
  if (!api_) {
    std::string have;
    for (const auto& d : reg.devices()) have += (have.empty() ? "" : ", ") + d;
    std::string refused;
    for (const auto& r : reg.refused()) refused += "\n  refused " + r.path + ": " + r.reason;
    throw Error(ErrorCode::kBadConfig, "no plugin provides device '" + device + "' (loaded devices: " +
                                           (have.empty() ? "none" : have) + ")" + refused);
  }
  const int32_t count = api_->device_count ? api_->device_count() : 1;
  FRESCO_CHECK(count > 0, ErrorCode::kBadConfig,
               "device '" + device + "': its plugin is loaded but finds no " + device +
                   " device on this machine (0 found); use device cpu, or auto to take the best one present");
  FRESCO_CHECK(device_index >= 0 && device_index < count, ErrorCode::kBadConfig,
               "device '" + device + "' index " + std::to_string(device_index) + " not present (" +
                   std::to_string(count) + " found: indices 0 to " + std::to_string(count - 1) + ")");
  throw_if_error(api_->context_create(device_index, &ctx_), "creating a '" + device + "' context");
  try {  // a failure from here on releases what was created (the destructor does not run)
    for (int s = 0; s < kStreamCount; ++s)
      if (api_->stream_create) throw_if_error(api_->stream_create(ctx_, &streams_[s]), "creating a stream");
    for (int s = 0; s < kStreamCount; ++s) chain_events_[s] = create_event();
    fork_event_ = create_event();
    join_event_ = create_event();
    for (int& e : lag_events_) e = create_event();
  } catch (...) {
    release();
    throw;
  }
}

namespace {
// Whether a conv2d_backward node's part writes dx.
bool writes_input_gradient(const GraphNode& n) {
  const auto p = n.params_as<FrConvBackwardParams>();
  return p && (p->part == 1 || (p->part == 0 && p->need_dx));
}

// Whether a node uses the batchnorm prologue forms of ops.h (CompileOptions::conv_prologue: conv2d's
// prologue, conv2d_backward's gradient epilogue, the statistics-only batchnorm), which its kernel must
// declare (FR_KERNEL_CONV_PROLOGUE).
bool uses_prologue_operands(const GraphNode& n) {
  if (n.op == FR_OP_CONV2D_BACKWARD) return n.in.size() == 8 && writes_input_gradient(n);
  if (n.op == FR_OP_CONV2D) {
    const auto p = n.params_as<FrConvParams>();
    return p && n.in.size() > (p->has_bias ? 3u : 2u);
  }
  const auto p = n.params_as<FrBatchNormParams>();
  return n.op == FR_OP_BATCHNORM && p && p->training && n.out.size() == 2;
}

// Whether a node uses the join prologue of ops.h (CompileOptions::join_prologue: conv2d's fifth prologue
// input), which its kernel must declare (FR_KERNEL_CONV_JOIN_PROLOGUE).
bool uses_join_prologue(const GraphNode& n) {
  const auto p = n.params_as<FrConvParams>();
  return n.op == FR_OP_CONV2D && p && n.in.size() == (p->has_bias ? 3u : 2u) + 5u;
}

// Whether a node uses the batchnorm gradient prologue of a weight gradient (ops.h: conv2d_backward's five
// prologue inputs on a part without dx, batchnorm_backward's weights-only form), which its kernel must
// declare (FR_KERNEL_WGRAD_BN_PROLOGUE).
bool uses_wgrad_bn_prologue(const GraphNode& n) {
  if (n.op == FR_OP_CONV2D_BACKWARD) return n.in.size() > 3 && !writes_input_gradient(n);
  return n.op == FR_OP_BATCHNORM_BACKWARD && n.out.size() == 2;
}

// Whether a node uses the join epilogue of an input gradient (ops.h: conv2d_backward's three join inputs),
// which its kernel must declare (FR_KERNEL_CONV_JOIN_EPILOGUE).
bool uses_join_epilogue(const GraphNode& n) {
  return n.op == FR_OP_CONV2D_BACKWARD && n.in.size() == 6 && writes_input_gradient(n);
}

// Whether a node uses the compact gradient part of ops.h (CompileOptions::compact_shortcut_grads: an input
// gradient smaller than the conv's input, add_relu_backward's strides), which its kernel must declare
// (FR_KERNEL_COMPACT_GRAD).
bool uses_compact_grad(const GraphNode& n, const MemoryPlan& plan) {
  if (n.op == FR_OP_ADD_RELU_BACKWARD) return !n.params.empty();
  return n.op == FR_OP_CONV2D_BACKWARD && writes_input_gradient(n) && n.in.size() > 1 && !n.out.empty() &&
         n.params_as<FrConvBackwardParams>()->part == 1 &&
         plan.tensor(n.out[0]).shape.numel() != plan.tensor(n.in[1]).shape.numel();
}

// Whether a node uses batchnorm_add's subsampled output (ops.h; CompileOptions::subsampled_shortcuts: a
// fourth output), which its kernel must declare (FR_KERNEL_SUBSAMPLED_OUTPUT).
bool uses_subsampled_output(const GraphNode& n) {
  return n.op == FR_OP_BATCHNORM_ADD && n.out.size() > 3;
}

// How many trailing range outputs of an optimizer update are its backups (ops.h; CompileOptions::
// speculative_update's in-update backups: params.backups), which its kernel must declare
// (FR_KERNEL_UPDATE_BACKUPS): one per f32 range output before them.
size_t update_backups(const GraphNode& n) {
  int32_t on = 0;
  if (n.op == FR_OP_SGD_UPDATE) {
    const auto p = n.params_as<FrSgdParams>();
    on = p ? p->backups : 0;
  } else if (n.op == FR_OP_ADAM_UPDATE) {
    const auto p = n.params_as<FrAdamParams>();
    on = p ? p->backups : 0;
  }
  if (!on) return 0;
  size_t f32 = 0;
  while (f32 < n.rout.size() && n.rout[f32].dtype == DType::F32) ++f32;
  return f32;
}

// Whether an optimizer update writes the weight copy of ops.h (CompileOptions::fused_weight_cast: its last
// range output before any backups 16-bit), which its kernel must declare (FR_KERNEL_WEIGHT_COPY).
bool uses_weight_copy(const GraphNode& n) {
  const size_t tail = update_backups(n);
  if ((n.op != FR_OP_SGD_UPDATE && n.op != FR_OP_ADAM_UPDATE) || n.rout.size() <= 1 + tail) return false;
  const DType last = n.rout[n.rout.size() - 1 - tail].dtype;
  return last == DType::F16 || last == DType::BF16;
}

// Whether an optimizer update reads 16-bit gradients (ops.h; CompileOptions::update_from_grads16: its first
// range input f16 or bf16 for f32 weights), which its kernel must declare (FR_KERNEL_HALF_GRADS).
bool uses_half_grads(const GraphNode& n) {
  return (n.op == FR_OP_SGD_UPDATE || n.op == FR_OP_ADAM_UPDATE) && !n.rin.empty() && !n.rout.empty() &&
         n.rout.front().dtype == DType::F32 &&
         (n.rin.front().dtype == DType::F16 || n.rin.front().dtype == DType::BF16);
}

// Whether a node uses the per-channel sums operands of ops.h (CompileOptions::conv_stats, grad_sums), which
// its kernel must declare (FR_KERNEL_SUMS_OPERANDS).
bool uses_sums_operands(const GraphNode& n) {
  if (n.op == FR_OP_CONV2D) return n.out.size() > (uses_prologue_operands(n) ? 2u : 1u);        // conv_stats
  if (n.op == FR_OP_RELU_BACKWARD || n.op == FR_OP_ADD_RELU_BACKWARD) return n.out.size() > 1;  // grad_sums
  if (n.op == FR_OP_BATCHNORM_ADD) return n.in.size() > 4;
  const bool bn = n.op == FR_OP_BATCHNORM, bnb = n.op == FR_OP_BATCHNORM_BACKWARD;
  const auto p = n.params_as<FrBatchNormParams>();
  if ((!bn && !bnb) || !p) return false;
  if (bnb) return !p->relu && n.in.size() == 6;  // gsums (grad_sums)
  return n.in.size() == 4 && p->training != 0;   // inference takes 5 inputs, no sums
}

// The stream that side-stream calls of a capture on `main` use.
StreamRole side_of(StreamRole main) {
  return main == StreamRole::COMP_2 ? StreamRole::COMP_3 : StreamRole::COMP_2;
}
// The stream of a capture's `aside` calls: the third computing stream when main is COMP_1, else the side.
StreamRole aside_of(StreamRole main) {
  return main == StreamRole::COMP_1 ? StreamRole::COMP_3 : side_of(main);
}
// The stream of a capture's detached calls (GraphNode::detached): the update stream, else (a capture on it)
// the third computing stream; never the capture's own or its side stream.
StreamRole detached_of(StreamRole main) {
  return main == StreamRole::UPDATE ? StreamRole::COMP_3 : StreamRole::UPDATE;
}
// The stream a resolved call of a capture on `main` runs on (fused captures also place `aside` calls).
StreamRole lane_of(const ResolvedCall& rc, StreamRole main) {
  return rc.detached ? detached_of(main) : rc.side ? side_of(main) : main;
}
}  // namespace

Runtime::~Runtime() {
  release();
}

void Runtime::release() noexcept {
  for (auto& c : captures_) {
    for (auto& rc : c.calls)
      if (rc.owns_state && rc.state && rc.kernel->destroy) rc.kernel->destroy(ctx_, rc.state);
    if (c.native && api_->graph_destroy) api_->graph_destroy(ctx_, c.native);
  }
  for (auto* w : workspaces_)
    if (w) api_->arena_free(ctx_, w);
  if (arena_) api_->arena_free(ctx_, arena_);
  if (staging_a_) api_->host_free(ctx_, staging_a_);
  if (staging_b_) api_->host_free(ctx_, staging_b_);
  for (auto* e : events_)
    if (e && api_->event_destroy) api_->event_destroy(ctx_, e);
  if (comm_) comm_api_->comm_destroy(comm_);
  comm_ = nullptr;
  for (auto* s : streams_)
    if (s && api_->stream_destroy) api_->stream_destroy(ctx_, s);
  if (ctx_) api_->context_destroy(ctx_);
  captures_.clear(), workspaces_.fill(nullptr), events_.clear(), streams_.fill(nullptr);
  arena_ = staging_a_ = staging_b_ = nullptr;
  ctx_ = nullptr;
}

void Runtime::allocate(const MemoryPlan& plan, uint64_t staging_bytes) {
  FRESCO_CHECK(!arena_, ErrorCode::kUsage, "Runtime::allocate called twice (the arena is allocated once)");
  FRESCO_CHECK(plan.finalized(), ErrorCode::kUsage, "Runtime::allocate: the memory plan is not finalized");
  void* p = nullptr;
  throw_if_error(api_->arena_alloc(ctx_, plan.total_bytes(), &p),
                 "allocating the " + std::to_string(plan.total_bytes()) + "-byte arena on " + device_);
  arena_ = static_cast<uint8_t*>(p);
  arena_bytes_ = plan.total_bytes();
  staging_bytes_ = staging_bytes;
  if (staging_bytes) {
    throw_if_error(api_->host_alloc(ctx_, staging_bytes, &p), "allocating staging buffer A");
    staging_a_ = static_cast<uint8_t*>(p);
    throw_if_error(api_->host_alloc(ctx_, staging_bytes, &p), "allocating staging buffer B");
    staging_b_ = static_cast<uint8_t*>(p);
    std::memset(staging_a_, 0, staging_bytes);
    std::memset(staging_b_, 0, staging_bytes);
  }
}

void Runtime::attach_comm(const FrCommApi* comm_api, void* group, int32_t rank, int32_t device_index) {
  FRESCO_CHECK(comm_api && group && !comm_ && captures_.empty(), ErrorCode::kUsage,
               "Runtime::attach_comm: once, with a collective backend and its group, before pre_capture");
  FRESCO_CHECK(device_ == comm_api->device, ErrorCode::kInternal,
               std::string("Runtime::attach_comm: the collective backend '") + comm_api->name +
                   "' runs on '" + comm_api->device + "', this runtime on '" + device_ + "'");
  throw_if_error(
      comm_api->comm_create(group, rank, ctx_, device_index, &comm_),
      std::string("creating rank ") + std::to_string(rank) + "'s communicator (" + comm_api->name + ")");
  comm_api_ = comm_api;
}

ResolvedCall Runtime::resolve(const GraphNode& node, const MemoryPlan& plan) {
  auto& reg = PluginRegistry::instance();
  ResolvedCall rc;
  rc.label = node.op + (node.label.empty() ? "" : " (" + node.label + ")");
  for (TensorId id : node.in) rc.in.push_back(tensor_view(plan.tensor(id), arena_));
  for (TensorId id : node.out) rc.out.push_back(tensor_view(plan.tensor(id), arena_));
  auto range = [&](const RangeRef& r) {
    FrRange f{};
    f.dtype = static_cast<uint32_t>(r.dtype);
    switch (r.kind) {
      case RangeRef::Kind::REGIONS: {
        const RegionSpan s = range_bytes(r, plan, rc.label);
        f.data = arena_ + s.offset;
        f.bytes = s.bytes;
        break;
      }
      case RangeRef::Kind::TENSOR: {
        const DTensor& t = plan.tensor(r.tensor);
        f.data = arena_ + t.offset;
        f.bytes = r.values_only ? static_cast<uint64_t>(t.shape.numel()) * dtype_size(t.dtype) : t.slot_bytes;
        break;
      }
      case RangeRef::Kind::STAGING:
        FRESCO_CHECK(staging(r.staging), ErrorCode::kUsage, rc.label + ": no staging buffers were allocated");
        f.data = staging(r.staging);
        f.bytes = staging_bytes_;
        break;
    }
    return f;
  };
  for (const auto& r : node.rin) rc.rin.push_back(range(r));
  for (const auto& r : node.rout) rc.rout.push_back(range(r));
  rc.params = node.params;
  rc.side = node.side_stream;
  rc.detached = node.side_stream && node.detached;
  rc.join_before = node.join_side;
  rc.join_lag = node.join_side && node.join_lag;
  rc.join_update = node.join_update;
  uint32_t dtype = static_cast<uint32_t>(FR_F32);
  if (node.kind == NodeKind::COMPUTE && !rc.out.empty())
    dtype = rc.out[0].dtype;
  else if (node.kind == NodeKind::COMPUTE && !rc.in.empty())
    dtype = rc.in[0].dtype;
  else if (node.kind == NodeKind::RANGE && !rc.rout.empty())
    dtype = rc.rout[0].dtype;
  if (uses_wgrad_bn_prologue(node) && node.op == FR_OP_BATCHNORM_BACKWARD)
    dtype = rc.in[0].dtype;  // the weights-only form's outputs are f32 [C]: the kernel of its maps' dtype
  const int32_t op = reg.op_id(node.op);
  rc.kernel = reg.kernel(op, device_, dtype);
  FRESCO_CHECK(rc.kernel, ErrorCode::kBadConfig,
               "no kernel for op '" + node.op + "' on device '" + device_ + "' with dtype " +
                   dtype_name(static_cast<DType>(dtype)) + " (node " + rc.label +
                   "); run `fresco plugins` to see "
                   "what was loaded" +
                   (node.op == FR_OP_CHECK_GRADS
                        ? " (fp16's check of the 16-bit gradients: CompileOptions::update_from_grads16 = OFF "
                          "checks them with unscale_grads instead)"
                        : ""));
  FRESCO_CHECK(
      static_cast<uint32_t>(rc.kernel->kind) == (node.kind == NodeKind::RANGE ? FR_RANGE : FR_COMPUTE),
      ErrorCode::kBadConfig, "op '" + node.op + "' is registered with the other kind (compute vs range)");
  // an optional operand form of ops.h the node uses must be one its kernel declares (FrKernelDef::flags)
  auto require_form = [&](bool uses, uint32_t flag, const std::string& form, const std::string& way_out) {
    FRESCO_CHECK(!uses || (rc.kernel->flags & flag), ErrorCode::kBadConfig,
                 "node " + rc.label + " uses the " + form + " of '" + node.op +
                     "' (ops.h), which the kernel from " + reg.kernel_owner(op, device_, dtype) +
                     " does not declare; " + way_out + " or update the plugin");
  };
  require_form(
      (node.op == FR_OP_SGD_UPDATE || node.op == FR_OP_ADAM_UPDATE || node.op == FR_OP_LARS_UPDATE) &&
          node.rin.size() > 2,
      FR_KERNEL_STEP_MOMENTUM, "per-step momentum table",
      "(FR_KERNEL_STEP_MOMENTUM) set the scheduler's cycle_momentum to false");
  require_form(uses_weight_copy(node), FR_KERNEL_WEIGHT_COPY, "weight copy",
               "(FR_KERNEL_WEIGHT_COPY) compile with CompileOptions::fused_weight_cast = false");
  require_form(update_backups(node) > 0, FR_KERNEL_UPDATE_BACKUPS, "backups",
               "(FR_KERNEL_UPDATE_BACKUPS) compile with CompileOptions::speculative_backups = COPIES");
  require_form(uses_half_grads(node), FR_KERNEL_HALF_GRADS, "16-bit gradients",
               "(FR_KERNEL_HALF_GRADS) compile with CompileOptions::update_from_grads16 = OFF");
  require_form(uses_sums_operands(node), FR_KERNEL_SUMS_OPERANDS, "per-channel sums operands",
               "(FR_KERNEL_SUMS_OPERANDS) compile with CompileOptions::conv_stats and grad_sums = OFF "
               "(DeepLearningTask::conv_stats, grad_sums)");
  require_form(uses_join_prologue(node), FR_KERNEL_CONV_JOIN_PROLOGUE, "join prologue",
               "(FR_KERNEL_CONV_JOIN_PROLOGUE) compile with CompileOptions::join_prologue = OFF "
               "(DeepLearningTask::join_prologue)");
  require_form(uses_prologue_operands(node), FR_KERNEL_CONV_PROLOGUE, "batchnorm prologue forms",
               "(FR_KERNEL_CONV_PROLOGUE) compile with CompileOptions::conv_prologue = OFF "
               "(DeepLearningTask::conv_prologue; conv2d_backward's gradient epilogue also goes with "
               "grad_sums = OFF)");
  require_form(uses_wgrad_bn_prologue(node), FR_KERNEL_WGRAD_BN_PROLOGUE,
               "batchnorm gradient prologue of the weight gradient",
               "(FR_KERNEL_WGRAD_BN_PROLOGUE) compile with CompileOptions::conv_prologue or grad_sums = OFF "
               "(DeepLearningTask::conv_prologue, grad_sums; with freeze_first_layer, grad_sums = OFF)");
  require_form(uses_join_epilogue(node), FR_KERNEL_CONV_JOIN_EPILOGUE, "join epilogue of the input gradient",
               "(FR_KERNEL_CONV_JOIN_EPILOGUE) compile with CompileOptions::join_epilogue = OFF "
               "(DeepLearningTask::join_epilogue)");
  require_form(uses_compact_grad(node, plan), FR_KERNEL_COMPACT_GRAD, "compact gradient part",
               "(FR_KERNEL_COMPACT_GRAD) compile with CompileOptions::compact_shortcut_grads = OFF "
               "(DeepLearningTask::compact_shortcut_grads)");
  require_form(uses_subsampled_output(node), FR_KERNEL_SUBSAMPLED_OUTPUT, "subsampled output",
               "(FR_KERNEL_SUBSAMPLED_OUTPUT) compile with CompileOptions::subsampled_shortcuts = OFF "
               "(DeepLearningTask::subsampled_shortcuts)");
  FrCall& c = rc.call;
  c.struct_size = sizeof(FrCall);
  c.comm = comm_;
  c.op = static_cast<uint32_t>(op);
  return rc;
}

CaptureStats Runtime::pre_capture(const GraphAtlas& atlas) {
  FRESCO_CHECK(arena_, ErrorCode::kUsage, "pre_capture before allocate(): the arena does not exist yet");
  FRESCO_CHECK(captures_.empty(), ErrorCode::kUsage, "pre_capture called twice");
  CaptureStats st;
  std::array<uint64_t, kStreamCount> ws_need{};
  // 1. Resolve and prepare every unique capture (data pointers hidden from prepare).
  std::vector<bool> fusable;  // a whole-step capture may copy its calls (in_whole_step)
  for (const auto& u : atlas.unique()) {
    const AtlasSlot& s = atlas.slot(u.variant, u.gid);
    Capture cap;
    cap.stream = s.stream;
    for (const GraphNode& n : s.graph->nodes(u.gid)) cap.calls.push_back(resolve(n, *s.plan));
    captures_.push_back(std::move(cap));
    fusable.push_back(in_whole_step(u.gid));
  }
  for (size_t ci = 0; ci < captures_.size(); ++ci) {
    Capture& cap = captures_[ci];
    for (auto& rc : cap.calls) {
      FrCall probe = rc.call;
      std::vector<FrTensor> in = rc.in, out = rc.out;
      std::vector<FrRange> rin = rc.rin, rout = rc.rout;
      for (auto& t : in) t.data = nullptr;
      for (auto& t : out) t.data = nullptr;
      for (auto& r : rin) r.data = nullptr;
      for (auto& r : rout) r.data = nullptr;
      probe.in = in.data();
      probe.n_in = static_cast<uint32_t>(in.size());
      probe.out = out.data();
      probe.n_out = static_cast<uint32_t>(out.size());
      probe.rin = rin.data();
      probe.n_rin = static_cast<uint32_t>(rin.size());
      probe.rout = rout.data();
      probe.n_rout = static_cast<uint32_t>(rout.size());
      probe.params = rc.params.empty() ? nullptr : rc.params.data();
      probe.params_size = static_cast<uint32_t>(rc.params.size());
      probe.stream = stream(cap.stream);
      uint64_t ws = 0;
      if (rc.kernel->prepare)
        throw_if_error(rc.kernel->prepare(ctx_, &probe, &rc.state, &ws), "prepare " + rc.label);
      FRESCO_CHECK(ws <= static_cast<uint64_t>(kMaxTensorBytes), ErrorCode::kBadConfig,
                   "prepare " + rc.label + ": the kernel asks for a workspace of " + std::to_string(ws) +
                       " bytes (at most 2^40)");
      rc.call.workspace_bytes = ws;
      // The stream the call runs on in its own capture, and, for a graph a whole-step capture may hold, in
      // that capture (fuse(), always on kFusedStream): each stream's workspace covers exactly the calls that
      // may run on it (the metrics' `aside` calls fuse() places ask for none: it checks).
      auto need = [&](StreamRole main) {
        const int r = static_cast<int>(lane_of(rc, main));
        ws_need[r] = std::max(ws_need[r], ws);
      };
      need(cap.stream);
      if (fusable[ci]) need(kFusedStream);
      ++st.calls;
    }
  }
  // 2. One workspace per stream, allocated once.
  for (int s = 0; s < kStreamCount; ++s) {
    if (!ws_need[s]) continue;
    void* p = nullptr;
    throw_if_error(api_->arena_alloc(ctx_, ws_need[s], &p),
                   "allocating a workspace of " + std::to_string(ws_need[s]));
    workspaces_[s] = static_cast<uint8_t*>(p);
    workspace_bytes_[s] = ws_need[s];
    workspace_total_ += ws_need[s];
  }
  log().debug("kernel workspaces by stream (trans, comp_1, comp_2, comp_3, update): {}, {}, {}, {}, {} bytes",
              ws_need[0], ws_need[1], ws_need[2], ws_need[3], ws_need[4]);
  // 3. Point every call at its final storage, then capture.
  for (auto& cap : captures_) {
    for (auto& rc : cap.calls) {
      FrCall& c = rc.call;
      c.in = rc.in.data();
      c.n_in = static_cast<uint32_t>(rc.in.size());
      c.out = rc.out.data();
      c.n_out = static_cast<uint32_t>(rc.out.size());
      c.rin = rc.rin.data();
      c.n_rin = static_cast<uint32_t>(rc.rin.size());
      c.rout = rc.rout.data();
      c.n_rout = static_cast<uint32_t>(rc.rout.size());
      c.params = rc.params.empty() ? nullptr : rc.params.data();
      c.params_size = static_cast<uint32_t>(rc.params.size());
      c.stream = stream(cap.stream);
      c.workspace = c.workspace_bytes ? workspaces_[static_cast<int>(cap.stream)] : nullptr;
      c.state = rc.state;
    }
    finish_capture(cap);
  }
  const AtlasStats as = atlas.stats();
  st.slots = as.slots;
  st.unique = as.unique;
  st.reused = as.reused;
  return st;
}

void Runtime::finish_capture(Capture& cap) {
  const StreamRole side = side_of(cap.stream), aside = aside_of(cap.stream),
                   detached = detached_of(cap.stream);
  auto lane = [&](const ResolvedCall& rc) {
    return rc.aside && !rc.detached ? aside : lane_of(rc, cap.stream);
  };
  for (auto& rc : cap.calls) {
    const StreamRole r = lane(rc);
    rc.call.stream = stream(r);
    rc.call.workspace = rc.call.workspace_bytes ? workspaces_[static_cast<int>(r)] : nullptr;
    FRESCO_CHECK(rc.call.workspace_bytes <= workspace_bytes_[static_cast<int>(r)], ErrorCode::kInternal,
                 rc.label + ": workspace of its stream is too small");
  }
  if (!(api_->capture_begin && api_->capture_end && api_->graph_launch)) return;  // replayed call list
  void* s = stream(cap.stream);
  throw_if_error(api_->capture_begin(ctx_, s), "capture begin");
  try {
    std::array<bool, kStreamCount> forked{};  // streams forked from main and not joined back yet
    auto any_forked = [&] { return std::find(forked.begin(), forked.end(), true) != forked.end(); };
    int mark = -1;  // lag_events_ index marking the side work issued before the last lagged join, not waited
    // A lagged join (GraphNode::join_lag): mark the side work issued so far, wait for the previous mark.
    auto join_lagged = [&] {
      const bool pending = forked[static_cast<size_t>(side)];
      const int next = mark == 0 ? 1 : 0;
      if (pending) record(lag_events_[static_cast<size_t>(next)], side);
      if (mark >= 0) wait(cap.stream, lag_events_[static_cast<size_t>(mark)]);
      mark = pending ? next : -1;
    };
    auto join = [&](bool all) {  // every forked stream back into main (the detached one only with `all`)
      for (int r = 0; r < kStreamCount; ++r)
        if (forked[static_cast<size_t>(r)] && (all || static_cast<StreamRole>(r) != detached)) {
          record(join_event_, static_cast<StreamRole>(r));
          wait(cap.stream, join_event_);
          forked[static_cast<size_t>(r)] = false;
        }
      mark = -1;
    };
    for (const auto& rc : cap.calls) {
      if (rc.join_update && forked[static_cast<size_t>(detached)]) {  // the previous step's deferred update
        record(join_event_, detached);
        wait(cap.stream, join_event_);
        forked[static_cast<size_t>(detached)] = false;
      }
      if (rc.join_before && rc.join_lag)
        join_lagged();
      else if (rc.join_before && any_forked())
        join(rc.join_all);
      if (lane(rc) != cap.stream && has_events()) {  // fork: it starts after everything issued on main so far
        record(fork_event_, cap.stream);
        wait(lane(rc), fork_event_);
        forked[static_cast<size_t>(lane(rc))] = true;
      }
      throw_if_error(rc.kernel->run(ctx_, &rc.call), "kernel " + rc.label);
    }
    if (any_forked()) join(true);
  } catch (...) {
    void* broken = nullptr;
    try {
      throw_if_error(api_->capture_end(ctx_, s, &broken), "capture end");
    } catch (const Error&) {  // keep the first error
    }
    if (broken && api_->graph_destroy) api_->graph_destroy(ctx_, broken);
    throw;
  }
  throw_if_error(api_->capture_end(ctx_, s, &cap.native), "capture end");
}

int Runtime::fuse(const GraphAtlas& atlas, Variant v, const std::vector<GraphId>& gids,
                  StreamRole stream_role) {
  FRESCO_CHECK(stream_role == kFusedStream, ErrorCode::kUsage,
               "Runtime::fuse: fused captures run on COMP_1 (pre_capture sized the workspaces for it)");
  Capture cap;
  cap.stream = stream_role;
  for (GraphId g : gids) {
    FRESCO_CHECK(in_whole_step(g), ErrorCode::kInternal,
                 std::string("Runtime::fuse: ") + graph_id_name(g) + " is not a graph of the whole step");
    const AtlasSlot& s = atlas.slot(v, g);
    if (s.captured_idx < 0) continue;
    // Side-stream work (weight gradients) must be joined before anything past the backward pieces reads it.
    // The train metrics read only the loss's per-batch sums, so they may run beside the backward too.
    const bool backward_piece = g == GraphId::FIRST_LAYER_FWD_A || g == GraphId::FIRST_LAYER_FWD_B ||
                                g == GraphId::DEEP_FWD_BWD || g == GraphId::FIRST_LAYER_BWD_A ||
                                g == GraphId::FIRST_LAYER_BWD_B || g == GraphId::ACCUM_METRICS;
    bool first = true;
    for (const ResolvedCall& rc : captures_.at(static_cast<size_t>(s.captured_idx)).calls) {
      ResolvedCall copy = rc;
      copy.owns_state = false;
      copy.join_before = rc.join_before || (first && !backward_piece);
      copy.join_all = first && !backward_piece;
      copy.join_lag = rc.join_lag && !(first && !backward_piece);  // a piece's first join is a full one
      // The metrics wait only for the loss (issued on main): on a third stream they do not queue behind the
      // side stream's weight gradients and early update (they are still joined before the optimizer).
      if (g == GraphId::ACCUM_METRICS && copy.side && copy.call.workspace_bytes == 0) {
        copy.side = false;
        copy.aside = true;
      }
      first = false;
      cap.calls.push_back(std::move(copy));
    }
  }
  if (cap.calls.empty()) return -1;
  // The copies own their tensor/range arrays: point the calls at them (finish_capture sets streams and
  // workspaces).
  for (auto& rc : cap.calls) {
    rc.call.in = rc.in.data();
    rc.call.out = rc.out.data();
    rc.call.rin = rc.rin.data();
    rc.call.rout = rc.rout.data();
    rc.call.params = rc.params.empty() ? nullptr : rc.params.data();
  }
  finish_capture(cap);
  captures_.push_back(std::move(cap));
  return static_cast<int>(captures_.size()) - 1;
}

void Runtime::order_after_last(StreamRole s) {
  const int si = static_cast<int>(s);
  if (last_stream_ >= 0 && last_stream_ != si && has_events()) {
    record(chain_events_[static_cast<size_t>(last_stream_)], static_cast<StreamRole>(last_stream_));
    wait(s, chain_events_[static_cast<size_t>(last_stream_)]);
  }
  last_stream_ = si;
}

void Runtime::launch_unordered(int idx) {
  const Capture& c = captures_.at(static_cast<size_t>(idx));
  last_stream_ = static_cast<int>(c.stream);
  if (c.native)
    throw_if_error(api_->graph_launch(ctx_, c.native, stream(c.stream)), "graph launch");
  else
    run_calls(c);
}

bool Runtime::has_events() const noexcept {
  return api_->event_create && api_->event_record && api_->stream_wait_event && api_->event_sync;
}

int Runtime::create_event() {
  void* e = nullptr;
  if (has_events()) throw_if_error(api_->event_create(ctx_, &e), "creating an event");
  events_.push_back(e);
  return static_cast<int>(events_.size()) - 1;
}

void Runtime::record(int event, StreamRole s) {
  if (has_events())
    throw_if_error(api_->event_record(ctx_, events_.at(static_cast<size_t>(event)), stream(s)),
                   "event record");
}

void Runtime::wait(StreamRole s, int event) {
  if (has_events())
    throw_if_error(api_->stream_wait_event(ctx_, stream(s), events_.at(static_cast<size_t>(event))),
                   "stream wait");
}

void Runtime::host_wait(int event) {
  if (has_events())
    throw_if_error(api_->event_sync(ctx_, events_.at(static_cast<size_t>(event))), "event sync");
}

uint64_t Runtime::memory_in_use() const {
  if (api_->memory_in_use) return api_->memory_in_use(ctx_);
  return arena_bytes_ + workspace_total_;
}

void Runtime::run_calls(const Capture& c) {
  for (const auto& rc : c.calls) throw_if_error(rc.kernel->run(ctx_, &rc.call), "kernel " + rc.label);
}

void Runtime::run_eager(const Capture& c) {
  run_calls(c);
}

void Runtime::launch(const GraphAtlas& atlas, Variant v, GraphId g) {
  const AtlasSlot& s = atlas.slot(v, g);
  if (s.captured_idx < 0) return;
  const Capture& c = captures_[static_cast<size_t>(s.captured_idx)];
  order_after_last(c.stream);
  if (c.native)
    throw_if_error(api_->graph_launch(ctx_, c.native, stream(c.stream)),
                   std::string("launch ") + graph_id_name(g));
  else
    run_calls(c);
}

void Runtime::synchronize() {
  for (auto* s : streams_)
    if (api_->stream_sync) throw_if_error(api_->stream_sync(ctx_, s), "stream synchronize");
  last_stream_ = -1;
}

void Runtime::upload(const MemoryPlan& plan, TensorId id, const void* src, uint64_t bytes) {
  const DTensor& t = plan.tensor(id);
  FRESCO_CHECK(bytes <= t.slot_bytes, ErrorCode::kInternal,
               "upload of " + std::to_string(bytes) + " bytes into '" + t.name + "' (slot " +
                   std::to_string(t.slot_bytes) + ")");
  throw_if_error(api_->memcpy_async(ctx_, arena_ + t.offset, src, bytes, 0, stream(StreamRole::TRANS)),
                 "upload");
  synchronize();
}

void Runtime::download_raw(const void* device_src, void* dst, uint64_t bytes) {
  synchronize();
  throw_if_error(api_->memcpy_async(ctx_, dst, device_src, bytes, 1, stream(StreamRole::TRANS)), "download");
  synchronize();
}

void Runtime::download(const MemoryPlan& plan, TensorId id, void* dst, uint64_t bytes) {
  const DTensor& t = plan.tensor(id);
  FRESCO_CHECK(bytes <= t.slot_bytes, ErrorCode::kInternal,
               "download of " + std::to_string(bytes) + " bytes from '" + t.name + "' (slot " +
                   std::to_string(t.slot_bytes) + ")");
  synchronize();
  throw_if_error(api_->memcpy_async(ctx_, dst, arena_ + t.offset, bytes, 1, stream(StreamRole::TRANS)),
                 "download");
  synchronize();
}

}  // namespace fresco
