// Progressive resolution in the Compiler: the begin stage's variants (train_base, train_last) and the end
// stage's (train_lowres, train_lowres_last) get plans with every tensor at its fixed offset and the batched
// ones at that stage's size, their own captures (ShapeIds), while the val variants and every parameter stay
// at the input's size; models whose weights or layout would change with the size, and sizes the layers or
// batchnorm cannot take, are refused naming the layer.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "fresco/core/compiler.h"
#include "fresco/core/error.h"
#include "small_compile_options.h"
#include "support/error_of.h"

using namespace fresco;

namespace {
std::string message_of(const std::function<void()>& f) {
  return test::error_of(f).second;
}

CompileOptions options(int64_t begin, int64_t end) {
  CompileOptions o = test::rgb_compile_options(16, 4);
  o.train_samples = 10;  // batches of 4, 4 and 2: train_last and train_lowres_last exist
  o.steps_per_epoch = 3;
  o.total_steps = 6;
  o.progressive.begin_h = o.progressive.begin_w = begin;
  o.progressive.end_h = end;  // the end stage keeps the input's width
  o.progressive.begin_epochs = 1;
  return o;
}

BluePrint model() {
  return seq({conv(8, 3, 1, 1), bn(), relu(),
              residual({conv(8, 3, 1, 1), bn(), relu(), conv(8, 3, 1, 1), bn()}), relu(),
              residual({conv(16, 3, 2, 1), bn()}, {conv(16, 1, 2, 0), bn()}), relu(), gap(), fc(10)});
}

const DTensor& named(const MemoryPlan& p, const std::string& name) {
  for (const DTensor& d : p.tensors())
    if (d.name == name) return d;
  ADD_FAILURE() << name << " not in the plan";
  return p.tensors().front();
}
}  // namespace

TEST(ProgressiveResolution, EachStageHasItsSizesAtTheSameOffsets) {
  Compiler c;
  const CompiledModel m = c.compile(model(), options(8, 12));
  const auto plan = [&](Variant v) -> const MemoryPlan& { return *m.plans[static_cast<int>(v)]; };
  EXPECT_EQ(m.sample_of[static_cast<int>(Variant::TRAIN_BASE)], (Shape{1, 8, 8, 3}));
  EXPECT_EQ(m.sample_of[static_cast<int>(Variant::TRAIN_LAST)], (Shape{1, 8, 8, 3}));
  EXPECT_EQ(m.sample_of[static_cast<int>(Variant::TRAIN_LOWRES)], (Shape{1, 12, 16, 3}));
  EXPECT_EQ(m.sample_of[static_cast<int>(Variant::TRAIN_LOWRES_LAST)], (Shape{1, 12, 16, 3}));
  EXPECT_EQ(m.sample_of[static_cast<int>(Variant::VAL_BASE)], (Shape{1, 16, 16, 3}));
  // The input map, the stem's output and the strided block's output at each stage's size.
  struct Want {
    Variant v;
    Shape data, stem, strided;
  };
  for (const Want& w : {Want{Variant::TRAIN_BASE, {4, 8, 8, 3}, {4, 8, 8, 8}, {4, 4, 4, 16}},
                        Want{Variant::TRAIN_LAST, {2, 8, 8, 3}, {2, 8, 8, 8}, {2, 4, 4, 16}},
                        Want{Variant::TRAIN_LOWRES, {4, 12, 16, 3}, {4, 12, 16, 8}, {4, 6, 8, 16}},
                        Want{Variant::TRAIN_LOWRES_LAST, {2, 12, 16, 3}, {2, 12, 16, 8}, {2, 6, 8, 16}},
                        Want{Variant::VAL_BASE, {4, 16, 16, 3}, {4, 16, 16, 8}, {4, 8, 8, 16}}}) {
    const MemoryPlan& p = plan(w.v);
    EXPECT_EQ(p.tensor(m.t.data_a).shape, w.data) << variant_name(w.v);
    EXPECT_EQ(p.tensor(m.arch.layers[0].out).shape, w.stem) << variant_name(w.v);
    const auto& strided =
        m.arch.layers[static_cast<size_t>(m.arch.layers.size() - 5)];  // the join before relu
    EXPECT_EQ(p.tensor(strided.out).shape, w.strided) << variant_name(w.v) << " " << strided.name;
    const MemoryPlan& base = plan(Variant::VAL_BASE);
    for (const DTensor& d : p.tensors()) {
      const DTensor& b = base.tensor(d.id);
      ASSERT_EQ(d.offset, b.offset) << d.name;
      ASSERT_EQ(d.slot_bytes, b.slot_bytes) << d.name;
      ASSERT_LE(static_cast<uint64_t>(d.shape.numel()) * dtype_size(d.dtype), d.slot_bytes) << d.name;
      if (!d.batched) {  // parameters, statistics, scalars
        ASSERT_EQ(d.shape, b.shape) << d.name;
      }
    }
  }
  EXPECT_EQ(
      named(plan(Variant::TRAIN_BASE), "fc" + std::to_string(m.arch.layers.size() - 1) + ".weight").shape,
      named(plan(Variant::VAL_BASE), "fc" + std::to_string(m.arch.layers.size() - 1) + ".weight").shape);
  // Four train captures of the step's graphs (two sizes, two batches); the update is captured once.
  const GraphAtlas& a = m.atlas;
  const int base = a.slot(Variant::TRAIN_BASE, GraphId::DEEP_FWD_BWD).captured_idx;
  const int lowres = a.slot(Variant::TRAIN_LOWRES, GraphId::DEEP_FWD_BWD).captured_idx;
  EXPECT_NE(base, lowres);
  EXPECT_NE(a.slot(Variant::TRAIN_LAST, GraphId::DEEP_FWD_BWD).captured_idx, base);
  EXPECT_NE(a.slot(Variant::TRAIN_LOWRES_LAST, GraphId::DEEP_FWD_BWD).captured_idx, lowres);
  EXPECT_EQ(a.slot(Variant::TRAIN_LOWRES, GraphId::DEEP_FWD_BWD).shape, (ShapeId{4, 12, 16, 3}));
  EXPECT_EQ(a.slot(Variant::TRAIN_LOWRES, GraphId::OPTIMIZER).captured_idx,
            a.slot(Variant::TRAIN_BASE, GraphId::OPTIMIZER).captured_idx);
}

