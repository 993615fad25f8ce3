// Mixed precision in the Compiler (CompileOptions::precision): low-precision maps in F_FP16, fp32 fc and loss
// behind an inserted cast, conv weights with A copies and G16 gradients in lock-step with W, the GRAD_CAST
// and WEIGHT_CAST range casts, and the clear refusals (conv bias, fp16 without loss scaling, bf16 on the
// CPU). The kernels' numerics are checked on a GPU by tests/plugins/cuda/test_cuda_low_precision.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "fresco/core/compiler.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "small_compile_options.h"
#include "update_cases.h"

using namespace fresco;

namespace {

// early_parts 0 by default: the tests of the early parts set them (EarlyPartsUpdate...). The W -> A casts
// as nodes of their own unless `fused` (CompileOptions::fused_weight_cast, the default: FusedWeightCast...),
// and the G16 -> G casts too (CompileOptions::update_from_grads16 OFF; ON and AUTO:
// test_grads16_update_plan.cpp).
CompiledModel compile(DType precision, CompileOptions::EarlyUpdate early = CompileOptions::EarlyUpdate::AUTO,
                      int early_parts = 0, bool fused = false) {
  CompileOptions o = test::small_compile_options(8);
  o.precision = precision;
  o.early_update = early;
  o.early_update_parts = early_parts;
  o.fused_weight_cast = fused;
  o.update_from_grads16 = CompileOptions::Grads16Update::OFF;
  return Compiler().compile(test::small_residual_blueprint(), o);
}

std::vector<const GraphNode*> nodes_of(const CompiledModel& m, const std::string& op) {
  std::vector<const GraphNode*> out;
  for (int g = 0; g < kGraphIdCount; ++g)
    for (const GraphNode& n : m.train->nodes(static_cast<GraphId>(g)))
      if (n.op == op) out.push_back(&n);
  return out;
}
}  // namespace

