// Inspection outputs (fresco plan / fresco graph) of jobs planned on the CPU from small synthetic datasets:
// the SVG lists every DTensor of the base plan exactly once at the plan's offset and is well-formed XML; F
// tensors that share bytes sit in different lanes; the text summary names every non-empty region and variant;
// the DOT outputs name every non-empty GraphId and show shared captures; names are escaped. Checked on the
// MLP and on ResNet-18 (CIFAR form, 32x32x3).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/inspect.h"
#include "fresco/core/job.h"
#include "fresco/core/models.h"

using namespace fresco;

namespace {

data::Dataset synthetic(int64_t n, const std::string& name, int64_t hw = 28, int64_t c = 1) {
  data::Dataset d;
  d.name = name;
  d.n = n;
  d.h = hw;
  d.w = hw;
  d.c = c;
  d.num_classes = 10;
  d.images.resize(static_cast<size_t>(n * hw * hw * c));
  for (size_t i = 0; i < d.images.size(); ++i) d.images[i] = static_cast<uint8_t>(i * 37 % 251);
  for (int64_t i = 0; i < n; ++i) d.labels.push_back(static_cast<int32_t>(i % 10));
  return d;
}

// Plans (data + Compiler only, no device) a model on 28x28x1 inputs with 10 classes.
std::unique_ptr<DeepLearningTask> planned(BluePrint bp, int64_t train_n, int64_t test_n) {
  auto t = std::make_unique<DeepLearningTask>();
  t->model(std::move(bp))
      .data(synthetic(train_n, "synthetic/train"), synthetic(test_n, "synthetic/test"))
      .batch_size(128)
      .device("cpu");
  t->plan();
  return t;
}

BluePrint mlp() {
  return seq({fc(1024), relu(), fc(512), relu(), fc(256), relu(), fc(10)});
}

// "" when every element is closed in order and every '&' starts a known entity; else what is wrong.
std::string xml_problem(const std::string& s) {
  std::vector<std::string> stack;
  size_t i = 0;
  while ((i = s.find('<', i)) != std::string::npos) {
    if (s.compare(i, 4, "<!--") == 0 || s.compare(i, 2, "<?") == 0) {
      const bool comment = s[i + 1] == '!';
      i = s.find(comment ? "-->" : "?>", i);
      if (i == std::string::npos) return "unterminated comment or declaration";
      continue;
    }
    const size_t e = s.find('>', i);
    if (e == std::string::npos) return "unterminated tag at " + std::to_string(i);
    const std::string tag = s.substr(i + 1, e - i - 1);
    if (tag.empty() || tag.find('<') != std::string::npos) return "malformed tag at " + std::to_string(i);
    if (tag[0] == '/') {
      if (stack.empty() || stack.back() != tag.substr(1)) return "mismatched </" + tag.substr(1) + ">";
      stack.pop_back();
    } else if (tag.back() != '/') {
      stack.push_back(tag.substr(0, tag.find_first_of(" \t\n")));
    }
    i = e + 1;
  }
  if (!stack.empty()) return "unclosed <" + stack.back() + ">";
  for (size_t a = s.find('&'); a != std::string::npos; a = s.find('&', a + 1)) {
    bool ok = false;
    for (const char* ent : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"})
      ok = ok || s.compare(a, std::char_traits<char>::length(ent), ent) == 0;
    if (!ok) return "bare '&' at " + std::to_string(a);
  }
  return {};
}

struct Box {
  int count = 0;
  long long offset = -1;
  double x = -1;  // the box's rect
};

// Tensor boxes of the SVG by data-tensor-id.
std::map<int, Box> boxes(const std::string& svg) {
  std::map<int, Box> out;
  const std::string key = "data-tensor-id=\"";
  for (size_t i = svg.find(key); i != std::string::npos; i = svg.find(key, i + 1)) {
    const int id = std::stoi(svg.substr(i + key.size()));
    Box& b = out[id];
    ++b.count;
    const size_t o = svg.find("data-offset=\"", i);
    const size_t close = svg.find('>', i);
    if (o != std::string::npos && o < close) b.offset = std::stoll(svg.substr(o + 13));
    const size_t r = svg.find("<rect x=\"", i);
    if (r != std::string::npos) b.x = std::stod(svg.substr(r + 9));
  }
  return out;
}

void expect_every_tensor_once(const CompiledModel& m, const std::string& svg) {
  const MemoryPlan& p = m.base_plan();
  const std::map<int, Box> b = boxes(svg);
  EXPECT_EQ(b.size(), p.size());
  for (const DTensor& t : p.tensors()) {
    auto it = b.find(t.id);
    ASSERT_NE(it, b.end()) << t.name;
    EXPECT_EQ(it->second.count, 1) << t.name;
    EXPECT_EQ(it->second.offset, t.offset) << t.name;
  }
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) ++n;
  return n;
}

}  // namespace

