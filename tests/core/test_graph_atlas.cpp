// GraphAtlas through the Compiler: shape-invariant graphs are captured once across variants, train_last
// shares the train graph's topology with a different ShapeId, train_lowres deduplicates into train_base, and
// the validation variants use the inference graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "fresco/core/compiler.h"
#include "fresco/core/error.h"
#include "fresco/ops.h"

using namespace fresco;

namespace {
CompileOptions mlp_options(int64_t train_samples, int64_t val_samples) {
  CompileOptions o;
  o.input_sample = Shape{1, 28, 28, 1};
  o.num_classes = 10;
  o.batch = 128;
  o.train_samples = train_samples;
  o.val_samples = val_samples;
  o.steps_per_epoch = (train_samples + 127) / 128;
  o.total_steps = o.steps_per_epoch;
  o.normalize = Normalization{{0.286f}, {0.353f}};
  o.optimizer = AdamW();
  return o;
}
}  // namespace

TEST(GraphAtlas, SharesTopologyAndDeduplicates) {
  Compiler c;
  CompiledModel m = c.compile(seq({fc(64), relu(), dropout(0.1f), fc(10)}), mlp_options(1000, 300));
  const GraphAtlas& a = m.atlas;
  ASSERT_TRUE(a.present(Variant::TRAIN_BASE));
  ASSERT_TRUE(a.present(Variant::TRAIN_LAST));  // 1000 = 7 * 128 + 104
  EXPECT_EQ(m.batch_of[static_cast<int>(Variant::TRAIN_LAST)], 104);
  // train_last shares the topology (same graph object) but is its own capture (another ShapeId).
  const AtlasSlot& base = a.slot(Variant::TRAIN_BASE, GraphId::DEEP_FWD_BWD);
  const AtlasSlot& last = a.slot(Variant::TRAIN_LAST, GraphId::DEEP_FWD_BWD);
  EXPECT_EQ(base.graph, last.graph);
  EXPECT_NE(base.captured_idx, last.captured_idx);
  EXPECT_EQ(base.shape.n, 128);
  EXPECT_EQ(last.shape.n, 104);
  // Shape-invariant graphs: one capture for every train variant.
  for (GraphId g : {GraphId::OPTIMIZER, GraphId::ACCUM_METRICS, GraphId::CLEAR_METRICS}) {
    const int idx = a.slot(Variant::TRAIN_BASE, g).captured_idx;
    ASSERT_GE(idx, 0) << graph_id_name(g);
    EXPECT_TRUE(a.slot(Variant::TRAIN_BASE, g).shape.zero());
    for (Variant v : {Variant::TRAIN_LAST, Variant::TRAIN_LOWRES, Variant::TRAIN_LOWRES_LAST})
      EXPECT_EQ(a.slot(v, g).captured_idx, idx) << graph_id_name(g) << " " << variant_name(v);
  }
  // One resolution stage: train_lowres is train_base.
  for (int g = 0; g < kGraphIdCount; ++g)
    EXPECT_EQ(a.slot(Variant::TRAIN_LOWRES, static_cast<GraphId>(g)).captured_idx,
              a.slot(Variant::TRAIN_BASE, static_cast<GraphId>(g)).captured_idx);
  // Validation variants run the inference graph; empty GraphIds have no capture.
  EXPECT_EQ(a.slot(Variant::VAL_BASE, GraphId::INF_MAIN_A).graph, m.inference.get());
  EXPECT_LT(a.slot(Variant::VAL_BASE, GraphId::OPTIMIZER).captured_idx, 0);
  EXPECT_LT(a.slot(Variant::TRAIN_BASE, GraphId::EMA_UPDATE).captured_idx, 0);
  const AtlasStats st = a.stats();
  EXPECT_EQ(st.unique + st.reused, st.slots);
  EXPECT_EQ(static_cast<size_t>(st.unique), a.unique().size());
  EXPECT_GT(st.reused, 0);
}