TEST(MixedPrecisionPlan, Bf16MapsConvCopiesAndOneCastBeforeTheFc) {
  const CompiledModel m = compile(DType::BF16);
  const MemoryPlan& p = m.base_plan();
  const auto& layers = m.arch.layers;
  EXPECT_EQ(m.arch.input_dtype, DType::BF16);
  EXPECT_EQ(p.tensor(m.t.input_f32).region, Region::F_FP16);
  int casts = 0, convs = 0;
  for (const LayerDescriptor& l : layers) {
    if (l.kind == LayerKind::CAST) {
      ++casts;
      EXPECT_EQ(l.out_dtype, DType::F32);
      EXPECT_EQ(layers[static_cast<size_t>(l.input)].kind, LayerKind::GAP);
      EXPECT_EQ(layers[static_cast<size_t>(l.index + 1)].kind, LayerKind::FC);
      // forward f32 output, and backward the fc's f32 input gradient cast back to bf16 for the gap
      EXPECT_EQ(p.tensor(l.out).dtype, DType::F32);
      EXPECT_EQ(p.tensor(l.grad_in).dtype, DType::BF16);
    } else if (l.kind == LayerKind::FC) {
      EXPECT_EQ(p.tensor(l.out).dtype, DType::F32);
    } else {
      EXPECT_EQ(l.out_dtype, DType::BF16) << l.name;
      if (l.out != kNoTensor) {
        EXPECT_EQ(p.tensor(l.out).region, Region::F_FP16) << l.name;
      }
    }
    if (l.kind == LayerKind::CONV) {
      ++convs;
      ASSERT_NE(l.compute_weight, kNoTensor);
      ASSERT_NE(l.grad_weight_low, kNoTensor);
      EXPECT_EQ(p.tensor(l.compute_weight).dtype, DType::BF16);
      EXPECT_EQ(region_family(p.tensor(l.compute_weight).region), Family::A);
      EXPECT_EQ(region_family(p.tensor(l.grad_weight_low).region), Family::G16);
      EXPECT_EQ(2 * p.tensor(l.compute_weight).slot_bytes, p.tensor(l.weight).slot_bytes);
    }
  }
  EXPECT_EQ(casts, 1);
  EXPECT_EQ(convs, 5);
  // The conv nodes read the A copy and write the G16 gradient.
  for (const GraphNode* n : nodes_of(m, "conv2d"))
    EXPECT_EQ(region_family(p.tensor(n->in[1]).region), Family::A);
  int weight_parts = 0, input_parts = 0;
  for (const GraphNode* n : nodes_of(m, "conv2d_backward")) {
    FrConvBackwardParams bp{};
    std::memcpy(&bp, n->params.data(), sizeof bp);
    if (bp.part == 1) {  // the input gradient (main stream): a bf16 map
      ++input_parts;
      EXPECT_EQ(p.tensor(n->out[0]).dtype, DType::BF16);
      EXPECT_TRUE(n->join_side);
    } else {  // the weight gradient, alone on the side stream or in a whole backward (first layer)
      ++weight_parts;
      EXPECT_EQ(region_family(p.tensor(n->out[0]).region), Family::G16);
      EXPECT_EQ(n->side_stream, bp.part == 2);
    }
  }
  EXPECT_EQ(weight_parts,
            6);  // four deep convs, the first conv's (whole) backward in FIRST_LAYER_BWD_A and _B
  EXPECT_EQ(input_parts, 4);  // every conv but the first
  // One range cast each way, over the conv kinds only (BN and fc parameters stay fp32 end to end); with
  // the early update (AUTO in bf16) GRAD_CAST casts the first conv's part (Bf16EarlyUpdate... below).
  ASSERT_EQ(m.train->nodes(GraphId::GRAD_CAST).size(), 1u);
  ASSERT_EQ(m.train->nodes(GraphId::WEIGHT_CAST).size(), 1u);
  const GraphNode& gc = m.train->nodes(GraphId::GRAD_CAST)[0];
  EXPECT_EQ(gc.op, "cast_range");
  EXPECT_EQ(gc.rin[0].dtype, DType::BF16);
  EXPECT_EQ(gc.rout[0].dtype, DType::F32);
  const RegionSpan g16 = p.region_range(Region::G16_FIRST_CONV, Region::G16_DEEP_CONV);
  const RegionSpan g32 = p.region_range(Region::G_FIRST_CONV, Region::G_DEEP_CONV);
  EXPECT_EQ(2 * g16.bytes, g32.bytes);
  EXPECT_GT(g16.bytes, 0u);
  EXPECT_EQ(p.region(Region::G16_BN_WEIGHT).bytes, 0u);
  EXPECT_EQ(nodes_of(m, "cast").size(), 2u);  // the cast layer forward and backward
}

TEST(MixedPrecisionPlan, Fp32HasNoCastsAndNoLowPrecisionCopies) {
  const CompiledModel m = compile(DType::F32);
  for (const LayerDescriptor& l : m.arch.layers) {
    EXPECT_NE(l.kind, LayerKind::CAST);
    EXPECT_EQ(l.compute_weight, kNoTensor);
  }
  EXPECT_TRUE(m.train->empty(GraphId::GRAD_CAST));
  EXPECT_TRUE(m.train->empty(GraphId::WEIGHT_CAST));
  EXPECT_EQ(m.base_plan().region(Region::F_FP16).bytes, 0u);
}

TEST(MixedPrecisionPlan, RefusalsAreClearErrors) {
  CompileOptions o = test::small_compile_options(8);
  o.precision = DType::BF16;
  try {
    Compiler().compile(seq({conv(8, 3, 1, 1, true), relu(), gap(), fc(10)}), o);
    ADD_FAILURE() << "conv bias in bf16 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_NE(std::string(e.what()).find("conv bias is not supported in mixed precision"), std::string::npos)
        << e.what();
  }
  for (DType p : {DType::F16, DType::BF16}) {
    DeepLearningTask t;
    t.model(seq({conv(8, 3, 1, 1), bn(), relu(), gap(), fc(4)}))
        .data(data::synthetic_patches(16, 1), data::synthetic_patches(8, 2))
        .batch_size(4)
        .device("cpu")
        .precision(p);
    t.plan();  // planning (and inspecting) a low-precision job works anywhere
    EXPECT_EQ(t.compiled().arch.input_dtype, p);
    try {
      t.compile();
      ADD_FAILURE() << dtype_name(p) << " on the cpu accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
      EXPECT_NE(std::string(e.what()).find("runs on a GPU only"), std::string::npos) << e.what();
    }
  }
}