TEST(InspectMemoryMap, MlpSvgListsEveryTensorOnceAtItsOffset) {
  auto t = planned(mlp(), 1000, 300);  // 1000 = 7 * 128 + 104, 300 = 2 * 128 + 44
  const CompiledModel& m = t->compiled();
  const std::string svg = memory_map_svg(m);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_EQ(svg.find("href"), std::string::npos);  // self-contained: no links or external resources
  expect_every_tensor_once(m, svg);
  // Every non-empty region is a band; empty ones are listed by name.
  const MemoryPlan& p = m.base_plan();
  for (int ri = 0; ri < kRegionCount; ++ri) {
    const auto r = static_cast<Region>(ri);
    EXPECT_NE(svg.find(region_name(r)), std::string::npos) << region_name(r);
    if (p.region(r).bytes) {
      EXPECT_EQ(count(svg, std::string("data-region=\"") + region_name(r) + "\""), 1u);
    }
  }
  // Per-variant table: every present variant with its batch.
  for (const char* v : {"train_base", "train_last", "val_base", "val_last"})
    EXPECT_NE(svg.find(std::string(">") + v + "<"), std::string::npos) << v;
  EXPECT_NE(svg.find(">104<"), std::string::npos);
  EXPECT_NE(svg.find(">44<"), std::string::npos);
  EXPECT_NE(svg.find("drawn 12 px tall"), std::string::npos);  // the legend states the minimum height
}

TEST(InspectMemoryMap, DropoutAndPartialBatchShareFeatureBytesInLanes) {
  auto t = planned(seq({fc(64), relu(), dropout(0.25f), fc(32), relu(), fc(10)}), 1000, 300);
  const CompiledModel& m = t->compiled();
  ASSERT_TRUE(m.plans[static_cast<int>(Variant::TRAIN_LAST)]);
  const std::string svg = memory_map_svg(m);
  EXPECT_EQ(xml_problem(svg), "");
  expect_every_tensor_once(m, svg);
  // F tensors whose bytes overlap are drawn side by side (different lanes).
  const MemoryPlan& p = m.base_plan();
  const std::map<int, Box> b = boxes(svg);
  const std::vector<TensorId> f = p.tensors_in(Region::F_FP32);
  int shared = 0;
  for (size_t i = 0; i < f.size(); ++i)
    for (size_t j = i + 1; j < f.size(); ++j) {
      const DTensor &x = p.tensor(f[i]), &y = p.tensor(f[j]);
      if (x.offset < y.offset + static_cast<int64_t>(y.slot_bytes) &&
          y.offset < x.offset + static_cast<int64_t>(x.slot_bytes)) {
        ++shared;
        EXPECT_NE(b.at(x.id).x, b.at(y.id).x) << x.name << " and " << y.name << " share bytes in one lane";
      }
    }
  EXPECT_GT(shared, 0) << "expected liveness sharing in F_FP32";
}

TEST(InspectMemoryMap, TextSummaryNamesRegionsFamiliesAndVariants) {
  auto t = planned(mlp(), 1000, 300);
  const CompiledModel& m = t->compiled();
  const MemoryPlan& p = m.base_plan();
  const std::string s = memory_map_text(m);
  for (int ri = 0; ri < kRegionCount; ++ri) {
    const auto r = static_cast<Region>(ri);
    if (p.region(r).bytes == 0) {
      EXPECT_EQ(s.find(std::string(region_name(r)) + " "), std::string::npos) << region_name(r);
      continue;
    }
    char off[32];
    std::snprintf(off, sizeof off, "0x%08llx", static_cast<unsigned long long>(p.region(r).offset));
    const size_t at = s.find(std::string(region_name(r)) + " ");
    ASSERT_NE(at, std::string::npos) << region_name(r);
    EXPECT_NE(s.substr(at, s.find('\n', at) - at).find(off), std::string::npos) << region_name(r);
  }
  EXPECT_NE(s.find("total arena"), std::string::npos);
  EXPECT_NE(s.find("train_last"), std::string::npos);
  EXPECT_NE(s.find("batch    104"), std::string::npos) << s;
  EXPECT_NE(s.find("batch     44"), std::string::npos) << s;
}

