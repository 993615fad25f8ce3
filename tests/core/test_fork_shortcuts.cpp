// CompileOptions::fork_shortcuts: a projection shortcut's layers are emitted on the side stream before their
// block's main branch, the join waits for them, and the maps they touch are planned live from the fork
// (compiler/emit_layers.cpp, forked_branch; compiler/memory_planning.cpp, fit_feature_lifetimes). The CPU
// training with it is in tests/e2e/test_fork_shortcuts_cpu.cpp; the overlap itself is timed on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fresco/core/compiler.h"
#include "small_compile_options.h"

using namespace fresco;

namespace {
// A stem, an identity block and a projection block (stride 2, a 1x1 conv and a bn on the shortcut).
BluePrint two_blocks() {
  return seq({conv(8, 3, 1, 1), bn(), relu(),
              residual({conv(8, 3, 1, 1), bn(), relu(), conv(8, 3, 1, 1), bn()}), relu(),
              residual({conv(16, 3, 2, 1), bn(), relu(), conv(16, 3, 1, 1), bn()}, {conv(16, 1, 2, 0), bn()}),
              relu(), gap(), fc(10)});
}

CompiledModel compile(bool fork) {
  CompileOptions o = test::rgb_compile_options(8, 4);
  o.fork_shortcuts = fork;
  return Compiler().compile(two_blocks(), o);
}

// The forward part of DEEP_FWD_BWD: the nodes before the loss.
std::vector<GraphNode> forward_nodes(const CompiledModel& m) {
  std::vector<GraphNode> out;
  for (const GraphNode& n : m.train->nodes(GraphId::DEEP_FWD_BWD)) {
    if (n.op == "softmax_xent" || n.op == "fc_softmax_xent") break;
    out.push_back(n);
  }
  return out;
}

std::vector<std::string> sorted_labels(const std::vector<GraphNode>& nodes) {
  std::vector<std::string> l;
  for (const GraphNode& n : nodes) l.push_back(n.op + " " + n.label);
  std::sort(l.begin(), l.end());
  return l;
}
}  // namespace

TEST(ForkShortcuts, TheProjectionRunsOnTheSideStreamBeforeTheMainBranchAndTheJoinWaits) {
  const CompiledModel off = compile(false), on = compile(true);
  const std::vector<GraphNode> f_off = forward_nodes(off), f_on = forward_nodes(on);
  EXPECT_EQ(sorted_labels(f_off), sorted_labels(f_on));  // the same nodes, reordered
  for (const GraphNode& n : f_off) EXPECT_FALSE(n.side_stream || n.join_side) << n.label;
  std::vector<size_t> side;
  for (size_t i = 0; i < f_on.size(); ++i)
    if (f_on[i].side_stream) side.push_back(i);
  ASSERT_FALSE(side.empty());
  // the shortcut's conv (1x1, stride 2) is the first side node; the main branch's first conv reads the same
  // map and comes after every side node; the first join after them waits for the side stream
  const GraphNode& proj = f_on[side.front()];
  ASSERT_EQ(proj.op, "conv2d") << proj.label;
  const std::optional<FrConvParams> pp = proj.params_as<FrConvParams>();
  ASSERT_TRUE(pp.has_value());
  EXPECT_EQ(pp->kh, 1);
  EXPECT_EQ(pp->stride_h, 2);
  for (size_t k = 1; k < side.size(); ++k) EXPECT_EQ(side[k], side[k - 1] + 1);  // one run of side nodes
  size_t main_first = f_on.size();
  for (size_t i = side.back() + 1; i < f_on.size(); ++i)
    if (f_on[i].op == "conv2d" && f_on[i].in[0] == proj.in[0]) {
      main_first = i;
      break;
    }
  ASSERT_LT(main_first, f_on.size()) << "no main-branch conv reads the shortcut's input after it";
  size_t join = f_on.size();
  for (size_t i = main_first; i < f_on.size(); ++i)
    if (f_on[i].op == "batchnorm_add" || f_on[i].op == "add" || f_on[i].op == "add_relu") {
      join = i;
      break;
    }
  ASSERT_LT(join, f_on.size());
  EXPECT_TRUE(f_on[join].join_side) << f_on[join].label;
  EXPECT_FALSE(f_on[join].side_stream);
  for (size_t i = 0; i < f_on.size(); ++i) EXPECT_EQ(f_on[i].join_side, i == join) << f_on[i].label;
}

// What the forked nodes write is live from the fork, so no map the main branch uses meanwhile shares its
// bytes; every other map keeps its lifetime.
TEST(ForkShortcuts, TheForkedMapsLiveFromTheFork) {
  const CompiledModel off = compile(false), on = compile(true);
  std::map<std::string, std::pair<int, int>> life_off;
  for (const DTensor& d : off.base_plan().tensors())
    if (region_family(d.region) == Family::F) life_off[d.name] = {d.live_begin, d.live_end};
  std::vector<TensorId> forked;
  for (const GraphNode& n : forward_nodes(on))
    if (n.side_stream)
      for (TensorId id : n.out) forked.push_back(id);
  ASSERT_FALSE(forked.empty());
  int earlier = 0;
  for (const DTensor& d : on.base_plan().tensors()) {
    if (region_family(d.region) != Family::F) continue;
    ASSERT_TRUE(life_off.count(d.name)) << d.name;
    const auto [b, e] = life_off[d.name];
    EXPECT_LE(d.live_begin, b) << d.name;
    EXPECT_GE(d.live_end, e) << d.name;
    const bool is_forked = std::find(forked.begin(), forked.end(), d.id) != forked.end();
    if (!is_forked) {
      EXPECT_EQ(d.live_begin, b) << d.name;
    }
    earlier += is_forked && d.live_begin < b;
  }
  EXPECT_GT(earlier, 0);
  // no two F tensors that share bytes are live at once (the planner's rule, checked on the forked plan)
  const auto& ts = on.base_plan().tensors();
  for (size_t i = 0; i < ts.size(); ++i)
    for (size_t j = i + 1; j < ts.size(); ++j) {
      const DTensor &a = ts[i], &b = ts[j];
      if (region_family(a.region) != Family::F || a.region != b.region) continue;
      const bool bytes = a.offset < b.offset + static_cast<int64_t>(b.slot_bytes) &&
                         b.offset < a.offset + static_cast<int64_t>(a.slot_bytes);
      const bool live = a.live_begin <= b.live_end && b.live_begin <= a.live_end;
      EXPECT_FALSE(bytes && live) << a.name << " and " << b.name;
    }
}

TEST(ForkShortcuts, IdentityShortcutsForkNothingAndProjectionsForkByDefault) {
  EXPECT_TRUE(CompileOptions{}.fork_shortcuts);
  CompileOptions o = test::rgb_compile_options(8, 4);
  o.fork_shortcuts = true;
  const CompiledModel m = Compiler().compile(
      seq({conv(8, 3, 1, 1), bn(), relu(), residual({conv(8, 3, 1, 1), bn(), relu(), conv(8, 3, 1, 1), bn()}),
           relu(), gap(), fc(10)}),
      o);
  for (const GraphNode& n : forward_nodes(m)) EXPECT_FALSE(n.side_stream || n.join_side) << n.label;
}