TEST(GraphAtlas, NoPartialBatchMeansNoTrainLast) {
  Compiler c;
  CompiledModel m = c.compile(seq({fc(10)}), mlp_options(1024, 256));
  EXPECT_FALSE(m.atlas.present(Variant::TRAIN_LAST));
  EXPECT_FALSE(m.atlas.present(Variant::VAL_LAST));
  EXPECT_LT(m.atlas.slot(Variant::TRAIN_LAST, GraphId::DEEP_FWD_BWD).captured_idx, 0);
}

TEST(GraphAtlas, VariantPlansShareOffsetsAndDifferInBatch) {
  Compiler c;
  CompiledModel m = c.compile(seq({fc(32), relu(), fc(10)}), mlp_options(1000, 0));
  const MemoryPlan& b = *m.plans[static_cast<int>(Variant::TRAIN_BASE)];
  const MemoryPlan& l = *m.plans[static_cast<int>(Variant::TRAIN_LAST)];
  ASSERT_EQ(b.size(), l.size());
  for (size_t i = 0; i < b.size(); ++i) {
    const auto& x = b.tensors()[i];
    const auto& y = l.tensors()[i];
    EXPECT_EQ(x.offset, y.offset) << x.name;
    EXPECT_EQ(x.slot_bytes, y.slot_bytes) << x.name;
    if (x.batched) {
      EXPECT_EQ(x.shape.n, 128);
      EXPECT_EQ(y.shape.n, 104);
    } else {
      EXPECT_EQ(x.shape, y.shape);
    }
  }
}

TEST(Compiler, GraphNodesAreSplitByGraphId) {
  Compiler c;
  CompileOptions opt = mlp_options(256, 0);
  opt.early_update = CompileOptions::EarlyUpdate::ON;
  opt.fuse_head =
      false;  // the separate head nodes (the fused head: FusedHeadIsOneNodeAndTakesThePreviousMask)
  CompiledModel m = c.compile(seq({fc(32), relu(), fc(10)}), opt);
  const ComputationGraph& g = *m.train;
  // First layer fwd: normalise (+ labels copy), fc0 with the relu fused. Deep: fc2, loss, fc2's input
  // gradient on the main stream and its weight gradient on the side stream.
  EXPECT_EQ(g.nodes(GraphId::FIRST_LAYER_FWD_A).size(), 2u);
  EXPECT_EQ(g.nodes(GraphId::FIRST_LAYER_FWD_A).back().op, "fc");
  const auto& deep = g.nodes(GraphId::DEEP_FWD_BWD);
  ASSERT_EQ(deep.size(), 5u);
  EXPECT_EQ(deep[2].op, "fc_backward");
  EXPECT_FALSE(deep[2].side_stream);
  EXPECT_TRUE(deep[3].side_stream);
  FrFcBackwardParams part1{}, part2{};
  std::memcpy(&part1, deep[2].params.data(), sizeof part1);
  std::memcpy(&part2, deep[3].params.data(), sizeof part2);
  EXPECT_EQ(part1.part, 1);
  EXPECT_EQ(part2.part, 2);
  EXPECT_EQ(deep[3].out.size(), 2u);  // dw, db
  // The first layer's backward masks the gradient with its fused relu's output.
  EXPECT_EQ(g.nodes(GraphId::FIRST_LAYER_BWD_A)[0].in.size(), 4u);
  EXPECT_EQ(g.nodes(GraphId::FIRST_LAYER_BWD_A).size(), 1u);
  EXPECT_EQ(g.nodes(GraphId::FIRST_LAYER_BWD_A)[0].op, "fc_backward");
  // AdamW without no-decay split: one parameter group. Its update is cut after the first layer's weight
  // (the last first-layer tensor in the group): everything after it is updated at the end of DEEP_FWD_BWD
  // on the side stream (early update), the rest in OPTIMIZER, then the step counter with the next lr.
  const MemoryPlan& p = m.base_plan();
  const RegionSpan span = p.region_range(Region::W_BN_BIAS, Region::W_DEEP_CONV);
  const DTensor& w0 = p.tensor(m.arch.layers[0].weight);
  const uint64_t cut = static_cast<uint64_t>(w0.offset) + w0.slot_bytes - span.offset;
  ASSERT_LT(cut, span.bytes);
  EXPECT_EQ(deep[4].op, "adam_update");
  EXPECT_TRUE(deep[4].side_stream);
  ASSERT_EQ(deep[4].rout.size(), 3u);  // W, M, V
  for (const RangeRef& r : deep[4].rout) {
    EXPECT_EQ(r.skip, cut);
    EXPECT_EQ(r.take, -1);
  }
  EXPECT_EQ(deep[4].rin[0].skip, cut);  // G
  ASSERT_EQ(g.nodes(GraphId::OPTIMIZER).size(), 2u);
  const GraphNode& late = g.nodes(GraphId::OPTIMIZER)[0];
  EXPECT_EQ(late.op, "adam_update");
  EXPECT_EQ(late.kind, NodeKind::RANGE);
  EXPECT_FALSE(late.side_stream);
  for (const RangeRef& r : late.rout) {
    EXPECT_EQ(r.skip, 0u);
    EXPECT_EQ(r.take, static_cast<int64_t>(cut));
  }
  EXPECT_EQ(g.nodes(GraphId::OPTIMIZER)[1].op, "step_done");
  EXPECT_EQ(g.nodes(GraphId::OPTIMIZER)[1].params.size(), sizeof(FrScheduleParams));
}

