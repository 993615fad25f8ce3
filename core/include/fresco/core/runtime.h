// Runtime: one device of one backend for one compiled job: the arena (allocated once), staging buffers,
// streams, per-stream workspaces and the captured graphs. pre_capture() resolves every unique (graph,
// GraphId, ShapeId) of an atlas into kernel calls, prepares them and captures them (natively when the device
// can, else as a replayed call list). launch() is an array read plus the launch: no allocation, no lookup by
// name. Tested by tests/core/test_simple_task.cpp and every op test.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fresco/core/atlas.h"
#include "fresco/core/memory_plan.h"
#include "fresco/plugin.h"

namespace fresco {

struct ResolvedCall {
  const FrKernelDef* kernel = nullptr;
  bool owns_state = true;  // false in fused captures, which borrow the state of the piece they copy
  bool side = false;       // runs on the capture's side stream, forked from the main stream just before it
  // (fused captures) runs on a third stream, forked from the main stream just before it, so it waits for
  // nothing queued on the side stream; joined with the side stream. For small calls without workspace.
  bool aside = false;
  bool detached = false;     // GraphNode::detached: on the update stream, joined only by join_all
  bool join_before = false;  // the main stream waits for all side-stream work before this call
  bool join_all = false;     // with join_before: the detached work too (a piece past the backward starts)
  bool join_lag = false;     // with join_before: only for the side work issued before the previous join
  bool join_update = false;  // GraphNode::join_update: the main stream waits for the update stream first
  FrCall call{};
  std::vector<FrTensor> in, out;
  std::vector<FrRange> rin, rout;
  std::vector<uint8_t> params;
  void* state = nullptr;
  std::string label;  // "op (layer)" for messages
};

struct Capture {
  std::vector<ResolvedCall> calls;
  StreamRole stream = StreamRole::COMP_1;
  void* native = nullptr;  // device graph when the backend captures natively
};

// The stream of the whole-step captures (Runtime::fuse).
inline constexpr StreamRole kFusedStream = StreamRole::COMP_1;

struct CaptureStats {
  int slots = 0, unique = 0, reused = 0, calls = 0;
};

class Runtime {
 public:
  // device: a name a loaded plugin provides ("cpu", "cuda"); plugins must be loaded already.
  Runtime(const std::string& device, int device_index = 0);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const std::string& device() const noexcept { return device_; }
  // One-time allocation of the arena for `plan` (zero-filled) and of the A/B staging buffers.
  void allocate(const MemoryPlan& plan, uint64_t staging_bytes);
  uint8_t* arena() const noexcept { return arena_; }
  uint8_t* staging(char ab) const noexcept { return ab == 'A' ? staging_a_ : staging_b_; }
  uint64_t staging_bytes() const noexcept { return staging_bytes_; }
  uint64_t device_bytes() const noexcept { return arena_bytes_ + workspace_total_; }
  uint64_t workspace_bytes() const noexcept { return workspace_total_; }  // kernel workspaces, all streams

  // Data parallelism (DESIGN §10): this runtime as rank `rank` of `group` (created by comm_api's
  // group_create), called on the rank's thread before pre_capture, so that every call carries the
  // communicator (FrCall::comm) the collective ops read. The group outlives this runtime.
  void attach_comm(const FrCommApi* comm_api, void* group, int32_t rank, int32_t device_index);
  // Resolves, prepares and captures every unique slot of the atlas.
  CaptureStats pre_capture(const GraphAtlas& atlas);
  // One more capture holding the nodes of several GraphIds of one variant, in order, on one stream
  // (kFusedStream, the only one pre_capture sizes workspaces for): a whole training step as a single launch.
  // Reuses the prepared calls of pre_capture. Returns -1 when all are empty.
  int fuse(const GraphAtlas& atlas, Variant v, const std::vector<GraphId>& gids, StreamRole stream);
  // Launch in program order: work on another stream than the previous launch waits for it (events).
  void launch(const GraphAtlas& atlas, Variant v, GraphId g);
  // Launch capture `idx` on its stream with no implicit ordering; the caller orders it with events.
  void launch_unordered(int idx);
  void synchronize();

  // Events (no-ops on devices without them). Created at compile time only.
  bool has_events() const noexcept;
  int create_event();
  void record(int event, StreamRole s);
  void wait(StreamRole s, int event);
  void host_wait(int event);
  // Device bytes this runtime holds (arena + workspaces, plus library state when the device reports it).
  uint64_t memory_in_use() const;

  // Host <-> device copies of one tensor (whole slot or `bytes`), synchronous.
  void upload(const MemoryPlan& plan, TensorId id, const void* src, uint64_t bytes);
  void download(const MemoryPlan& plan, TensorId id, void* dst, uint64_t bytes);
  // Copies `bytes` from a device address of this runtime (an arena pointer a resolved call holds),
  // synchronous.
  void download_raw(const void* device_src, void* dst, uint64_t bytes);

  const Capture& capture(int idx) const { return captures_.at(static_cast<size_t>(idx)); }
  size_t capture_count() const noexcept { return captures_.size(); }
  // Runs one resolved call list eagerly, without capture (for replay-vs-eager tests).
  void run_eager(const Capture& c);

 private:
  // Frees every capture state, graph, workspace, arena, staging buffer, event, stream and the context (the
  // destructor, and a constructor that fails after creating the context).
  void release() noexcept;
  ResolvedCall resolve(const GraphNode& node, const MemoryPlan& plan);
  void run_calls(const Capture& c);
  void finish_capture(Capture& c);
  void order_after_last(StreamRole s);
  void* stream(StreamRole r) const noexcept { return streams_[static_cast<int>(r)]; }

  std::string device_;
  const FrDeviceApi* api_ = nullptr;
  void* ctx_ = nullptr;
  const FrCommApi* comm_api_ = nullptr;
  void* comm_ = nullptr;  // this rank's communicator (attach_comm)
  uint8_t* arena_ = nullptr;
  uint64_t arena_bytes_ = 0;
  uint8_t *staging_a_ = nullptr, *staging_b_ = nullptr;
  uint64_t staging_bytes_ = 0;
  std::array<void*, kStreamCount> streams_{};
  std::array<uint8_t*, kStreamCount> workspaces_{};
  std::array<uint64_t, kStreamCount> workspace_bytes_{};
  uint64_t workspace_total_ = 0;
  std::vector<Capture> captures_;
  std::vector<void*> events_;
  int fork_event_ = -1, join_event_ = -1;
  std::array<int, 2> lag_events_{-1, -1};  // side-stream marks of lagged joins (GraphNode::join_lag)
  std::array<int, kStreamCount> chain_events_{};
  int last_stream_ = -1;
};

}  // namespace fresco
