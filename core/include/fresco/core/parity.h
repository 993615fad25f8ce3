// Parity: the same compiled graph on two backends. Trains `steps` steps of a job from the same initial
// weights and the same batches on device A and device B and reports, per tensor (weights, gradients, moments)
// and for the per-step loss, the largest relative difference max|a-b| / max(max|b|, tiny). Free-running, the
// two trajectories separate as float noise is amplified by training (a relu mask flipped by one rounding;
// docs/decisions.md); with `resync` every step starts device B from device A's state, so each step's
// arithmetic is compared on its own and a row holds the worst over the steps. Tested by tests/plugins/cuda
// and tests/e2e/test_determinism.cpp.
#pragma once

#include <string>
#include <vector>

#include "fresco/core/job.h"

namespace fresco {

struct ParityRow {
  std::string tensor;
  double max_rel = 0;   // max |a - b| / max |b|: the worst element
  double norm_rel = 0;  // ||a - b|| / ||b||: the golden cases' measure
  double max_abs = 0;
};

struct ParityReport {
  std::string device_a, device_b;
  int steps = 0;
  std::vector<ParityRow> rows;        // one per tensor, then "loss"
  std::vector<float> loss_a, loss_b;  // per step
  std::vector<double> step_worst;     // resync: per step, the largest norm_rel over the master weights
  double worst = 0;                   // largest norm_rel over the master weights
  double worst_max = 0;               // largest max_rel over every row
  bool resync = false;
};

// Whether a report row is judged: a master weight ("conv3.weight", not "G(conv3.weight)") or the loss.
bool parity_row_judged(const ParityRow& row);

// The job's data is used (first `samples` training and test samples when samples > 0). seed_b (non-zero)
// initialises device B from another seed, so its weights start elsewhere: a check of the resync itself.
ParityReport run_parity(const JobSpec& job, int steps, const std::string& device_a,
                        const std::string& device_b, int64_t samples = 0, bool resync = false,
                        uint64_t seed_b = 0);

// Node by node: the first training step's calls (first-layer forward, deep forward/backward, first-layer
// backward, optimizer) run one at a time on both devices from the same state; after each, its outputs are
// compared.
struct NodeParityRow {
  std::string graph, node;  // GraphId name, "op (layer)"
  double max_rel = 0;       // worst over the node's outputs, max|a-b| / max|b|
};
struct NodeParityReport {
  std::vector<NodeParityRow> rows;
  int first_divergent = -1;  // index of the first row over the tolerance, -1 if none
};
NodeParityReport run_parity_nodes(const JobSpec& job, const std::string& device_a,
                                  const std::string& device_b, double tolerance, int64_t samples = 0);

}  // namespace fresco