TEST(Compiler, NoEarlyUpdateWhenOffOrInMixedPrecision) {
  Compiler c;
  CompileOptions o = mlp_options(256, 0);
  o.early_update = CompileOptions::EarlyUpdate::OFF;
  o.fuse_head = false;
  CompiledModel m = c.compile(seq({fc(32), relu(), fc(10)}), o);
  EXPECT_EQ(m.train->nodes(GraphId::DEEP_FWD_BWD).size(), 4u);
  ASSERT_EQ(m.train->nodes(GraphId::OPTIMIZER).size(), 2u);
  for (const RangeRef& r : m.train->nodes(GraphId::OPTIMIZER)[0].rout) {  // the whole group
    EXPECT_EQ(r.skip, 0u);
    EXPECT_EQ(r.take, -1);
  }
  // AUTO: only when the first fc's weight gradient is large (batch 128 x 784 x 32 = 3211264 multiply-adds).
  o.early_update = CompileOptions::EarlyUpdate::AUTO;
  auto has_early = [&](const CompileOptions& opts) {
    CompiledModel k = c.compile(seq({fc(32), relu(), fc(10)}), opts);
    for (const auto& node : k.train->nodes(GraphId::DEEP_FWD_BWD))
      if (node.op == "adam_update") return true;
    return false;
  };
  EXPECT_FALSE(has_early(o));
  o.early_update_min_macs = 3'211'264;
  EXPECT_TRUE(has_early(o));
  o.early_update_min_macs = 3'211'265;
  EXPECT_FALSE(has_early(o));
  o.early_update = CompileOptions::EarlyUpdate::ON;
  o.overlap_weight_gradients = false;  // no side stream to run it on
  CompiledModel n = c.compile(seq({fc(32), relu(), fc(10)}), o);
  for (const auto& node : n.train->nodes(GraphId::DEEP_FWD_BWD)) EXPECT_NE(node.op, "adam_update");
}

