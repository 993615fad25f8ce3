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
using SB = CompileOptions::SpeculativeBackups;

CompiledModel compile_resnet18(SU mode, DType precision = DType::F16, int parts = 5,
                               SB backups = SB::IN_UPDATE) {
  CompileOptions o = test::rgb_compile_options(32, 512);
  o.precision = precision;
  o.speculative_update = mode;
  o.early_update_parts = parts;
  o.speculative_backups = backups;
  return Compiler().compile(models::resnet18(10, models::Stem::CIFAR), o);
}

// The op that writes the backups: the update itself, or the copy nodes before it.
const char* backup_writer(SB backups) {
  return backups == SB::IN_UPDATE ? FR_OP_SGD_UPDATE : FR_OP_COPY;
}

bool same_range(const RangeRef& a, const RangeRef& b) {
  return a.kind == b.kind && a.first == b.first && a.last == b.last && a.tensor == b.tensor &&
         a.skip == b.skip && a.take == b.take && a.dtype == b.dtype;
}
}  // namespace

class SpeculativeBackupsPlan : public testing::TestWithParam<SB> {};

TEST_P(SpeculativeBackupsPlan, Fp16UpdatesEarlyWithBackupsAndRestoresThemLate) {
  const SB form = GetParam();
  const CompiledModel m = compile_resnet18(SU::ON, DType::F16, 5, form);
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
  // DEEP_FWD_BWD: every update there writes only deep conv weights and buffers (and their A copies), keeping
  // each f32 range it writes in a backup: its own trailing outputs (IN_UPDATE), or a copy node before it
  std::vector<std::pair<RangeRef, RangeRef>> kept;  // (backup, range)
  const auto& nodes = m.train->nodes(GraphId::DEEP_FWD_BWD);
  int updates = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].op != FR_OP_SGD_UPDATE) continue;
    ++updates;
    const GraphNode& u = nodes[i];
    EXPECT_TRUE(u.side_stream) << u.label;
    const auto sp = u.params_as<FrSgdParams>();
    ASSERT_TRUE(sp.has_value());
    EXPECT_EQ(sp->backups, form == SB::IN_UPDATE ? 1 : 0) << u.label;
    size_t f32 = 0;
    while (f32 < u.rout.size() && u.rout[f32].dtype == DType::F32) ++f32;
    EXPECT_EQ(f32, 2u) << u.label << ": weights and momentum";
    if (form == SB::IN_UPDATE) {
      ASSERT_EQ(u.rout.size(), 2 * f32 + 1) << u.label << ": then the copy and backups";
    }
    size_t k = i;
    for (size_t j = 0; j < f32; ++j) {
      const RangeRef& r = u.rout[j];
      const RegionSpan b = range_bytes(r, p, u.label);
      auto within = [&](const RegionSpan& in) {
        return b.offset >= in.offset && b.offset + b.bytes <= in.offset + in.bytes;
      };
      EXPECT_TRUE(within(deep) || within(deep_m)) << u.label;
      RangeRef keep, kept_range = r;
      if (form == SB::IN_UPDATE) {
        keep = u.rout[f32 + 1 + j];
        EXPECT_TRUE(keep.kind == RangeRef::Kind::TENSOR && keep.values_only) << u.label;
      } else {
        ASSERT_GT(k, 0u);
        const GraphNode& copy = nodes[--k];
        ASSERT_EQ(copy.op, FR_OP_COPY) << u.label;
        EXPECT_TRUE(std::any_of(u.rout.begin(), u.rout.end(),
                                [&](const RangeRef& o) { return same_range(o, copy.rin[0]); }));
        keep = copy.rout[0], kept_range = copy.rin[0];
      }
      EXPECT_TRUE(backups.count(keep.tensor)) << u.label;
      EXPECT_EQ(p.tensor(keep.tensor).slot_bytes >= b.bytes, true);
      kept.push_back({keep, kept_range});
    }
    if (form == SB::IN_UPDATE) {  // no copy nodes
      EXPECT_TRUE(i == 0 || nodes[i - 1].op != FR_OP_COPY) << u.label;
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

namespace {
// Each backup lives from the backward time of the layer its part waits for, and its copy comes after that
// layer's weight gradient (the nodes before it touch only what lives until then).
void expect_placed_after_their_layers(const CompiledModel& m) {
  const char* writer = backup_writer(m.options.speculative_backups);
  const int L = static_cast<int>(m.arch.layers.size());
  for (const auto& b : m.speculative_backups) {
    if (b.layer < 0) continue;
    EXPECT_EQ(m.base_plan().tensor(b.tensor).live_begin, 2 * L + 1 - std::min(b.layer, m.speculative_layer));
  }
  // each backup's copy comes after the weight gradient of the layer its lifetime starts at (the nodes
  // before it touch only what lives until then)
  const auto& nodes = m.train->nodes(GraphId::DEEP_FWD_BWD);
  auto writer_of = [&](TensorId id, const std::string& op) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i].op != op) continue;
      for (TensorId o : nodes[i].out)
        if (o == id) return static_cast<int64_t>(i);
      for (const RangeRef& r : nodes[i].rout)
        if (r.kind == RangeRef::Kind::TENSOR && r.tensor == id) return static_cast<int64_t>(i);
    }
    return int64_t{-1};
  };
  for (const auto& b : m.speculative_backups) {
    const int64_t copy = writer_of(b.tensor, writer);
    ASSERT_GE(copy, 0);
    if (b.layer < 0) continue;
    const int32_t waits_for = std::min(b.layer, m.speculative_layer);
    const TensorId grad = m.arch.layers[static_cast<size_t>(waits_for)].grad_weight_low;
    const int64_t wgrad = writer_of(grad, FR_OP_CONV2D_BACKWARD);
    ASSERT_GE(wgrad, 0) << m.arch.layers[static_cast<size_t>(waits_for)].name;
    EXPECT_GT(copy, wgrad);
  }
}
}  // namespace