TEST(InspectGraphs, DotNamesEveryGraphIdAndSharedCaptures) {
  auto t = planned(seq({fc(64), relu(), dropout(0.25f), fc(32), relu(), fc(10)}), 1000, 300);
  const CompiledModel& m = t->compiled();
  const std::string atlas = atlas_dot(m), train = graph_dot(m, true), inf = graph_dot(m, false);
  for (const auto* g : {m.train.get(), m.inference.get()}) {
    const std::string& dot = g == m.train.get() ? train : inf;
    size_t nodes = 0;
    for (int gi = 0; gi < kGraphIdCount; ++gi) {
      const auto gid = static_cast<GraphId>(gi);
      if (g->empty(gid)) {
        EXPECT_EQ(dot.find("cluster_g" + std::to_string(gi) + " "), std::string::npos) << graph_id_name(gid);
        continue;
      }
      EXPECT_NE(dot.find("subgraph cluster_g" + std::to_string(gi) + " {"), std::string::npos);
      EXPECT_NE(dot.find(std::string("\"") + graph_id_name(gid) + "\\n"), std::string::npos)
          << graph_id_name(gid);
      nodes += g->nodes(gid).size();
      for (size_t i = 0; i < g->nodes(gid).size(); ++i)
        EXPECT_EQ(count(dot, "    n" + std::to_string(gi) + "_" + std::to_string(i) + " [label="), 1u);
    }
    EXPECT_EQ(nodes, g->node_count());
  }
  // Data edges: both first-layer passes feed the deep pass; the A and B passes never feed each other.
  const int fa = static_cast<int>(GraphId::FIRST_LAYER_FWD_A),
            fb = static_cast<int>(GraphId::FIRST_LAYER_FWD_B);
  const int deep = static_cast<int>(GraphId::DEEP_FWD_BWD);
  const std::string fa_fc = "n" + std::to_string(fa) + "_1", fb_fc = "n" + std::to_string(fb) + "_1";
  EXPECT_NE(train.find(fa_fc + " -> n" + std::to_string(deep) + "_"), std::string::npos);
  EXPECT_NE(train.find(fb_fc + " -> n" + std::to_string(deep) + "_"), std::string::npos);
  for (size_t i = 0; i < m.train->nodes(GraphId::FIRST_LAYER_FWD_A).size(); ++i) {
    EXPECT_EQ(
        train.find("n" + std::to_string(fa) + "_" + std::to_string(i) + " -> n" + std::to_string(fb) + "_"),
        std::string::npos);
    EXPECT_EQ(
        train.find("n" + std::to_string(fb) + "_" + std::to_string(i) + " -> n" + std::to_string(fa) + "_"),
        std::string::npos);
  }
  EXPECT_NE(train.find("[side stream]"), std::string::npos);
  EXPECT_NE(train.find("dropout"), std::string::npos);
  // Atlas: a node per non-empty slot of every present variant (none for empty slots), labelled with its
  // capture; the slots of a shared capture are chained by edges in variant order.
  std::map<int, std::vector<std::string>> by_capture;
  for (int v = 0; v < kVariantCount; ++v) {
    if (!m.atlas.present(static_cast<Variant>(v))) continue;
    EXPECT_NE(atlas.find(std::string("\"") + variant_name(static_cast<Variant>(v)) + "\\n"),
              std::string::npos);
    for (int g = 0; g < kGraphIdCount; ++g) {
      const AtlasSlot& s = m.atlas.slot(static_cast<Variant>(v), static_cast<GraphId>(g));
      const std::string node = "s" + std::to_string(v) + "_" + std::to_string(g);
      if (s.captured_idx < 0) {
        EXPECT_EQ(atlas.find(node + " "), std::string::npos) << node;
        EXPECT_EQ(atlas.find(node + ";"), std::string::npos) << node;
        continue;
      }
      const size_t decl =
          atlas.find("    " + node + " [label=\"" + graph_id_name(static_cast<GraphId>(g)) + "\\n");
      ASSERT_NE(decl, std::string::npos) << node;
      EXPECT_NE(atlas.substr(decl, atlas.find('\n', decl) - decl)
                    .find("capture #" + std::to_string(s.captured_idx) + "\""),
                std::string::npos)
          << node;
      by_capture[s.captured_idx].push_back(node);
    }
  }
  std::string visible;  // the atlas without the invisible edges that keep its rows in GraphId order
  for (size_t i = 0, e; i < atlas.size(); i = e + 1) {
    e = atlas.find('\n', i);
    if (e == std::string::npos) e = atlas.size();
    if (atlas.substr(i, e - i).find("style=invis") == std::string::npos)
      visible += atlas.substr(i, e - i) + "\n";
  }
  int shared = 0, across_variants = 0;
  for (const auto& [idx, slots] : by_capture) {
    if (slots.size() < 2) {
      EXPECT_EQ(visible.find(slots[0] + " -> "), std::string::npos) << slots[0];
      continue;
    }
    ++shared;
    across_variants +=
        slots.front().substr(0, slots.front().find('_')) != slots.back().substr(0, slots.back().find('_'))
            ? 1
            : 0;
    EXPECT_NE(atlas.find("// capture " + std::to_string(idx) + " shared by:"), std::string::npos);
    for (size_t k = 1; k < slots.size(); ++k)
      EXPECT_EQ(count(visible, "  " + slots[k - 1] + " -> " + slots[k] + ";"), 1u)
          << slots[k - 1] << " " << slots[k];
  }
  EXPECT_GT(shared, 0);
  EXPECT_EQ(across_variants, shared);  // captures are shared between variants, never inside one
  EXPECT_EQ(count(atlas, "reuses capture #"), static_cast<size_t>(m.atlas.stats().reused));
}

