// Golden checks: replay a training run recorded with PyTorch (../shared/golden/<case>: manifest.json +
// data.bin) from its initial weights and compare every step's loss, every final tensor and the eval logits
// against the manifest's tolerances. Tested by tests/e2e/test_golden.cpp on the cases copied into
// tests/data/golden.
#pragma once

#include <string>
#include <vector>

namespace fresco {

struct GoldenReport {
  std::string name;
  int steps = 0;           // steps replayed
  int recorded_steps = 0;  // steps in the case (more than `steps` when the replay was cut short)
  double worst_loss_rel = 0;
  int worst_loss_step = -1;
  double worst_tensor_rel = 0;
  std::string worst_tensor;
  double logits_rel = 0;
  double loss_tol = 0, tensor_tol = 0, logits_tol = 0;
  bool pass = false;
  std::string failure;  // why it failed (tolerance exceeded, unsupported layer, bad file)
};

// Runs one case on `device` ("cpu", "cuda", "auto"). Errors in the case files throw fresco::Error; a model
// this build cannot express yields pass=false with the reason in `failure`. `max_steps` > 0 replays only
// the first max_steps steps and compares only their losses: the final tensors and eval logits belong to the
// end of the run and are then not compared (worst_tensor_rel and logits_rel stay 0, worst_tensor says so).
// Use it for cases whose trajectory amplifies float rounding beyond the tolerance (docs/decisions.md).
GoldenReport run_golden(const std::string& case_dir, const std::string& device, int max_steps = 0);

}  // namespace fresco