TEST(MixedPrecisionPlan, Fp16ScalesTheLossUnscalesEveryGradientAndUpdatesTheScale) {
  const CompiledModel m = compile(DType::F16);
  const auto loss = nodes_of(m, "fc_softmax_xent");  // the fused head (CompileOptions::fuse_head)
  ASSERT_EQ(loss.size(), 1u);
  ASSERT_EQ(loss[0]->rin.size(), 1u);  // the step scalars: the gradient leaves the loss scaled
  EXPECT_TRUE(nodes_of(m, "softmax_xent").empty());
  // The conv gradients are cast and unscaled in one pass (unscale_grads with a G16 source): the first conv's
  // in NAN_CHECK_AND_GRAD_SCALING, the others at the end of DEEP_FWD_BWD on the side stream (AUTO's early
  // update, which in fp16 prepares the gradients but leaves the update to OPTIMIZER); the fp32 gradients
  // (batchnorm, fc) are unscaled in place. GRAD_CAST stays empty.
  EXPECT_TRUE(m.train->empty(GraphId::GRAD_CAST));
  const auto& check = m.train->nodes(GraphId::NAN_CHECK_AND_GRAD_SCALING);
  ASSERT_EQ(check.size(), 2u);
  const uint64_t cut16 = m.base_plan().tensor(m.arch.layers[0].grad_weight_low).slot_bytes;
  EXPECT_EQ(check[0].op, "unscale_grads");
  ASSERT_EQ(check[0].rin.size(), 1u);
  EXPECT_EQ(check[0].rin[0].first, Region::G16_FIRST_CONV);
  EXPECT_EQ(check[0].rin[0].dtype, DType::F16);
  EXPECT_EQ(check[0].rin[0].take, static_cast<int64_t>(cut16));
  EXPECT_EQ(check[0].rout[0].first, Region::G_FIRST_CONV);
  EXPECT_EQ(check[0].rout[0].take, static_cast<int64_t>(2 * cut16));
  EXPECT_EQ(check[1].op, "unscale_grads");
  EXPECT_TRUE(check[1].rin.empty());
  EXPECT_EQ(check[1].rout[0].first, Region::G_BN_BIAS);
  EXPECT_EQ(check[1].rout[0].last, Region::G_FC_WEIGHT);
  const GraphNode& early = m.train->nodes(GraphId::DEEP_FWD_BWD).back();
  EXPECT_EQ(early.op, "unscale_grads");
  EXPECT_TRUE(early.side_stream);
  EXPECT_EQ(early.rin[0].skip, cut16);
  EXPECT_EQ(early.rout[0].skip, 2 * cut16);
  for (const GraphNode& n : m.train->nodes(GraphId::DEEP_FWD_BWD)) EXPECT_NE(n.op, "sgd_update");
  // OFF: the whole conv range in one pass, after the first layer's backward.
  const CompiledModel off = compile(DType::F16, CompileOptions::EarlyUpdate::OFF);
  ASSERT_EQ(off.train->nodes(GraphId::NAN_CHECK_AND_GRAD_SCALING).size(), 2u);
  EXPECT_EQ(off.train->nodes(GraphId::NAN_CHECK_AND_GRAD_SCALING)[0].rin[0].take, -1);
  EXPECT_NE(off.train->nodes(GraphId::DEEP_FWD_BWD).back().op, "unscale_grads");
  const auto& opt = m.train->nodes(GraphId::OPTIMIZER);
  ASSERT_GE(opt.size(), 3u);
  EXPECT_EQ(opt[opt.size() - 2].op, "loss_scale_update");  // after the updates, before step_done
  EXPECT_EQ(opt.back().op, "step_done");
  // bf16 has none of this
  const CompiledModel b = compile(DType::BF16);
  EXPECT_TRUE(b.train->empty(GraphId::NAN_CHECK_AND_GRAD_SCALING));
  ASSERT_EQ(nodes_of(b, "fc_softmax_xent").size(), 1u);
  EXPECT_TRUE(nodes_of(b, "fc_softmax_xent")[0]->rin.empty());
}