TEST_P(SpeculativeBackupsPlan, PartsWaitForTheLayerWhereTheBackupsFit) {
  const CompiledModel m = compile_resnet18(SU::ON, DType::F16, 5, GetParam());
  expect_placed_after_their_layers(m);
  // ResNet-50 (ImageNet stem, 224 x 224, batch 256) too, its plan no larger than without (at 64 x 64 and
  // batch 32 the maps are too small to hold its backups: ON then takes the smallest plan)
  CompileOptions o = test::rgb_compile_options(224, 256);
  o.precision = DType::F16;
  o.speculative_update = SU::ON;
  o.speculative_backups = GetParam();
  const CompiledModel r50 = Compiler().compile(models::resnet50(10, models::Stem::IMAGENET), o);
  o.speculative_update = SU::OFF;
  const CompiledModel r50_off = Compiler().compile(models::resnet50(10, models::Stem::IMAGENET), o);
  ASSERT_TRUE(r50.speculative);
  EXPECT_EQ(r50.base_plan().total_bytes(), r50_off.base_plan().total_bytes());
  expect_placed_after_their_layers(r50);
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
  // a first fc: the other fc weights, whose f32 gradients are unscaled after the check, would update early
  CompileOptions mlp = test::small_compile_options(8);
  mlp.precision = DType::F16;
  mlp.early_update = CompileOptions::EarlyUpdate::ON;
  mlp.speculative_update = SU::ON;
  try {
    Compiler().compile(seq({flatten(), fc(64), relu(), fc(32), relu(), fc(10)}), mlp);
    ADD_FAILURE() << "a first fc: compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_NE(std::string(e.what()).find("conv first layer"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(compile_resnet18(SU::AUTO, DType::BF16).speculative);
}

// With progressive resolution every variant's plan holds the same backups (the other sizes' plans are made
// with them, tensor for tensor), and a last batch smaller than the others compiles too.
TEST(SpeculativeUpdatePlan, ProgressiveResolutionPlansTheSameBackups) {
  CompileOptions o = test::rgb_compile_options(32, 64);
  o.train_samples = 160;  // batches of 64, 64 and 32: train_last and train_lowres_last exist
  o.steps_per_epoch = 3;
  o.total_steps = 6;
  o.progressive.begin_h = o.progressive.begin_w = 16;
  o.progressive.begin_epochs = 1;
  o.precision = DType::F16;
  o.speculative_update = SU::ON;
  const CompiledModel m = Compiler().compile(models::resnet18(10, models::Stem::CIFAR), o);
  ASSERT_TRUE(m.speculative);
  ASSERT_FALSE(m.speculative_backups.empty());
  int plans = 0;
  for (const auto& p : m.plans) {
    if (!p) continue;
    ++plans;
    for (const auto& b : m.speculative_backups) {
      const DTensor& t = p->tensor(b.tensor);
      EXPECT_EQ(t.offset, m.base_plan().tensor(b.tensor).offset);
      EXPECT_EQ(static_cast<uint64_t>(t.shape.numel()) * 2, b.bytes);
    }
  }
  EXPECT_GE(plans, 4);
}

INSTANTIATE_TEST_SUITE_P(Forms, SpeculativeBackupsPlan, testing::Values(SB::IN_UPDATE, SB::COPIES),
                         [](const testing::TestParamInfo<SB>& i) {
                           return std::string(i.param == SB::IN_UPDATE ? "InUpdate" : "Copies");
                         });