// CompileOptions::defer_fc_weight_gradients: each fc weight gradient (side stream) moves after the next fc
// input gradient on the main stream; the nodes themselves are unchanged.
TEST(Compiler, DeferredFcWeightGradientsForkAfterTheNextInputGradient) {
  Compiler c;
  CompileOptions o = mlp_options(256, 0);
  o.fuse_head = false;  // three separate dx / dw pairs
  auto parts = [](const std::vector<GraphNode>& nodes) {
    std::string s;
    for (const GraphNode& n : nodes) {
      if (n.op != "fc_backward") continue;
      FrFcBackwardParams p{};
      std::memcpy(&p, n.params.data(), sizeof p);
      s += n.label + (p.part == 1 ? ":dx " : ":dw ");
    }
    return s;
  };
  const auto model = seq({fc(64), relu(), fc(48), relu(), fc(32), relu(), fc(10)});
  o.defer_fc_weight_gradients = false;
  CompiledModel plain = c.compile(model, o);
  o.defer_fc_weight_gradients = true;
  o.defer_fc_min_macs = 0;  // these layers are small: defer whatever the size
  CompiledModel deferred = c.compile(model, o);
  // By default only input gradients of 1e8 multiply-adds or more are waited for: none here.
  o.defer_fc_min_macs = 100'000'000;
  CompiledModel by_size = c.compile(model, o);
  ASSERT_EQ(parts(by_size.train->nodes(GraphId::DEEP_FWD_BWD)),
            parts(plain.train->nodes(GraphId::DEEP_FWD_BWD)));
  const auto& a = plain.train->nodes(GraphId::DEEP_FWD_BWD);
  const auto& b = deferred.train->nodes(GraphId::DEEP_FWD_BWD);
  ASSERT_EQ(a.size(), b.size());
  // Deep backward of fc3, fc2, fc1 (fc0's is the first layer's graph): dx, dw pairs, then deferred.
  const std::string names = parts(a);
  EXPECT_EQ(std::count(names.begin(), names.end(), ':'), 6);
  std::vector<std::string> tok_a, tok_b;
  for (std::istringstream in(parts(a)); in;) {
    std::string t;
    if (in >> t) tok_a.push_back(t);
  }
  for (std::istringstream in(parts(b)); in;) {
    std::string t;
    if (in >> t) tok_b.push_back(t);
  }
  ASSERT_EQ(tok_a.size(), 6u);
  ASSERT_EQ(tok_b.size(), 6u);
  // plain: L3:dx L3:dw L2:dx L2:dw L1:dx L1:dw; deferred: L3:dx L2:dx L3:dw L1:dx L2:dw L1:dw
  EXPECT_EQ(tok_b[0], tok_a[0]);
  EXPECT_EQ(tok_b[1], tok_a[2]);
  EXPECT_EQ(tok_b[2], tok_a[1]);
  EXPECT_EQ(tok_b[3], tok_a[4]);
  EXPECT_EQ(tok_b[4], tok_a[3]);
  EXPECT_EQ(tok_b[5], tok_a[5]);
  // Without the side stream there is nothing to defer.
  o.overlap_weight_gradients = false;
  CompiledModel serial = c.compile(model, o);
  for (const auto& n : serial.train->nodes(GraphId::DEEP_FWD_BWD)) EXPECT_FALSE(n.side_stream);
}