// bf16 with a first conv: the early update (AUTO) casts, updates and casts back (W -> A) every parameter
// stored after the first conv's at the end of DEEP_FWD_BWD on the side stream; GRAD_CAST and OPTIMIZER keep
// the first conv's part (and the parameters stored before it), and the step runs no WEIGHT_CAST (which stays
// whole for the host's writes). fp16 never updates early: its skip decision needs every gradient.
TEST(MixedPrecisionPlan, Bf16EarlyUpdateCastsAndUpdatesTheDeepPartsBesideTheFirstLayer) {
  const CompiledModel m = compile(DType::BF16);
  const MemoryPlan& p = m.base_plan();
  const LayerDescriptor& first = m.arch.layers[0];
  ASSERT_EQ(first.kind, LayerKind::CONV);
  const uint64_t cut16 = p.tensor(first.grad_weight_low).slot_bytes;  // the first conv is stored first
  ASSERT_EQ(static_cast<uint64_t>(p.tensor(first.grad_weight_low).offset),
            p.region_range(Region::G16_FIRST_CONV, Region::G16_DEEP_CONV).offset);
  const auto& gc = m.train->nodes(GraphId::GRAD_CAST);
  ASSERT_EQ(gc.size(), 1u);
  EXPECT_EQ(gc[0].rin[0].skip, 0u);
  EXPECT_EQ(gc[0].rin[0].take, static_cast<int64_t>(cut16));
  EXPECT_EQ(gc[0].rout[0].take, static_cast<int64_t>(2 * cut16));
  // DEEP_FWD_BWD ends with the deep gradients' cast, their update and the weights' cast, on the side stream.
  const auto& deep = m.train->nodes(GraphId::DEEP_FWD_BWD);
  ASSERT_GE(deep.size(), 3u);
  const GraphNode &cast = deep[deep.size() - 3], &update = deep[deep.size() - 2], &back = deep.back();
  for (const GraphNode* n : {&cast, &update, &back}) {
    EXPECT_TRUE(n->side_stream);
    EXPECT_FALSE(n->detached);  // no early parts (compile(): 0)
  }
  EXPECT_EQ(cast.op, "cast_range");
  EXPECT_EQ(cast.rin[0].skip, cut16);
  EXPECT_EQ(cast.rin[0].take, -1);
  EXPECT_EQ(cast.rout[0].skip, 2 * cut16);
  EXPECT_EQ(cast.rout[0].first, Region::G_FIRST_CONV);
  EXPECT_EQ(update.op, "sgd_update");
  EXPECT_EQ(back.op, "cast_range");
  EXPECT_EQ(back.rin[0].first, Region::W_FIRST_CONV);
  EXPECT_EQ(back.rin[0].skip, 2 * cut16);
  EXPECT_EQ(back.rout[0].first, Region::A_FIRST_CONV);
  EXPECT_EQ(back.rout[0].skip, cut16);
  EXPECT_EQ(back.rout[0].take, -1);
  // One parameter group (no no-decay split): OPTIMIZER keeps what is stored up to the first conv's end.
  const RegionSpan group = p.region_range(Region::W_BN_BIAS, Region::W_DEEP_CONV);
  const DTensor& w0 = p.tensor(first.weight);
  const uint64_t cut = static_cast<uint64_t>(w0.offset) + w0.slot_bytes - group.offset;
  EXPECT_EQ(update.rin[0].skip, cut);
  EXPECT_EQ(update.rin[0].take, -1);
  const auto& opt = m.train->nodes(GraphId::OPTIMIZER);
  ASSERT_EQ(opt.size(), 3u);
  EXPECT_EQ(opt[0].op, "sgd_update");
  EXPECT_EQ(opt[0].rin[0].skip, 0u);
  EXPECT_EQ(opt[0].rin[0].take, static_cast<int64_t>(cut));
  EXPECT_EQ(opt[1].op, "cast_range");  // the first conv's W -> A
  EXPECT_EQ(opt[1].rout[0].take, static_cast<int64_t>(cut16));
  EXPECT_EQ(opt[2].op, "step_done");
  EXPECT_FALSE(m.weight_cast_in_step);
  ASSERT_EQ(m.train->nodes(GraphId::WEIGHT_CAST).size(), 1u);
  EXPECT_EQ(m.train->nodes(GraphId::WEIGHT_CAST)[0].rin[0].take, -1);
  // OFF: one cast and the whole group after the first layer's backward, and WEIGHT_CAST in the step.
  const CompiledModel late = compile(DType::BF16, CompileOptions::EarlyUpdate::OFF);
  for (const GraphNode& n : late.train->nodes(GraphId::DEEP_FWD_BWD)) {
    EXPECT_NE(n.op, "sgd_update");
    EXPECT_NE(n.op, "cast_range");
  }
  ASSERT_EQ(late.train->nodes(GraphId::GRAD_CAST).size(), 1u);
  EXPECT_EQ(late.train->nodes(GraphId::GRAD_CAST)[0].rin[0].take, -1);
  EXPECT_TRUE(late.weight_cast_in_step);
  // fp16 forced on: the gradients are prepared early, never updated there (Fp16ScalesTheLoss... above).
  const CompiledModel forced = compile(DType::F16, CompileOptions::EarlyUpdate::ON);  // alive for the loop
  for (const GraphNode& n : forced.train->nodes(GraphId::DEEP_FWD_BWD)) EXPECT_NE(n.op, "sgd_update");
}