TEST(ProgressiveResolution, OffKeepsEveryTrainVariantAtTheInputSize) {
  Compiler c;
  CompileOptions o = options(8, 12);
  o.progressive = ProgressiveResolution{};
  const CompiledModel m = c.compile(model(), o);
  for (int v = 0; v < kVariantCount; ++v) EXPECT_EQ(m.sample_of[v], (Shape{1, 16, 16, 3}));
  EXPECT_EQ(m.atlas.slot(Variant::TRAIN_LOWRES, GraphId::DEEP_FWD_BWD).captured_idx,
            m.atlas.slot(Variant::TRAIN_BASE, GraphId::DEEP_FWD_BWD).captured_idx);
}

TEST(ProgressiveResolution, RefusesWhatASizeWouldChange) {
  Compiler c;
  // an fc on a flattened map: its weights depend on the size
  const std::string flat = message_of([&] {
    c.compile(seq({conv(4, 3, 1, 1), relu(), flatten(), fc(10)}), options(8, 16));
  });
  EXPECT_NE(flat.find("so its weights would change; end the features with a global average pool"),
            std::string::npos)
      << flat;
  // a window larger than the begin stage's map, named with the size
  const std::string small = message_of([&] {
    c.compile(seq({conv(4, 3, 1, 1), relu(), maxpool(4), conv(4, 3, 1, 0), gap(), fc(10)}), options(4, 16));
  });
  EXPECT_NE(small.find("does not fit"), std::string::npos) << small;
  EXPECT_NE(small.find("at the input size [1,4,4,3]"), std::string::npos) << small;
  // larger than the input
  EXPECT_NE(message_of([&] { c.compile(model(), options(20, 16)); }).find("each side in [1, the input's]"),
            std::string::npos);
  // batchnorm with one value per channel at the begin size: a last batch of one sample on a 1x1 map
  CompileOptions one = options(1, 16);
  one.train_samples = 9;
  EXPECT_NE(message_of([&] {
              c.compile(seq({conv(4, 1, 1, 0), bn(), relu(), gap(), fc(10)}), one);
            }).find("(progressive resolution at [1,1,1,3])"),
            std::string::npos);
}
