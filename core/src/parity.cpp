// Parity between two devices: same job, same seed (same Philox initial weights and batches), N steps each.
#include "fresco/core/parity.h"

#include <algorithm>
#include <cmath>

#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/runtime.h"

namespace fresco {

namespace {
ParityRow compare(const std::string& name, const std::vector<float>& a, const std::vector<float>& b) {
  ParityRow r;
  r.tensor = name;
  double ref = 0, num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    r.max_abs = std::max(r.max_abs, std::fabs(d));
    ref = std::max(ref, std::fabs(static_cast<double>(b[i])));
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  r.max_rel = a.size() != b.size() ? INFINITY : r.max_abs / std::max(ref, 1e-30);
  r.norm_rel = a.size() != b.size() ? INFINITY : std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
  if (!std::isfinite(r.max_abs)) r.max_rel = r.norm_rel = INFINITY;
  return r;
}
// The job compiled on two devices over the same (possibly cut) data, so both start from identical weights.
std::vector<std::unique_ptr<DeepLearningTask>> compile_pair(const JobSpec& job, const std::string& device_a,
                                                            const std::string& device_b, int64_t samples,
                                                            data::Dataset* train_out, uint64_t seed_b = 0) {
  auto [train, test] = data::load_train_test(job.data.kind, job.data.path);
  data::keep_first(train, samples);
  std::vector<std::unique_ptr<DeepLearningTask>> tasks;
  for (const std::string& dev : {device_a, device_b}) {
    auto t = std::make_unique<DeepLearningTask>();
    configure(*t, job);
    t->device(dev)
        .data(train, test)
        .normalize(job.normalize_set ? job.normalize : default_normalization(job.data.kind));
    if (seed_b != 0 && !tasks.empty()) t->seed(seed_b);
    t->compile();
    tasks.push_back(std::move(t));
  }
  *train_out = std::move(train);
  return tasks;
}
}  // namespace

NodeParityReport run_parity_nodes(const JobSpec& job, const std::string& device_a,
                                  const std::string& device_b, double tolerance, int64_t samples) {
  data::Dataset train;
  auto tasks = compile_pair(job, device_a, device_b, samples, &train);
  const int64_t batch = tasks[0]->compiled().batch_of[static_cast<int>(Variant::TRAIN_BASE)];
  const std::vector<uint32_t> order = data::shuffled_indices(static_cast<uint32_t>(train.n), job.seed, 0);
  for (auto& t : tasks) t->stage_batch(order.data(), batch);
  NodeParityReport rep;
  for (GraphId g :
       {GraphId::FIRST_LAYER_FWD_A, GraphId::DEEP_FWD_BWD, GraphId::FIRST_LAYER_BWD_A, GraphId::STEP_END,
        GraphId::OPTIMIZER}) {  // STEP_END (a deferred update's) keeps the scalars the update then reads
    const int ia = tasks[0]->compiled().atlas.slot(Variant::TRAIN_BASE, g).captured_idx;
    const int ib = tasks[1]->compiled().atlas.slot(Variant::TRAIN_BASE, g).captured_idx;
    if (ia < 0 || ib < 0) continue;
    Runtime& ra = tasks[0]->runtime();
    Runtime& rb = tasks[1]->runtime();
    const Capture& ca = ra.capture(ia);
    const Capture& cb = rb.capture(ib);
    FRESCO_CHECK(ca.calls.size() == cb.calls.size(), ErrorCode::kInternal, "parity: graphs differ in size");
    for (size_t n = 0; n < ca.calls.size(); ++n) {
      double worst = 0;
      for (int side = 0; side < 2; ++side) {  // run the call alone, on each device
        Runtime& rt = side ? rb : ra;
        Capture one;
        one.stream = (side ? cb : ca).stream;
        one.calls.push_back((side ? cb : ca).calls[n]);
        ResolvedCall& c = one.calls.back();
        c.owns_state = false;
        c.call.in = c.in.data(), c.call.out = c.out.data(), c.call.rin = c.rin.data(),
        c.call.rout = c.rout.data();
        c.call.params = c.params.empty() ? nullptr : c.params.data();
        rt.run_eager(one);
        rt.synchronize();
      }
      auto fetch = [](Runtime& rt, const void* p, uint64_t bytes) {
        std::vector<float> v(bytes / 4);
        rt.download_raw(p, v.data(), v.size() * 4);
        return v;
      };
      const ResolvedCall& a = ca.calls[n];
      const ResolvedCall& b = cb.calls[n];
      for (size_t o = 0; o < a.out.size(); ++o) {
        if (a.out[o].dtype != FR_F32) continue;
        const uint64_t bytes = 4 * static_cast<uint64_t>(a.out[o].dims[0] * a.out[o].dims[1] *
                                                         a.out[o].dims[2] * a.out[o].dims[3]);
        worst = std::max(
            worst, compare("", fetch(ra, a.out[o].data, bytes), fetch(rb, b.out[o].data, bytes)).max_rel);
      }
      for (size_t o = 0; o < a.rout.size(); ++o)
        if (a.rout[o].dtype == FR_F32)
          worst = std::max(worst, compare("", fetch(ra, a.rout[o].data, a.rout[o].bytes),
                                          fetch(rb, b.rout[o].data, b.rout[o].bytes))
                                      .max_rel);
      rep.rows.push_back({graph_id_name(g), a.label, worst});
      if (rep.first_divergent < 0 && !(worst <= tolerance))
        rep.first_divergent = static_cast<int>(rep.rows.size()) - 1;
    }
  }
  return rep;
}

bool parity_row_judged(const ParityRow& row) {
  return row.tensor.find('(') == std::string::npos;
}

ParityReport run_parity(const JobSpec& job, int steps, const std::string& device_a,
                        const std::string& device_b, int64_t samples, bool resync, uint64_t seed_b) {
  FRESCO_CHECK(steps > 0, ErrorCode::kUsage, "parity: steps must be positive");
  ParityReport rep;
  rep.device_a = device_a;
  rep.device_b = device_b;
  rep.steps = steps;
  rep.resync = resync;
  data::Dataset train;
  std::vector<std::unique_ptr<DeepLearningTask>> tasks =
      compile_pair(job, device_a, device_b, samples, &train, seed_b);
  const int64_t batch = tasks[0]->compiled().batch_of[static_cast<int>(Variant::TRAIN_BASE)];
  const std::vector<uint32_t> order = data::shuffled_indices(static_cast<uint32_t>(train.n), job.seed, 0);
  if (resync) tasks[1]->restore(tasks[0]->snapshot());  // every step from A's state, the first too
  // Per tensor the worst of the comparisons made (after the last step; with resync after every step).
  auto add_rows = [&rep](const std::vector<ParityRow>& rows) {
    if (rep.rows.empty()) {
      rep.rows = rows;
      return;
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      ParityRow& r = rep.rows[i];
      r.max_rel = std::max(r.max_rel, rows[i].max_rel);
      r.norm_rel = std::max(r.norm_rel, rows[i].norm_rel);
      r.max_abs = std::max(r.max_abs, rows[i].max_abs);
    }
  };
  auto compare_states = [&tasks](std::vector<std::pair<std::string, std::vector<float>>>* state_a) {
    *state_a = tasks[0]->snapshot();
    const auto sb = tasks[1]->snapshot();
    FRESCO_CHECK(state_a->size() == sb.size(), ErrorCode::kInternal, "parity: the devices' states differ");
    std::vector<ParityRow> rows;
    for (size_t i = 0; i < sb.size(); ++i)
      rows.push_back(compare((*state_a)[i].first, (*state_a)[i].second, sb[i].second));
    return rows;
  };
  for (int s = 0; s < steps; ++s) {
    const int64_t start = (s * batch) % static_cast<int64_t>(order.size());
    const int64_t count = std::min<int64_t>(batch, static_cast<int64_t>(order.size()) - start);
    rep.loss_a.push_back(tasks[0]->train_step(order.data() + start, count));
    rep.loss_b.push_back(tasks[1]->train_step(order.data() + start, count));
    if (!resync && s + 1 < steps) continue;
    std::vector<std::pair<std::string, std::vector<float>>> state_a;
    const std::vector<ParityRow> rows = compare_states(&state_a);
    double worst = 0;
    for (const ParityRow& r : rows)
      if (parity_row_judged(r)) worst = std::max(worst, r.norm_rel);
    rep.step_worst.push_back(worst);
    add_rows(rows);
    if (resync && s + 1 < steps) tasks[1]->restore(state_a);
  }
  rep.rows.push_back(compare("loss", rep.loss_a, rep.loss_b));
  for (const auto& r : rep.rows) {
    rep.worst_max = std::max(rep.worst_max, r.max_rel);
    if (parity_row_judged(r) && r.tensor != "loss") rep.worst = std::max(rep.worst, r.norm_rel);
  }
  return rep;
}

}  // namespace fresco