// CompileOptions::early_update_parts: the last deep convs' weights cast, updated and cast back on the
// detached stream right after a join that waits for their first layer's weight gradient (a full join, or a
// lagged one past another join: CompileOptions::conv_join_lag_max); the end of DEEP_FWD_BWD keeps the rest,
// and the parts tile the deep conv bytes from the end without gaps, in W, G, G16 and A alike.
TEST(MixedPrecisionPlan, EarlyPartsUpdateTheLastLayersAfterTheirWeightGradients) {
  EXPECT_EQ(CompileOptions{}.early_update_parts, 5);  // the default
  // a stem and five deep convs of equal size (cbr: conv, bn, relu): two parts of two, one left
  std::vector<LayerSpec> layers;
  for (int i = 0; i < 6; ++i)
    for (const LayerSpec& l : cbr(8, 3, 1, 1)) layers.push_back(l);
  layers.push_back(gap());
  layers.push_back(fc(10));
  const BluePrint plain(layers);
  for (int64_t lag : {int64_t{0}, int64_t{1} << 20}) {
    CompileOptions o = test::small_compile_options(8);
    o.precision = DType::BF16;
    o.early_update_parts = 2;
    o.conv_join_lag_max = lag;
    o.fused_weight_cast = false;  // the casts as nodes (fused: FusedWeightCast... below)
    o.update_from_grads16 = CompileOptions::Grads16Update::OFF;
    const CompiledModel m = Compiler().compile(plain, o);
    const MemoryPlan& p = m.base_plan();
    const auto& deep = m.train->nodes(GraphId::DEEP_FWD_BWD);
    std::vector<size_t> detached;  // the parts' nodes (detached unless no join waits for them, below)
    for (size_t i = 0; i < deep.size(); ++i)
      if (deep[i].label.find("(early part ") != std::string::npos) detached.push_back(i);
    ASSERT_EQ(detached.size(), 6u) << "lag " << lag;  // two parts of three nodes
    const RegionSpan conv = p.region_range(Region::W_FIRST_CONV, Region::W_DEEP_CONV);
    const RegionSpan group = p.region_range(Region::W_BN_BIAS, Region::W_DEEP_CONV);
    const auto slot = static_cast<int64_t>(p.tensor(p.tensors_in(Region::W_DEEP_CONV)[0]).slot_bytes);
    uint64_t hi = conv.bytes;  // each part ends where the one before it (a later layer's) begins
    for (size_t k = 0; k < 2; ++k) {
      const GraphNode &cast = deep[detached[3 * k]], &update = deep[detached[3 * k + 1]],
                      &back = deep[detached[3 * k + 2]];
      EXPECT_EQ(detached[3 * k + 2], detached[3 * k] + 2);  // together
      EXPECT_EQ(cast.op, "cast_range");
      EXPECT_EQ(update.op, "sgd_update");
      EXPECT_EQ(back.op, "cast_range");
      for (const GraphNode* n : {&cast, &update, &back}) EXPECT_TRUE(n->side_stream);
      const uint64_t lo = back.rin[0].skip;  // W -> A: W bytes of the conv span
      const int64_t take = back.rin[0].take;
      ASSERT_EQ(take, 2 * slot) << "part " << k;  // two convs of 8 x 3 x 3 x 8 floats
      EXPECT_EQ(lo + static_cast<uint64_t>(take), hi) << "part " << k;
      EXPECT_EQ(back.rout[0].skip, lo / 2);  // A: half the bytes
      EXPECT_EQ(back.rout[0].take, take / 2);
      EXPECT_EQ(cast.rin[0].skip, lo / 2);  // G16 -> G
      EXPECT_EQ(cast.rin[0].take, take / 2);
      EXPECT_EQ(cast.rout[0].skip, lo);
      EXPECT_EQ(cast.rout[0].take, take);
      EXPECT_EQ(update.rin[0].skip, lo + conv.offset - group.offset);
      EXPECT_EQ(update.rin[0].take, take);
      // the part's first tensor is a deep conv weight; a join that waits for that layer's weight gradient
      // comes between it and the part
      const uint64_t at = conv.offset + lo;
      int layer = -1;
      for (TensorId id : p.tensors_in(Region::W_DEEP_CONV))
        if (static_cast<uint64_t>(p.tensor(id).offset) == at) layer = p.tensor(id).layer;
      ASSERT_GE(layer, 0) << "part " << k << " does not start at a tensor";
      const TensorId grad = m.arch.layers[static_cast<size_t>(layer)].grad_weight_low;
      size_t wgrad = deep.size();
      for (size_t i = 0; i < deep.size(); ++i)
        if (std::find(deep[i].out.begin(), deep[i].out.end(), grad) != deep[i].out.end()) wgrad = i;
      ASSERT_LT(wgrad, detached[3 * k]);
      EXPECT_TRUE(deep[wgrad].side_stream);
      int joins = 0;
      bool waits = false;
      for (size_t i = wgrad + 1; i < detached[3 * k]; ++i) {
        if (!deep[i].join_side) continue;
        waits = waits || !deep[i].join_lag || joins > 0;
        ++joins;
      }
      if (cast.detached) {
        EXPECT_TRUE(waits) << "lag " << lag << " part " << k << ": no join waits for the weight gradient";
        EXPECT_TRUE(deep[detached[3 * k] - 1].join_side);  // right after it
        EXPECT_TRUE(update.detached && back.detached);
      } else {  // with lagged joins the last part may find none: then on the side stream after the gradient
        EXPECT_FALSE(waits);
        EXPECT_TRUE(lag > 0 && k == 1) << "part " << k;
        EXPECT_FALSE(update.detached || back.detached);
      }
      hi = lo;
    }
    // the end of DEEP_FWD_BWD: the rest, up to the last part's start (the first deep conv)
    const GraphNode* rest_ptr = nullptr;
    for (const GraphNode& n : deep)
      if (n.label == "weight cast (early)") rest_ptr = &n;
    ASSERT_NE(rest_ptr, nullptr);
    const GraphNode& rest = *rest_ptr;
    EXPECT_EQ(rest.op, "cast_range");
    EXPECT_FALSE(rest.detached);
    EXPECT_EQ(rest.rin[0].skip + static_cast<uint64_t>(rest.rin[0].take), hi);
    EXPECT_EQ(rest.rin[0].take, slot);
  }
}

