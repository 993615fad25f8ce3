// `fresco golden [--steps N] CASE_DIR...`: per case the worst relative loss and tensor errors and PASS/FAIL
// against the manifest's tolerances; exit status 1 when any case fails.
#include <cstdio>

#include "commands.h"
#include "fresco/core/golden.h"

namespace fresco::cli {

int cmd_golden(const std::vector<std::string>& cases, const std::string& device, int max_steps) {
  int failed = 0;
  for (const auto& dir : cases) {
    const GoldenReport r = run_golden(dir, device, max_steps);
    if (!r.failure.empty() && r.steps == 0) {
      std::printf("%-28s FAIL  %s\n", r.name.c_str(), r.failure.c_str());
      ++failed;
      continue;
    }
    if (r.steps < r.recorded_steps) {
      std::printf(
          "%-28s %s  steps %d/%d  loss rel %.2e (step %d, tol %.0e)  final tensors and logits not compared\n",
          r.name.c_str(), r.pass ? "PASS" : "FAIL", r.steps, r.recorded_steps, r.worst_loss_rel,
          r.worst_loss_step, r.loss_tol);
    } else {
      std::printf(
          "%-28s %s  steps %d  loss rel %.2e (step %d, tol %.0e)  tensor rel %.2e (%s, tol %.0e)  "
          "logits rel %.2e (tol %.0e)\n",
          r.name.c_str(), r.pass ? "PASS" : "FAIL", r.steps, r.worst_loss_rel, r.worst_loss_step, r.loss_tol,
          r.worst_tensor_rel, r.worst_tensor.c_str(), r.tensor_tol, r.logits_rel, r.logits_tol);
    }
    failed += r.pass ? 0 : 1;
  }
  std::printf("%zu case(s), %d failed\n", cases.size(), failed);
  return failed ? 1 : 0;
}

}  // namespace fresco::cli