// CompileOptions::fuse_head: the head's forward, the loss and its input gradient are one node, which masks
// with the previous fc's fused relu (that fc's backward then does not); inference keeps the separate nodes.
TEST(Compiler, FusedHeadIsOneNodeAndTakesThePreviousMask) {
  Compiler c;
  CompileOptions o = mlp_options(256, 0);
  o.fuse_head = true;
  CompiledModel m = c.compile(seq({fc(64), relu(), fc(32), relu(), fc(10)}), o);
  ASSERT_TRUE(m.arch.fused_head);
  const auto& deep = m.train->nodes(GraphId::DEEP_FWD_BWD);
  int fused = 0, losses = 0, forwards = 0;
  for (const auto& n : deep) {
    fused += n.op == "fc_softmax_xent";
    losses += n.op == "softmax_xent";
    forwards += n.op == "fc";
  }
  EXPECT_EQ(fused, 1);
  EXPECT_EQ(losses, 0);
  EXPECT_EQ(forwards, 1);  // fc2 only (fc0 is the first layer's graph)
  // fused node, the head's weight gradient (side stream), then fc2's input gradient without a mask
  ASSERT_GE(deep.size(), 4u);
  EXPECT_EQ(deep[1].op, "fc_softmax_xent");
  FrFcSoftmaxXentParams fp{};
  std::memcpy(&fp, deep[1].params.data(), sizeof fp);
  EXPECT_EQ(fp.mask_input, 1);
  EXPECT_EQ(fp.has_bias, 1);
  EXPECT_EQ(deep[1].in.size(), 4u);   // x, w, labels, b
  EXPECT_EQ(deep[1].out.size(), 3u);  // logits, dlogits, dx
  EXPECT_EQ(deep[2].op, "fc_backward");
  EXPECT_TRUE(deep[2].side_stream);
  FrFcBackwardParams bp{};
  std::memcpy(&bp, deep[3].params.data(), sizeof bp);
  EXPECT_EQ(deep[3].op, "fc_backward");
  EXPECT_EQ(bp.part, 1);
  EXPECT_EQ(bp.relu_mask, 0);
  EXPECT_EQ(deep[3].in.size(), 3u);
  bool inference_loss = false;
  for (const auto& n : m.inference->nodes(GraphId::INF_MAIN_A)) inference_loss |= n.op == "softmax_xent";
  EXPECT_TRUE(inference_loss);
  // Not fused: a head over 32 classes, or a head that is the only trainable layer.
  CompileOptions wide = o;
  wide.num_classes = 40;
  EXPECT_FALSE(c.compile(seq({fc(64), relu(), fc(40)}), wide).arch.fused_head);
  EXPECT_FALSE(c.compile(seq({fc(10)}), o).arch.fused_head);
}

TEST(Compiler, UnfusedGraphKeepsSeparateReluNodes) {
  Compiler c;
  CompileOptions o = mlp_options(256, 0);
  o.fuse_activations = false;
  o.overlap_weight_gradients = false;
  o.fuse_head = false;
  CompiledModel m = c.compile(seq({fc(32), relu(), fc(10)}), o);
  const ComputationGraph& g = *m.train;
  // Deep: relu, fc2, loss, fc2 backward (whole), relu backward.
  ASSERT_EQ(g.nodes(GraphId::DEEP_FWD_BWD).size(), 5u);
  EXPECT_EQ(g.nodes(GraphId::DEEP_FWD_BWD)[0].op, "relu");
  EXPECT_EQ(g.nodes(GraphId::DEEP_FWD_BWD)[4].op, "relu_backward");
  EXPECT_EQ(g.nodes(GraphId::FIRST_LAYER_BWD_A)[0].in.size(), 3u);
}

TEST(Compiler, RejectsBadModels) {
  Compiler c;
  EXPECT_THROW(c.compile(seq({fc(32), relu(), fc(5)}), mlp_options(256, 0)), Error);  // 5 outputs, 10 classes
  EXPECT_THROW(c.compile(seq({relu()}), mlp_options(256, 0)), Error);                 // nothing trainable
  EXPECT_THROW(c.compile(seq({fc(0), fc(10)}), mlp_options(256, 0)), Error);
  EXPECT_THROW(c.compile(seq({fc(-3), fc(10)}), mlp_options(256, 0)), Error);
  EXPECT_THROW(c.compile(BluePrint(), mlp_options(256, 0)), Error);
  try {
    c.compile(seq({fc(32), relu(), fc(5)}), mlp_options(256, 0));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_NE(std::string(e.what()).find("10 classes"), std::string::npos) << e.what();
  }
}

