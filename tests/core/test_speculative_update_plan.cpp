// CompileOptions::speculative_update in the Compiler (fp16): the conv weights past the first layer's are
// updated in DEEP_FWD_BWD, each update after copies of the f32 ranges it writes into backups (F_FP16
// tensors live from their update to the end of the step), OPTIMIZER restores them with restore_if_skipped
// before the loss scale's update, the batchnorm and fc parameters stay late, and the parts are placed where
// the backups do not enlarge the plan (ON; AUTO is off until measured on a GPU). The bits on a GPU:
// test_cuda_speculative_update.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "fresco/core/compiler.h"
#include "fresco/core/error.h"
#include "fresco/core/models.h"
#include "small_compile_options.h"

using namespace fresco;

namespace {
using SU = CompileOptions::SpeculativeUpdate;

CompiledModel compile_resnet18(SU mode, DType precision = DType::F16, int parts = 5) {
  CompileOptions o = test::rgb_compile_options(32, 512);
  o.precision = precision;
  o.speculative_update = mode;
  o.early_update_parts = parts;
  return Compiler().compile(models::resnet18(10, models::Stem::CIFAR), o);
}

bool same_range(const RangeRef& a, const RangeRef& b) {
  return a.kind == b.kind && a.first == b.first && a.last == b.last && a.tensor == b.tensor &&
         a.skip == b.skip && a.take == b.take && a.dtype == b.dtype;
}
}  // namespace

TEST(SpeculativeUpdatePlan, Fp16UpdatesEarlyWithBackupsAndRestoresThemLate) {
  const CompiledModel m = compile_resnet18(SU::ON);
  const CompiledModel off = compile_resnet18(SU::OFF);
  ASSERT_TRUE(m.speculative);
  EXPECT_FALSE(off.speculative);
  EXPECT_FALSE(compile_resnet18(SU::AUTO).speculative);  // off until measured on a GPU
  const MemoryPlan& p = m.base_plan();
  // ResNet-18 b512: the backups fit where stages 2-4's maps were, and the plan is no larger
  EXPECT_EQ(p.total_bytes(), off.base_plan().total_bytes());
  EXPECT_GE(m.speculative_layer, 0);
  ASSERT_FALSE(m.speculative_backups.empty());
  const RegionSpan deep = p.region(Region::W_DEEP_CONV), deep_m = p.region(Region::M_DEEP_CONV);
  std::set<TensorId> backups;
  for (const auto& b : m.speculative_backups) {
    EXPECT_EQ(p.tensor(b.tensor).region, Region::F_FP16);
    EXPECT_EQ(p.tensor(b.tensor).live_end, 2 * static_cast<int>(m.arch.layers.size()) + 3);  // the step's end
    EXPECT_TRUE(backups.insert(b.tensor).second);
  }
  // DEEP_FWD_BWD: every update there writes only deep conv weights and buffers (and their A copies), after a
  // copy of each f32 range it writes into a backup
  std::vector<std::pair<RangeRef, RangeRef>> kept;  // (backup, range)
  const auto& nodes = m.train->nodes(GraphId::DEEP_FWD_BWD);
  int updates = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].op != FR_OP_SGD_UPDATE) continue;
    ++updates;
    EXPECT_TRUE(nodes[i].side_stream) << nodes[i].label;
    size_t k = i;
    for (const RangeRef& r : nodes[i].rout) {
      if (r.dtype != DType::F32) continue;
      const RegionSpan b = range_bytes(r, p, nodes[i].label);
      auto within = [&](const RegionSpan& in) {
        return b.offset >= in.offset && b.offset + b.bytes <= in.offset + in.bytes;
      };
      EXPECT_TRUE(within(deep) || within(deep_m)) << nodes[i].label;
      ASSERT_GT(k, 0u);
      const GraphNode& copy = nodes[--k];
      ASSERT_EQ(copy.op, FR_OP_COPY) << nodes[i].label;
      EXPECT_TRUE(std::any_of(nodes[i].rout.begin(), nodes[i].rout.end(),
                              [&](const RangeRef& o) { return same_range(o, copy.rin[0]); }));
      EXPECT_TRUE(backups.count(copy.rout[0].tensor)) << copy.label;
      EXPECT_EQ(p.tensor(copy.rout[0].tensor).slot_bytes >= b.bytes, true);
      kept.push_back({copy.rout[0], copy.rin[0]});
    }
  }
  EXPECT_EQ(updates, 5);  // four parts and the rest of the deep conv weights
  EXPECT_EQ(kept.size(), m.speculative_backups.size());
  // OPTIMIZER: the late updates (the first layer's, batchnorm's and the fc's), then one restore of every
  // backup over its range (with the 16-bit copies), before the loss scale's update and step_done
  const auto& opt = m.train->nodes(GraphId::OPTIMIZER);
  const auto restore = std::find_if(opt.begin(), opt.end(),
                                    [](const GraphNode& n) { return n.op == FR_OP_RESTORE_IF_SKIPPED; });
  ASSERT_NE(restore, opt.end());
  EXPECT_EQ(std::count_if(opt.begin(), opt.end(),
                          [](const GraphNode& n) { return n.op == FR_OP_RESTORE_IF_SKIPPED; }),
            1);
  const auto scale = std::find_if(opt.begin(), opt.end(),
                                  [](const GraphNode& n) { return n.op == FR_OP_LOSS_SCALE_UPDATE; });
  EXPECT_LT(restore - opt.begin(), scale - opt.begin());
  const auto params = restore->params_as<FrRestoreParams>();
  ASSERT_TRUE(params.has_value());
  EXPECT_EQ(params->per_group, 2);  // weights and momentum
  EXPECT_EQ(params->weight_copy, 1);
  ASSERT_EQ(restore->rin.size(), kept.size() + 1);
  ASSERT_EQ(restore->rout.size(), kept.size() / 2 * 3);
  for (size_t g = 0; g < kept.size() / 2; ++g)
    for (size_t i = 0; i < 2; ++i) {
      const RangeRef& src = restore->rin[2 * g + i];
      const RangeRef& dst = restore->rout[3 * g + i];
      EXPECT_TRUE(
          std::any_of(kept.begin(), kept.end(),
                      [&](const auto& k) { return same_range(k.first, src) && same_range(k.second, dst); }))
          << "group " << g << " range " << i;
    }
  for (const GraphNode& n : opt)  // late: no deep conv weight but the first layer's is updated here
    if (n.op == FR_OP_SGD_UPDATE)
      for (const RangeRef& r : n.rout)
        if (r.dtype == DType::F32 && r.first <= Region::W_DEEP_CONV && r.last >= Region::W_DEEP_CONV) {
          const RegionSpan b = range_bytes(r, p, n.label);
          EXPECT_LE(b.offset + b.bytes,
                    p.region(Region::W_FIRST_CONV).offset + p.region(Region::W_FIRST_CONV).bytes)
              << n.label;
        }
  // off: nothing of it
  for (GraphId g : {GraphId::DEEP_FWD_BWD, GraphId::OPTIMIZER})
    for (const GraphNode& n : off.train->nodes(g)) {
      EXPECT_NE(n.op, FR_OP_RESTORE_IF_SKIPPED);
      EXPECT_NE(n.op, FR_OP_COPY);
      EXPECT_FALSE(g == GraphId::DEEP_FWD_BWD && n.op == FR_OP_SGD_UPDATE);
    }
}

