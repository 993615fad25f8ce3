// CompileOptions::freeze_first_layer in the plan: FIRST_LAYER_BWD is empty and no update range of any graph
// covers the first conv's weight, in fp32 and in mixed precision with the early update in parts (the update
// split across graphs); a first layer that is not a bias-free conv is refused. The training behaviour is
// tested by tests/e2e/test_freeze_first_layer_cpu.cpp.
#include <gtest/gtest.h>

#include <string>

#include "fresco/core/compiler.h"
#include "fresco/core/error.h"
#include "small_compile_options.h"

using namespace fresco;

namespace {

CompiledModel compile(DType precision, bool freeze, int early_parts = 0) {
  CompileOptions o = test::small_compile_options(8);
  o.precision = precision;
  o.optimizer = SGD(0.9f, true).with_weight_decay(5e-4f);
  o.early_update = CompileOptions::EarlyUpdate::ON;
  o.early_update_parts = early_parts;
  o.freeze_first_layer = freeze;
  return Compiler().compile(test::small_residual_blueprint(), o);
}

// How many update nodes (of every graph) cover bytes of the first conv's weight, and how many there are.
std::pair<int, int> updates_covering_first_weight(const CompiledModel& m) {
  const MemoryPlan& p = m.base_plan();
  const DTensor& w = p.tensor(m.arch.layers[0].weight);
  EXPECT_EQ(w.region, Region::W_FIRST_CONV);
  int covering = 0, updates = 0;
  for (int g = 0; g < kGraphIdCount; ++g)
    for (const GraphNode& n : m.train->nodes(static_cast<GraphId>(g))) {
      if (n.op != "sgd_update") continue;
      ++updates;
      const RegionSpan s = range_bytes(n.rout[0], p, n.label);  // the W part
      const uint64_t lo = static_cast<uint64_t>(w.offset), hi = lo + w.slot_bytes;
      if (s.offset < hi && lo < s.offset + s.bytes) ++covering;
    }
  return {covering, updates};
}
}  // namespace

TEST(FreezeFirstLayerPlan, NoWeightGradientAndNoUpdateOfTheFirstConv) {
  for (DType precision : {DType::F32, DType::BF16, DType::F16})
    for (int parts : {0, 2}) {
      const std::string what = std::string(dtype_name(precision)) + ", early parts " + std::to_string(parts);
      const CompiledModel trained = compile(precision, false, parts);
      EXPECT_FALSE(trained.train->nodes(GraphId::FIRST_LAYER_BWD_A).empty()) << what;
      EXPECT_EQ(updates_covering_first_weight(trained).first, 1) << what;
      const CompiledModel frozen = compile(precision, true, parts);
      EXPECT_TRUE(frozen.train->nodes(GraphId::FIRST_LAYER_BWD_A).empty()) << what;
      EXPECT_TRUE(frozen.train->nodes(GraphId::FIRST_LAYER_BWD_B).empty()) << what;
      const auto [covering, updates] = updates_covering_first_weight(frozen);
      EXPECT_EQ(covering, 0) << what;
      EXPECT_GE(updates, 2) << what;  // the ranges on either side of the hole
      EXPECT_EQ(frozen.arch.layers[0].wgrad_prologue_bn, -1) << what;
      // in mixed precision the batchnorm after the stem has its gradient sums: no dx (weights-only form)
      EXPECT_EQ(frozen.arch.layers[1].dx_by_conv, precision != DType::F32) << what;
      EXPECT_EQ(frozen.arch.layers[1].grad_in == kNoTensor, precision != DType::F32) << what;
    }
}

TEST(FreezeFirstLayerPlan, OnlyABiasFreeFirstConvFreezes) {
  auto message = [](const BluePrint& bp) -> std::string {
    CompileOptions o = test::small_compile_options(8);
    o.freeze_first_layer = true;
    try {
      Compiler().compile(bp, o);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message(seq({fc(32), relu(), fc(10)}))
                .find("must be a bias-free conv (its weight has a region of its own), found fc"),
            std::string::npos);
  EXPECT_NE(message(seq({conv(4, 3, 1, 1, true), flatten(), fc(10)})).find("found conv with a bias"),
            std::string::npos);
  EXPECT_NE(message(seq({conv(10, 8), flatten()})).find("no layer after the first has parameters"),
            std::string::npos);
  EXPECT_EQ(message(seq({conv(4, 3, 1, 1), relu(), flatten(), fc(10)})), "no error");
}