// A schedule the run cannot follow is refused: a warm-up longer than the run (the lr would never reach the
// set rate), a cosine floor above the lr (the schedule would rise).
// Training batchnorm on one value per channel (a last batch of one sample on a 1x1 map) is refused when the
// job compiles, as PyTorch refuses it, not by the kernel in the middle of an epoch.
TEST(Compiler, RejectsBatchnormOverOneValuePerChannel) {
  CompileOptions o = mlp_options(257, 0);  // batches of 128, 128 and 1
  try {
    Compiler().compile(seq({fc(8), bn(), relu(), fc(10)}), o);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_NE(
        std::string(e.what()).find("layer 1 (bn): training needs more than one value per channel, but the "
                                   "last batch (257 samples in batches of 128) has 1 sample on a 1x1 map"),
        std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(Compiler().compile(seq({fc(8), bn(), relu(), fc(10)}), mlp_options(258, 0)));
  // on a map, one sample has several values per channel
  EXPECT_NO_THROW(Compiler().compile(seq({conv(4, 3), bn(), flatten(), fc(10)}), mlp_options(257, 0)));
}

TEST(Compiler, RejectsBatchnormSettingsOutOfRange) {
  for (const auto& [momentum, eps] : {std::pair{1.5f, 1e-5f}, std::pair{-0.1f, 1e-5f}, std::pair{0.1f, 0.0f},
                                      std::pair{0.1f, -1e-3f}, std::pair{NAN, 1e-5f}}) {
    try {
      Compiler().compile(seq({conv(2, 3), bn(momentum, eps), flatten(), fc(10)}), mlp_options(256, 0));
      ADD_FAILURE() << momentum << " " << eps << ": accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
      EXPECT_NE(std::string(e.what()).find("layer 1 (bn): momentum must be in [0, 1] and eps positive"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_NO_THROW(
      Compiler().compile(seq({conv(2, 3), bn(1.0f, 1e-12f), flatten(), fc(10)}), mlp_options(256, 0)));
}

// Sizes beyond what the plans count in are configuration errors, not wrapped products.
TEST(Compiler, RejectsMapsAndTensorsTooLargeToPlan) {
  auto message = [](const BluePrint& bp) -> std::string {
    try {
      Compiler().compile(bp, mlp_options(256, 0));
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
      return e.what();
    }
    return "no error";
  };
  // 28 + 2 * 2^20 wide, 2^20 channels: beyond 64-bit sizes at batch 128
  EXPECT_NE(message(seq({conv(int64_t{1} << 20, 1, 1, int64_t{1} << 20), flatten(), fc(10)}))
                .find("is beyond 64-bit sizes; at most 2^40 bytes per map"),
            std::string::npos);
  // a map that fits, but an fc weight of 2^31 x 2^24 values
  EXPECT_NE(message(seq({conv(int64_t{1} << 11, 1, 1, 100), flatten(), fc(int64_t{1} << 24), fc(10)}))
                .find("is too large (at most 2^40 bytes per tensor)"),
            std::string::npos);
}

TEST(Compiler, RejectsSchedulesTheRunCannotFollow) {
  auto message = [](const CompileOptions& o) -> std::string {
    try {
      Compiler().compile(seq({fc(32), relu(), fc(10)}), o);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
      return e.what();
    }
    return "no error";
  };
  CompileOptions o = mlp_options(256, 0);
  o.total_steps = 3 * o.steps_per_epoch;  // three epochs
  o.scheduler = CosineAnnealingLR().warmup(4);
  EXPECT_NE(message(o).find("a warm-up of 4 epochs is longer than the run (3 epochs)"), std::string::npos)
      << message(o);
  o.scheduler = ConstantLR();
  o.scheduler.warmup_epochs = 4;
  EXPECT_NE(message(o).find("longer than the run"), std::string::npos);
  o.scheduler = CosineAnnealingLR();
  o.scheduler.min_lr = 2 * o.optimizer.lr;
  EXPECT_NE(message(o).find("the cosine schedule would rise"), std::string::npos) << message(o);
  o.scheduler = CosineAnnealingLR().warmup(3);  // as long as the run: accepted
  EXPECT_EQ(message(o), "no error");
}

TEST(Compiler, CustomOpWithoutItsLibraryIsAClearError) {
  Compiler c;
  try {
    c.compile(seq({fc(32), custom("no_such_op"), fc(10)}), mlp_options(256, 0));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_NE(std::string(e.what()).find("layer 1 (custom): no loaded op library declares op 'no_such_op'"),
              std::string::npos)
        << e.what();
  }
}