TEST(SpeculativeUpdatePlan, PartsWaitForTheLayerWhereTheBackupsFit) {
  const CompiledModel m = compile_resnet18(SU::ON);
  const int L = static_cast<int>(m.arch.layers.size());
  for (const auto& b : m.speculative_backups) {
    if (b.layer < 0) continue;
    EXPECT_EQ(b.live_begin, 2 * L + 1 - std::min(b.layer, m.speculative_layer));
  }
  // a part that waits: a stage-4 part placed after the backward of a stage-3 conv
  EXPECT_TRUE(std::any_of(m.speculative_backups.begin(), m.speculative_backups.end(),
                          [&](const auto& b) { return b.layer > m.speculative_layer; }));
}

TEST(SpeculativeUpdatePlan, OnIsRefusedWhereItCannotRun) {
  auto refused = [](const CompileOptions& o, const std::string& what) {
    try {
      Compiler().compile(models::resnet18(10, models::Stem::CIFAR), o);
      ADD_FAILURE() << what << ": compiled";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig) << what;
      EXPECT_NE(std::string(e.what()).find("speculative_update"), std::string::npos) << e.what();
    }
  };
  CompileOptions o = test::rgb_compile_options(32, 16);
  o.speculative_update = SU::ON;
  o.precision = DType::BF16;
  refused(o, "bf16");
  o.precision = DType::F32;
  refused(o, "fp32");
  o.precision = DType::F16;
  o.early_update = CompileOptions::EarlyUpdate::OFF;
  refused(o, "fp16 without the early update");
  o.early_update = CompileOptions::EarlyUpdate::AUTO;
  o.deferred_update = CompileOptions::DeferredUpdate::ON;
  refused(o, "fp16 with the deferred update");
  o.deferred_update = CompileOptions::DeferredUpdate::AUTO;
  o.fused_weight_cast = false;  // the restore recasts the copies the updates write
  refused(o, "fp16 with the weight casts after the updates");
  o.fused_weight_cast = true;
  o.optimizer = LARS();
  refused(o, "LARS");
  EXPECT_FALSE(compile_resnet18(SU::AUTO, DType::BF16).speculative);
}