// CompileOptions::fused_weight_cast (the default): in mixed precision every update of conv weights writes
// their A copy (ops.h, the weight copy: a last range output of the precision's dtype), so no W -> A
// cast_range runs in the step and the step runs no WEIGHT_CAST (which stays whole for the host's writes).
// Over the step's graphs the copies tile the A span of the conv kinds exactly once (a frozen first conv's
// left out: its A is written by the host's cast only), each in lock-step with the W bytes its update
// covers; the parameters stored before the first conv are updated by nodes without a copy. bf16 with and
// without the early update and its parts, fp16 (whose update has no parts), SGD with one parameter group or
// two (no_decay_1d), AdamW, a frozen first layer; fp32 has no copies.
TEST(MixedPrecisionPlan, FusedWeightCastWritesEveryConvWeightCopyOnceFromItsUpdate) {
  EXPECT_TRUE(CompileOptions{}.fused_weight_cast);  // the default
  const std::vector<test::UpdateCase> cases = {{DType::BF16, CompileOptions::EarlyUpdate::AUTO, 0},
                                               {DType::BF16, CompileOptions::EarlyUpdate::AUTO, 2},
                                               {DType::BF16, CompileOptions::EarlyUpdate::OFF, 0},
                                               {DType::BF16, CompileOptions::EarlyUpdate::AUTO, 2, 1},
                                               {DType::BF16, CompileOptions::EarlyUpdate::AUTO, 0, 2},
                                               {DType::BF16, CompileOptions::EarlyUpdate::AUTO, 2, 0, true},
                                               {DType::F16, CompileOptions::EarlyUpdate::AUTO, 0},
                                               {DType::F16, CompileOptions::EarlyUpdate::AUTO, 2, 2},
                                               {DType::F16, CompileOptions::EarlyUpdate::OFF, 0, 1, true}};
  for (const test::UpdateCase& c : cases) {
    const std::string name = test::update_case_name(c);
    const CompileOptions o = test::update_case_options(c);
    const CompiledModel m = Compiler().compile(test::small_residual_blueprint(), o);
    const MemoryPlan& p = m.base_plan();
    EXPECT_FALSE(m.weight_cast_in_step) << name;
    ASSERT_EQ(m.train->nodes(GraphId::WEIGHT_CAST).size(), 1u) << name;
    EXPECT_EQ(m.train->nodes(GraphId::WEIGHT_CAST)[0].rin[0].take, -1) << name;
    const RegionSpan conv = p.region_range(Region::W_FIRST_CONV, Region::W_DEEP_CONV);
    std::vector<std::pair<uint64_t, uint64_t>> copies;  // [lo, hi) in W bytes of the conv span
    for (int g = 0; g < kGraphIdCount; ++g) {
      if (static_cast<GraphId>(g) == GraphId::WEIGHT_CAST) continue;  // outside the step
      for (const GraphNode& n : m.train->nodes(static_cast<GraphId>(g))) {
        if (n.op == "cast_range") {
          EXPECT_NE(n.rout[0].first, Region::A_FIRST_CONV) << name << ": a W -> A cast in " << n.label;
        }
        if (n.op != "sgd_update" && n.op != "adam_update") continue;
        const RangeRef& w = n.rout[0];
        const RegionSpan group = p.region_range(w.first, w.last);
        const uint64_t lo = group.offset + w.skip;  // arena offsets
        const uint64_t hi = w.take < 0 ? group.offset + group.bytes : lo + static_cast<uint64_t>(w.take);
        if (n.rout.back().dtype == DType::F32) {  // no copy: stored before the first conv
          EXPECT_LE(hi, conv.offset) << name << ": " << n.label;
          continue;
        }
        EXPECT_EQ(n.rout.size(), n.op == "adam_update" ? 4u : m.options.optimizer.uses_m() ? 3u : 2u) << name;
        const RangeRef& a = n.rout.back();
        EXPECT_EQ(a.dtype, c.precision);
        EXPECT_EQ(a.first, Region::A_FIRST_CONV);
        EXPECT_EQ(a.last, Region::A_DEEP_CONV);
        ASSERT_GE(lo, conv.offset) << name << ": " << n.label;
        EXPECT_EQ(a.skip, (lo - conv.offset) / 2) << name << ": " << n.label;
        EXPECT_EQ(a.take, w.take < 0 ? -1 : w.take / 2) << name << ": " << n.label;
        copies.emplace_back(lo - conv.offset, hi - conv.offset);
      }
    }
    std::sort(copies.begin(), copies.end());
    ASSERT_FALSE(copies.empty()) << name;
    // a frozen first conv (stored first) is no update's: the copies start past it
    uint64_t at = c.freeze ? p.tensor(m.arch.layers[0].weight).slot_bytes : 0;
    for (const auto& [lo, hi] : copies) {
      EXPECT_EQ(lo, at) << name << ": the copies leave a gap or overlap";
      at = hi;
    }
    EXPECT_EQ(at, conv.bytes) << name;
  }
  // fp32 has no A (LARS keeps its casts: test_lars_plan.cpp)
  const CompiledModel f32 = compile(DType::F32, CompileOptions::EarlyUpdate::AUTO, 0, true);
  for (const GraphNode* n : nodes_of(f32, "sgd_update")) EXPECT_EQ(n->rout.back().dtype, DType::F32);
}
