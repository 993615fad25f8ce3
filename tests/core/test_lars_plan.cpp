// LARS in the Compiler (Optimizer::Type::LARS): one lars_update per conv or fc weight, over exactly that
// tensor's bytes in W, G and M (a frozen first weight left out), one sgd_update without decay over the 1-D
// parameters, and no early update, so in bf16 every weight cast runs after the updates (WEIGHT_CAST).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "fresco/core/compiler.h"
#include "small_compile_options.h"

using namespace fresco;

namespace {
CompiledModel compile(DType precision, bool freeze) {
  CompileOptions o = test::small_compile_options(8);
  o.precision = precision;
  o.optimizer = LARS(0.9f, 0.02f).with_weight_decay(1e-4f);
  o.freeze_first_layer = freeze;
  return Compiler().compile(test::small_residual_blueprint(), o);
}
}  // namespace

TEST(LarsPlan, OneNodePerWeightTensorAndSgdForTheRest) {
  for (bool freeze : {false, true}) {
    SCOPED_TRACE(freeze ? "first layer frozen" : "all trained");
    const CompiledModel m = compile(DType::F32, freeze);
    const MemoryPlan& p = m.base_plan();
    std::set<std::string> updated;
    int sgd = 0;
    for (const GraphNode& n : m.train->nodes(GraphId::OPTIMIZER)) {
      if (n.op == FR_OP_SGD_UPDATE) {
        ++sgd;
        const auto sp = n.params_as<FrSgdParams>();
        ASSERT_TRUE(sp.has_value());
        EXPECT_EQ(sp->weight_decay, 0.0f);
        EXPECT_EQ(sp->nesterov, 0);
        continue;
      }
      if (n.op != FR_OP_LARS_UPDATE) continue;
      const auto lp = n.params_as<FrLarsParams>();
      ASSERT_TRUE(lp.has_value());
      EXPECT_EQ(lp->eta, 0.02f);
      EXPECT_EQ(lp->weight_decay, 1e-4f);
      ASSERT_EQ(n.rin.size(), 2u);
      ASSERT_EQ(n.rout.size(), 2u);
      // W, M and G of one tensor: its bytes and only them
      const RangeRef& w = n.rout[0];
      const int64_t take = w.take;
      bool found = false;
      for (const DTensor& t : p.tensors()) {
        if (region_family(t.region) != Family::W) continue;
        const RegionSpan span = p.region_range(w.first, w.last);
        if (static_cast<uint64_t>(t.offset) == span.offset + w.skip &&
            take == t.shape.numel() * static_cast<int64_t>(sizeof(float))) {
          EXPECT_TRUE(updated.insert(t.name).second) << t.name << " updated twice";
          found = true;
        }
      }
      EXPECT_TRUE(found) << n.label << ": not one weight tensor";
      EXPECT_EQ(n.rout[1].skip, w.skip);
      EXPECT_EQ(n.rin[0].skip, w.skip);
      EXPECT_EQ(n.rin[0].take, take);
    }
    EXPECT_EQ(sgd, 1);
    // every conv and fc weight (the small residual network: 5 convs, 1 fc), the frozen one left out
    EXPECT_EQ(updated.size(), freeze ? 5u : 6u);
  }
  // bf16: no early update, the weight casts after the optimizer
  const CompiledModel b = compile(DType::BF16, false);
  for (const GraphNode& n : b.train->nodes(GraphId::DEEP_FWD_BWD))
    EXPECT_NE(n.op, FR_OP_LARS_UPDATE) << "an early update: " << n.label;
  bool cast = false;
  for (const GraphNode& n : b.train->nodes(GraphId::WEIGHT_CAST)) cast = cast || n.op == FR_OP_CAST_RANGE;
  EXPECT_TRUE(cast);
}