TEST(InspectEscaping, NamesAreEscapedForXmlAndDot) {
  EXPECT_EQ(xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(dot_escape("say \"hi\"\\\nnext"), "say \\\"hi\\\"\\\\\\nnext");
  Compiler c;
  CompileOptions o;
  o.input_sample = Shape{1, 28, 28, 1};
  o.num_classes = 10;
  o.batch = 128;
  o.train_samples = 256;
  o.val_samples = 128;
  o.steps_per_epoch = 2;
  o.total_steps = 2;
  o.normalize = Normalization{{0.5f}, {0.5f}};
  CompiledModel m = c.compile(seq({fc(32), relu(), fc(10)}), o);
  m.plans[static_cast<int>(Variant::TRAIN_BASE)]->mutable_tensor(0).name = "w<&>\"'";
  const std::string svg = memory_map_svg(m);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_NE(svg.find("w&lt;&amp;&gt;&quot;&apos;"), std::string::npos);
  EXPECT_EQ(svg.find("w<&"), std::string::npos);
  GraphNode n;
  n.op = "custom";
  n.label = "a \"quoted\" \\ label";
  n.in = {0};
  m.train->add(GraphId::EMA_UPDATE, n);
  const std::string dot = graph_dot(m, true);
  EXPECT_NE(dot.find("a \\\"quoted\\\" \\\\ label"), std::string::npos);
  EXPECT_NE(dot.find("#0 w<&>\\\"'"), std::string::npos);  // DOT needs only quotes and backslashes escaped
}

TEST(InspectMemoryMap, FashionMnistJob) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist"))
    GTEST_SKIP() << "Fashion-MNIST not installed";
  JobSpec job = load_job(std::string(FRESCO_TEST_DATA_DIR) + "/../../jobs/mlp_fashion_mnist.json");
  DeepLearningTask t;
  configure(t, job);
  t.device("cpu");
  t.plan();
  const CompiledModel& m = t.compiled();
  const std::string svg = memory_map_svg(m);
  EXPECT_EQ(xml_problem(svg), "");
  expect_every_tensor_once(m, svg);
  EXPECT_NE(memory_map_text(m).find("batch     96"), std::string::npos);  // 60000 = 468 * 128 + 96
}

// ResNet-18 (residual joins, projection shortcuts, BN): every DTensor once, at its offset.
TEST(InspectMemoryMap, ResNet18SvgListsEveryTensorOnceAtItsOffset) {
  DeepLearningTask t;
  t.model(models::resnet18(10))
      .data(synthetic(300, "synthetic/train", 32, 3), synthetic(130, "synthetic/test", 32, 3))
      .batch_size(128)
      .device("cpu");
  t.plan();
  const CompiledModel& m = t.compiled();
  const std::string svg = memory_map_svg(m);
  EXPECT_EQ(xml_problem(svg), "");
  expect_every_tensor_once(m, svg);
  size_t deep_conv = 0, bn_weight = 0;
  for (const DTensor& d : m.base_plan().tensors()) {
    deep_conv += d.region == Region::W_DEEP_CONV ? 1 : 0;
    bn_weight += d.region == Region::W_BN_WEIGHT ? 1 : 0;
  }
  EXPECT_EQ(deep_conv, 19u);  // 16 3x3 convs in the blocks + 3 projection 1x1 convs
  EXPECT_EQ(bn_weight, 20u);  // stem + 16 in blocks + 3 in projections
  const std::string text = memory_map_text(m);
  EXPECT_NE(text.find("W_DEEP_CONV"), std::string::npos);
  EXPECT_NE(text.find("batch     44"), std::string::npos);  // 300 = 2 * 128 + 44
}
