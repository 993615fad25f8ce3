// `fresco parity JOB`: N steps of the job on two devices (default cpu and cuda) from the same initial weights
// and batches; prints per tensor the relative difference as a norm and element-wise; exit 1 when a master
// weight or the loss differs by more than --tolerance (norm-relative, as the golden cases measure). With
// --resync every step of the second device starts from the first's state (per-step parity).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "commands.h"
#include "fresco/core/job.h"
#include "fresco/core/parity.h"

namespace fresco::cli {

namespace {
int node_parity(const JobSpec& job, const ParityArgs& a) {
  const NodeParityReport r = run_parity_nodes(job, a.device_a, a.device_b, a.tolerance, a.samples);
  std::printf("node parity %s vs %s, first step of %s (tolerance %.1e, element-wise)\n", a.device_a.c_str(),
              a.device_b.c_str(), job.name.c_str(), a.tolerance);
  for (size_t i = 0; i < r.rows.size(); ++i)
    std::printf("%-20s %-36s %12.3e%s\n", r.rows[i].graph.c_str(), r.rows[i].node.c_str(), r.rows[i].max_rel,
                static_cast<int>(i) == r.first_divergent ? "  <- first divergent node" : "");
  if (r.first_divergent < 0) {
    std::printf("all %zu nodes agree: PASS\n", r.rows.size());
    return 0;
  }
  std::printf("first divergent node: %s %s: FAIL\n",
              r.rows[static_cast<size_t>(r.first_divergent)].graph.c_str(),
              r.rows[static_cast<size_t>(r.first_divergent)].node.c_str());
  return 1;
}
}  // namespace

int cmd_parity(const ParityArgs& a) {
  const JobSpec job = load_job(a.job);
  if (a.nodes) return node_parity(job, a);
  const ParityReport r = run_parity(job, a.steps, a.device_a, a.device_b, a.samples, a.resync);
  std::printf("parity %s vs %s, %d steps of %s%s\n", r.device_a.c_str(), r.device_b.c_str(), r.steps,
              job.name.c_str(),
              r.resync ? " (resynced: each step from the first device's state; the worst step per row)" : "");
  std::printf("%-32s %12s %12s %12s\n", "tensor", "norm rel", "max rel", "max abs");
  int bad = 0;
  for (const auto& row : r.rows) {
    const bool over = parity_row_judged(row) && !(row.norm_rel <= a.tolerance);
    bad += over ? 1 : 0;
    std::printf("%-32s %12.3e %12.3e %12.3e%s\n", row.tensor.c_str(), row.norm_rel, row.max_rel, row.max_abs,
                over ? "  over tolerance" : "");
  }
  if (a.verbose)
    for (size_t i = 0; i < r.loss_a.size(); ++i) {
      std::printf("step %3zu  loss %s %.8f  %s %.8f  rel %.2e", i, r.device_a.c_str(), r.loss_a[i],
                  r.device_b.c_str(), r.loss_b[i],
                  std::fabs(r.loss_a[i] - r.loss_b[i]) / std::max(1e-30, std::fabs(double(r.loss_b[i]))));
      if (r.resync) std::printf("  weights norm rel %.2e", r.step_worst[i]);
      std::printf("\n");
    }
  std::printf("worst weight norm rel %.3e (tolerance %.1e), worst element rel %.3e: %s\n", r.worst,
              a.tolerance, r.worst_max, bad ? "FAIL" : "PASS");
  return bad ? 1 : 0;
}

}  // namespace fresco::cli
