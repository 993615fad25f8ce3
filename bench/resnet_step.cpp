// Benchmark: ResNet training step time on synthetic data resident on the device, the setting of
// `pytorch_baseline.py rn18` (SGD Nesterov momentum 0.9, weight decay 5e-4, lr 0.1, label smoothing 0.2).
// One staged batch of random uint8 images is normalised on the device and trained on back to back (the
// input copy of the batch is part of every step). Prints one JSON line: ms/step, images/s, device memory
// held by the job, and the floor (FLOPs of forward + both backward GEMM directions / --peak-tflops; by
// default the H200's datasheet rates: 67 TFLOP/s fp32 without tensor cores, 989 dense fp16 / bf16
// tensor-core).
// --precision bf16 runs the mixed-precision plan (bf16 maps and conv weights, fp32 masters, fc and loss);
// fp32 convolutions run through cuDNN in strict fp32 (no TF32).
// Usage: bench_resnet_step [--device cuda] [--model resnet18|resnet34|resnet50] [--batch 512] [--image 32]
//                          [--stem cifar|imagenet] [--classes 10] [--steps 60] [--warm 10] [--peak-tflops
//                          auto]
//                          [--profile 0|1] [--precision fp32|bf16|fp16] [--fuse-joins 1|0] [--fuse-head 1|0]
//                          [--conv-stats auto|on|off] [--grad-sums auto|on|off] [--join-lag N]
//                          [--early-update auto|on|off] [--early-parts N] [--conv-prologue auto|on|off]
//                          [--fork-shortcuts 0|1] [--join-epilogue auto|on|off] [--fused-weight-cast 1|0]
//                          [--deferred-update auto|on|off] [--compact-shortcut auto|on|off]
//                          [--subsampled-shortcut auto|on|off] [--speculative-update auto|on|off]
//                          [--join-prologue auto|on|off] [--speculative-backups update|copies]
// --fuse-joins 0 keeps a batchnorm read only by a residual join as its own node (CompileOptions::fuse_joins).
// --conv-stats sets CompileOptions::conv_stats (batchnorm statistics from sums its conv writes).
// --grad-sums sets CompileOptions::grad_sums (batchnorm gradient sums from the masking pass before it).
// --early-update sets CompileOptions::early_update (the update beside the first layer's backward),
// --early-parts CompileOptions::early_update_parts (-1: the default).
// --conv-prologue sets CompileOptions::conv_prologue (a batchnorm applied by the conv that reads it).
// --join-epilogue sets CompileOptions::join_epilogue (a join's masking pass in a conv's input gradient).
// --compact-shortcut sets CompileOptions::compact_shortcut_grads (a strided 1x1 shortcut's input gradient
// at its output positions only). --subsampled-shortcut sets CompileOptions::subsampled_shortcuts (a stride-2
// shortcut reads its join's even rows and columns at stride 1).
// --speculative-update sets CompileOptions::speculative_update (fp16: the conv weights updated during the
// backward, restored from backups on a skipped step); --speculative-backups how it keeps them
// (CompileOptions::speculative_backups: written by the update kernels, or by copy nodes before them).
// --join-prologue sets CompileOptions::join_prologue (a residual join applied by the conv that first reads
// it; the JSON's join_prologues counts them).
// --fused-weight-cast 0 casts W -> A after the updates instead of in them
// (CompileOptions::fused_weight_cast).
// --grads16-update auto|on|off sets CompileOptions::update_from_grads16 (the updates read the conv weights'
// 16-bit gradients themselves; off: cast to f32, fp16 with unscale_grads, before them; auto: fp16 only).
// --deferred-update sets CompileOptions::deferred_update (a step's update at the start of the next step,
// beside its forward; auto: off). The timed steps end with the last step's update.
// --join-lag N sets CompileOptions::conv_join_lag_max: conv input gradients over at most N values per sample
// let the latest weight gradient run beside them (default: the library's, 65536; 0: never).
// --profile 1 also times every call of the training graphs alone and prints the total per op (one line each);
// --profile 2 also prints each call (graph, layer, op, time, the layer's per-sample shapes).
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "bench_args.h"
#include "call_profile.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/job.h"
#include "fresco/core/models.h"

