// Tasks: the phase discipline (PLANNING -> MEMORY_LOCKED -> COMPILED) and SimpleTask, the manual route:
// allocate DTensors, lock memory, add hand-built graph nodes, compile, run. Calling an API in the wrong phase
// throws fresco::Error(kUsage) naming the phase. Tested by tests/core/test_phases.cpp and the op tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fresco/core/atlas.h"
#include "fresco/core/graph.h"
#include "fresco/core/memory_plan.h"

namespace fresco {

class Runtime;

enum class Phase { PLANNING, MEMORY_LOCKED, COMPILED };
const char* phase_name(Phase p) noexcept;

class TaskBase {
 public:
  virtual ~TaskBase();
  Phase phase() const noexcept { return phase_; }

 protected:
  // Throws unless the task is in `expected`; `api` names the call for the message.
  void require(Phase expected, const char* api) const;
  void advance(Phase to);
  Phase phase_ = Phase::PLANNING;
};

// Loads plugins from the default search path once per process (idempotent), and picks a device:
// "auto" -> "cuda" when a CUDA plugin is loaded and sees a GPU, else "cpu".
std::string resolve_device(const std::string& requested);

class SimpleTask : public TaskBase {
 public:
  explicit SimpleTask(std::string device = "cpu");
  ~SimpleTask() override;

  // PLANNING
  TensorId tensor(Region region, DType dtype, const Shape& shape, const std::string& name);
  MemoryPlan& plan();
  void lock_memory();
  // MEMORY_LOCKED
  void add(GraphId gid, GraphNode node);
  void compile();
  // COMPILED
  void write(TensorId id, const void* src, uint64_t bytes);
  void read(TensorId id, void* dst, uint64_t bytes);
  template <class T>
  void write(TensorId id, const std::vector<T>& v) {
    write(id, v.data(), v.size() * sizeof(T));
  }
  template <class T>
  std::vector<T> read(TensorId id, size_t n) {
    std::vector<T> v(n);
    read(id, v.data(), n * sizeof(T));
    return v;
  }
  void run(GraphId gid);
  Runtime& runtime();
  const GraphAtlas& atlas() const noexcept { return atlas_; }
  const ComputationGraph& graph() const noexcept { return graph_; }

 private:
  std::string device_;
  MemoryPlan plan_;
  ComputationGraph graph_{ComputationGraph::Kind::TRAIN};
  GraphAtlas atlas_;
  std::unique_ptr<Runtime> runtime_;
};

}  // namespace fresco
