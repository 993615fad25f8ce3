// TaskBase phases, device resolution and SimpleTask.
#include "fresco/core/task.h"

#include <mutex>

#include "fresco/core/error.h"
#include "fresco/core/plugin_loader.h"
#include "fresco/core/runtime.h"

namespace fresco {

const char* phase_name(Phase p) noexcept {
  switch (p) {
    case Phase::PLANNING:
      return "PLANNING";
    case Phase::MEMORY_LOCKED:
      return "MEMORY_LOCKED";
    case Phase::COMPILED:
      return "COMPILED";
  }
  return "?";
}

TaskBase::~TaskBase() = default;

void TaskBase::require(Phase expected, const char* api) const {
  FRESCO_CHECK(phase_ == expected, ErrorCode::kUsage,
               std::string(api) + " is allowed only in phase " + phase_name(expected) +
                   "; the task is in phase " + phase_name(phase_));
}

void TaskBase::advance(Phase to) {
  phase_ = to;
}

std::string resolve_device(const std::string& requested) {
  static std::once_flag once;
  std::call_once(once, [] { PluginRegistry::instance().load_default(); });
  auto& reg = PluginRegistry::instance();
  if (requested != "auto") return requested;
  if (const FrDeviceApi* cuda = reg.device("cuda"))
    if (cuda->device_count && cuda->device_count() > 0) return "cuda";
  return "cpu";
}

SimpleTask::SimpleTask(std::string device) : device_(resolve_device(device)) {}
SimpleTask::~SimpleTask() = default;

TensorId SimpleTask::tensor(Region region, DType dtype, const Shape& shape, const std::string& name) {
  require(Phase::PLANNING, "SimpleTask::tensor");
  return plan_.alloc(region, dtype, shape, name);
}

MemoryPlan& SimpleTask::plan() {
  require(Phase::PLANNING, "SimpleTask::plan");
  return plan_;
}

void SimpleTask::lock_memory() {
  require(Phase::PLANNING, "SimpleTask::lock_memory");
  plan_.finalize();
  advance(Phase::MEMORY_LOCKED);
}

void SimpleTask::add(GraphId gid, GraphNode node) {
  require(Phase::MEMORY_LOCKED, "SimpleTask::add");
  for (TensorId id : node.in) (void)plan_.tensor(id);
  for (TensorId id : node.out) (void)plan_.tensor(id);
  graph_.add(gid, std::move(node));
}

void SimpleTask::compile() {
  require(Phase::MEMORY_LOCKED, "SimpleTask::compile");
  runtime_ = std::make_unique<Runtime>(device_);
  runtime_->allocate(plan_, 0);
  atlas_.assign(Variant::TRAIN_BASE, &graph_, &plan_, ShapeId{1, 1, 1, 1});
  atlas_.dedup();
  runtime_->pre_capture(atlas_);
  advance(Phase::COMPILED);
}

void SimpleTask::write(TensorId id, const void* src, uint64_t bytes) {
  require(Phase::COMPILED, "SimpleTask::write");
  runtime_->upload(plan_, id, src, bytes);
}

void SimpleTask::read(TensorId id, void* dst, uint64_t bytes) {
  require(Phase::COMPILED, "SimpleTask::read");
  runtime_->download(plan_, id, dst, bytes);
}

void SimpleTask::run(GraphId gid) {
  require(Phase::COMPILED, "SimpleTask::run");
  FRESCO_CHECK(static_cast<int>(gid) < kGraphIdCount, ErrorCode::kUsage,
               "SimpleTask::run: graph id " + std::to_string(static_cast<int>(gid)) + " is not a GraphId");
  runtime_->launch(atlas_, Variant::TRAIN_BASE, gid);
  runtime_->synchronize();
}

Runtime& SimpleTask::runtime() {
  require(Phase::COMPILED, "SimpleTask::runtime");
  return *runtime_;
}

}  // namespace fresco