namespace {
// n random images (fixed LCG, so every run sees the same bytes) with labels in [0, classes).
fresco::data::Dataset random_images(int64_t n, int64_t side, int32_t classes) {
  fresco::data::Dataset d;
  d.name = "synthetic/random";
  d.n = n, d.h = side, d.w = side, d.c = 3, d.num_classes = classes;
  d.images.resize(static_cast<size_t>(n * side * side * 3));
  uint32_t s = 12345u;
  for (auto& b : d.images) b = static_cast<uint8_t>((s = s * 1664525u + 1013904223u) >> 24);
  d.labels.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) d.labels[static_cast<size_t>(i)] = static_cast<int32_t>(i % classes);
  return d;
}

// auto / on / off as the enum E's AUTO / ON / OFF (--conv-stats, --grad-sums).
template <class E>
E parse_mode(const std::string& v, const char* flag) {
  if (v == "auto") return E::AUTO;
  if (v == "on") return E::ON;
  if (v == "off") return E::OFF;
  throw fresco::Error(fresco::ErrorCode::kBadConfig,
                      std::string("bench_resnet_step: --") + flag + " must be auto, on or off, got " + v);
}

// Multiply-add FLOPs of one sample's forward pass: convolutions and fc layers.
double forward_flops_per_sample(const fresco::ArchPlan& arch) {
  double f = 0;
  for (const fresco::LayerDescriptor& l : arch.layers) {
    if (l.kind == fresco::LayerKind::CONV)
      f += 2.0 * static_cast<double>(l.out_sample.per_sample()) * static_cast<double>(l.spec.k * l.spec.k) *
           static_cast<double>(l.in_sample.c / l.spec.groups);
    else if (l.kind == fresco::LayerKind::FC)
      f += 2.0 * static_cast<double>(l.in_sample.per_sample()) *
           static_cast<double>(l.out_sample.per_sample());
  }
  return f;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace fresco;
  const std::string fork_default = CompileOptions{}.fork_shortcuts ? "1" : "0";
  const bench::Args args(argc, argv,
                         {{"device", "cuda"},
                          {"model", "resnet18"},
                          {"batch", "512"},
                          {"image", "32"},
                          {"stem", "cifar"},
                          {"classes", "10"},
                          {"steps", "60"},
                          {"warm", "10"},
                          {"peak-tflops", "auto"},
                          {"profile", "0"},
                          {"fuse-head", "1"},
                          {"precision", "fp32"},
                          {"fuse-joins", "1"},
                          {"conv-stats", "auto"},
                          {"grad-sums", "auto"},
                          {"join-lag", std::to_string(CompileOptions{}.conv_join_lag_max)},
                          {"early-update", "auto"},
                          {"conv-prologue", "auto"},
                          {"early-parts", "-1"},
                          {"fork-shortcuts", fork_default},
                          {"join-epilogue", "auto"},
                          {"compact-shortcut", "auto"},
                          {"subsampled-shortcut", "auto"},
                          {"fused-weight-cast", "1"},
                          {"grads16-update", "auto"},
                          {"deferred-update", "auto"},
                          {"speculative-update", "auto"},
                          {"join-prologue", "auto"},
                          {"speculative-backups", "update"}});
  const std::string device = args.str("device"), model = args.str("model"), stem_name = args.str("stem"),
                    prec = args.str("precision");
  const int64_t batch = args.integer("batch"), side = args.integer("image");
  const int32_t classes = static_cast<int32_t>(args.integer("classes"));
  const int steps = static_cast<int>(args.integer("steps")), warm = static_cast<int>(args.integer("warm"));
  try {
    const DType precision = parse_precision(prec, "bench_resnet_step --precision");
    FRESCO_CHECK(stem_name == "cifar" || stem_name == "imagenet", ErrorCode::kBadConfig,
                 "bench_resnet_step: --stem must be cifar or imagenet");
    const models::Stem stem = stem_name == "cifar" ? models::Stem::CIFAR : models::Stem::IMAGENET;
    BluePrint bp = model == "resnet18"   ? models::resnet18(classes, stem)
                   : model == "resnet34" ? models::resnet34(classes, stem)
                   : model == "resnet50"
                       ? models::resnet50(classes, stem)
                       : throw Error(ErrorCode::kBadConfig, "bench_resnet_step: unknown --model " + model);
    // auto: the H200's datasheet rates (give the machine's own for another device)
    const double peak_tflops = args.str("peak-tflops") == "auto" ? (precision == DType::F32 ? 67.0 : 989.0)
                                                                 : args.real("peak-tflops");
    FRESCO_CHECK(
        peak_tflops > 0.0 && std::isfinite(peak_tflops), ErrorCode::kBadConfig,
        "bench_resnet_step: --peak-tflops must be auto or a positive number, got " + args.str("peak-tflops"));
    DeepLearningTask task;
    task.model(std::move(bp))
        .data(random_images(batch, side, classes), random_images(batch, side, classes))
        .normalize(Normalization{{0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}})
        .batch_size(batch)
        .loss(CrossEntropyLoss().label_smoothing(0.2f))
        .optimizer(SGD(0.9f, true).base_lr(0.1f).with_weight_decay(5e-4f))
        .device(device)
        .precision(precision)
        .seed(1)
        .fuse_joins(args.integer("fuse-joins") != 0)
        .fuse_head(args.integer("fuse-head") != 0)
        .conv_stats(parse_mode<CompileOptions::ConvStats>(args.str("conv-stats"), "conv-stats"))
        .grad_sums(parse_mode<CompileOptions::GradSums>(args.str("grad-sums"), "grad-sums"))
        .conv_prologue(parse_mode<CompileOptions::ConvPrologue>(args.str("conv-prologue"), "conv-prologue"))
        .conv_join_lag(args.integer("join-lag"))
        .fork_shortcuts(args.integer("fork-shortcuts") != 0)
        .fused_weight_cast(args.integer("fused-weight-cast") != 0)
        .update_from_grads16(
            parse_mode<CompileOptions::Grads16Update>(args.str("grads16-update"), "grads16-update"))
        .deferred_update(
            parse_mode<CompileOptions::DeferredUpdate>(args.str("deferred-update"), "deferred-update"))
        .join_epilogue(parse_mode<CompileOptions::JoinEpilogue>(args.str("join-epilogue"), "join-epilogue"))
        .compact_shortcut_grads(parse_mode<CompileOptions::CompactShortcutGrads>(args.str("compact-shortcut"),
                                                                                 "compact-shortcut"))
        .subsampled_shortcuts(parse_mode<CompileOptions::SubsampledShortcuts>(args.str("subsampled-shortcut"),
                                                                              "subsampled-shortcut"))
        .speculative_update(parse_mode<CompileOptions::SpeculativeUpdate>(args.str("speculative-update"),
                                                                          "speculative-update"))
        .join_prologue(parse_mode<CompileOptions::JoinPrologue>(args.str("join-prologue"), "join-prologue"));
    const std::string backups = args.str("speculative-backups");
    if (backups != "update" && backups != "copies")
      throw fresco::Error(
          fresco::ErrorCode::kBadConfig,
          "bench_resnet_step: --speculative-backups must be update or copies, got " + backups);
    task.speculative_backups(backups == "update" ? CompileOptions::SpeculativeBackups::IN_UPDATE
                                                 : CompileOptions::SpeculativeBackups::COPIES);
    const auto early = parse_mode<CompileOptions::EarlyUpdate>(args.str("early-update"), "early-update");
    if (early != CompileOptions::EarlyUpdate::AUTO)
      task.early_update(early == CompileOptions::EarlyUpdate::ON);
    const int64_t parts = args.integer("early-parts");
    FRESCO_CHECK(parts >= -1, ErrorCode::kBadConfig,
                 "bench_resnet_step: --early-parts must be -1 (default) or more");
    if (parts >= 0) task.early_update_parts(static_cast<int>(parts));
    task.compile();
    task.time_steps(warm);
    const double s = task.time_steps(steps);
    const double ms = 1000.0 * s / steps;
    // forward + input and weight gradients (the first layer's input gradient is not computed; ignored here)
    const double flops = 3.0 * forward_flops_per_sample(task.compiled().arch) * static_cast<double>(batch);
    int join_prologues = 0;  // CompileOptions::join_prologue: the convs that apply a join
    for (const LayerDescriptor& d : task.compiled().arch.layers) join_prologues += d.prologue_join >= 0;
    std::printf(
        "{\"bench\":\"resnet_step\",\"model\":\"%s\",\"stem\":\"%s\",\"backend\":\"%s\",\"batch\":%lld,"
        "\"image\":%lld,\"dtype\":\"%s\",\"ms_step\":%.4f,\"images_per_s\":%.1f,\"device_mib\":%.1f,"
        "\"workspace_mib\":%.1f,"
        "\"gflop_step\":%.1f,\"floor_ms\":%.4f,\"peak_tflops\":%.1f,\"conv_stats\":\"%s\",\"grad_sums\":\"%"
        "s\","
        "\"join_lag\":%lld,\"early_update\":\"%s\",\"early_parts\":%d,\"conv_prologue\":\"%s\","
        "\"fork_shortcuts\":%d,\"join_epilogue\":\"%s\",\"fused_weight_cast\":%d,\"deferred_update\":%d,"
        "\"grads16_update\":%d,\"compact_shortcut\":\"%s\",\"subsampled_shortcut\":\"%s\","
        "\"speculative_update\":%d,\"speculative_layer\":%d,\"speculative_backups\":\"%s\","
        "\"join_prologues\":%d}"
        "\n",
        model.c_str(), stem_name.c_str(), task.device_name().c_str(), static_cast<long long>(batch),
        static_cast<long long>(side), prec.c_str(), ms, 1000.0 * static_cast<double>(batch) / ms,
        static_cast<double>(task.device_memory_bytes()) / (1 << 20),
        static_cast<double>(task.runtime().workspace_bytes()) / (1 << 20), flops / 1e9,
        1e3 * flops / (peak_tflops * 1e12), peak_tflops, args.str("conv-stats").c_str(),
        args.str("grad-sums").c_str(), static_cast<long long>(args.integer("join-lag")),
        args.str("early-update").c_str(), task.compiled().options.early_update_parts,
        args.str("conv-prologue").c_str(), task.compiled().options.fork_shortcuts ? 1 : 0,
        args.str("join-epilogue").c_str(), task.compiled().options.fused_weight_cast ? 1 : 0,
        task.compiled().update_deferred() ? 1 : 0, task.compiled().updates_read_grads16() ? 1 : 0,
        args.str("compact-shortcut").c_str(), args.str("subsampled-shortcut").c_str(),
        task.compiled().speculative ? 1 : 0, task.compiled().speculative_layer, backups.c_str(),
        join_prologues);
    const int64_t profile = args.integer("profile");
    if (profile) {
      std::map<std::string, std::pair<double, int>> per_op;  // op -> (us, calls)
      std::map<std::string, const LayerDescriptor*> layers;  // by name, for each call's shapes
      for (const LayerDescriptor& d : task.compiled().arch.layers) layers[d.name] = &d;
      const GraphAtlas& at = task.compiled().atlas;
      for (GraphId g : {GraphId::FIRST_LAYER_FWD_A, GraphId::DEEP_FWD_BWD, GraphId::FIRST_LAYER_BWD_A,
                        GraphId::GRAD_CAST, GraphId::NAN_CHECK_AND_GRAD_SCALING, GraphId::OPTIMIZER,
                        GraphId::STEP_END, GraphId::WEIGHT_CAST}) {
        const int idx = at.slot(Variant::TRAIN_BASE, g).captured_idx;
        if (idx < 0) continue;
        for (const bench::CallTime& c : bench::time_calls(task.runtime(), idx, 5)) {
          per_op[c.op].first += c.us;
          ++per_op[c.op].second;
          if (profile < 2) continue;
          // the layer that emitted the call: a call is labelled "op (layer)"
          const size_t open = c.label.rfind('('), close = c.label.rfind(')');
          const auto it = open != std::string::npos && close > open
                              ? layers.find(c.label.substr(open + 1, close - open - 1))
                              : layers.end();
          const LayerDescriptor* l = it != layers.end() ? it->second : nullptr;
          std::printf(
              "{\"bench\":\"resnet_call\",\"graph\":\"%s\",\"label\":\"%s\",\"op\":\"%s\","
              "\"us\":%.1f,\"in\":\"%s\",\"out\":\"%s\",\"k\":%lld}\n",
              graph_id_name(g), c.label.c_str(), c.op.c_str(), c.us, l ? l->in_sample.str().c_str() : "",
              l ? l->out_sample.str().c_str() : "", l ? static_cast<long long>(l->spec.k) : 0LL);
        }
      }
      for (const auto& [op, v] : per_op)
        std::printf(
            "{\"bench\":\"resnet_op\",\"model\":\"%s\",\"batch\":%lld,\"op\":\"%s\",\"calls\":%d,"
            "\"us\":%.1f}\n",
            model.c_str(), static_cast<long long>(batch), op.c_str(), v.second, v.first);
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.exit_status();
  }
}
