// libfresco-cuda entry points: the frozen ABI info and init, which hands the host the CUDA device API and the
// kernel table (an explicit array; one op = one file in ops/ plus one line here). The plugin loads on
// machines without a GPU (device_count() is then 0). Test: fresco plugins, tests/plugins/cuda.
#include "cuda_common.h"

namespace fresco::cuda {

extern const FrDeviceApi kCudaDevice;

FR_CUDA_KERNEL_PREPARE(fc);
FR_CUDA_KERNEL_RUN(fc);
FR_CUDA_KERNEL_DESTROY(fc);
FR_CUDA_KERNEL_PREPARE(fc_backward);
FR_CUDA_KERNEL_RUN(fc_backward);
FR_CUDA_KERNEL_DESTROY(fc_backward);
FR_CUDA_KERNEL_RUN(relu);
FR_CUDA_KERNEL_PREPARE(relu_backward);
FR_CUDA_KERNEL_RUN(relu_backward);
FR_CUDA_KERNEL_RUN(add);
FR_CUDA_KERNEL_RUN(add_relu);
FR_CUDA_KERNEL_PREPARE(add_relu_backward);
FR_CUDA_KERNEL_RUN(add_relu_backward);
FR_CUDA_KERNEL_RUN(concat);
FR_CUDA_KERNEL_RUN(concat_backward);
FR_CUDA_KERNEL_RUN(gelu);
FR_CUDA_KERNEL_RUN(gelu_backward);
FR_CUDA_KERNEL_RUN(silu);
FR_CUDA_KERNEL_RUN(silu_backward);
FR_CUDA_KERNEL_RUN(sigmoid);
FR_CUDA_KERNEL_RUN(sigmoid_backward);
FR_CUDA_KERNEL_RUN(tanh);
FR_CUDA_KERNEL_RUN(tanh_backward);
FR_CUDA_KERNEL_RUN(max_pool2d);
FR_CUDA_KERNEL_RUN(max_pool2d_backward);
FR_CUDA_KERNEL_RUN(avg_pool2d);
FR_CUDA_KERNEL_RUN(avg_pool2d_backward);
FR_CUDA_KERNEL_RUN(global_avg_pool);
FR_CUDA_KERNEL_RUN(global_avg_pool_backward);
FR_CUDA_KERNEL_PREPARE(batchnorm);
FR_CUDA_KERNEL_RUN(batchnorm);
FR_CUDA_KERNEL_PREPARE(batchnorm_backward);
FR_CUDA_KERNEL_RUN(batchnorm_backward);
FR_CUDA_KERNEL_RUN(batchnorm_fold);
FR_CUDA_KERNEL_PREPARE(batchnorm_add);
FR_CUDA_KERNEL_RUN(batchnorm_add);
FR_CUDA_KERNEL_RUN(channel_affine);
FR_CUDA_KERNEL_PREPARE(conv2d);
FR_CUDA_KERNEL_RUN(conv2d);
FR_CUDA_KERNEL_DESTROY(conv2d);
FR_CUDA_KERNEL_PREPARE(conv2d_backward);
FR_CUDA_KERNEL_RUN(conv2d_backward);
FR_CUDA_KERNEL_DESTROY(conv2d_backward);
FR_CUDA_KERNEL_RUN(flatten_chw);
FR_CUDA_KERNEL_RUN(flatten_chw_backward);
FR_CUDA_KERNEL_RUN(dropout);
FR_CUDA_KERNEL_RUN(dropout_backward);
FR_CUDA_KERNEL_RUN(normalize_input);
FR_CUDA_KERNEL_PREPARE(softmax_xent);
FR_CUDA_KERNEL_RUN(softmax_xent);
FR_CUDA_KERNEL_PREPARE(fc_softmax_xent);
FR_CUDA_KERNEL_RUN(fc_softmax_xent);
FR_CUDA_KERNEL_RUN(clear);
FR_CUDA_KERNEL_RUN(copy);
FR_CUDA_KERNEL_RUN(accumulate_metrics);
FR_CUDA_KERNEL_RUN(lr_schedule);
FR_CUDA_KERNEL_RUN(step_done);
FR_CUDA_KERNEL_RUN(sgd_update);
FR_CUDA_KERNEL_RUN(ema_update);
FR_CUDA_KERNEL_RUN(adam_update);
FR_CUDA_KERNEL_PREPARE(lars_update);
FR_CUDA_KERNEL_RUN(lars_update);
FR_CUDA_KERNEL_RUN(cast);
FR_CUDA_KERNEL_RUN(cast_range);
FR_CUDA_KERNEL_RUN(unscale_grads);
FR_CUDA_KERNEL_RUN(check_grads);
FR_CUDA_KERNEL_RUN(restore_if_skipped);
FR_CUDA_KERNEL_RUN(loss_scale_update);

namespace {
constexpr uint32_t kF32 = FR_DTYPE_BIT(FR_F32);
constexpr uint32_t kFloats = FR_DTYPE_BIT(FR_F32) | FR_DTYPE_BIT(FR_F16) | FR_DTYPE_BIT(FR_BF16);
constexpr uint32_t kAny = 0x3Fu;
#define FR_KF(kind, op, mask, flags, prep, run, destroy) \
  { sizeof(FrKernelDef), kind, op, "cuda", mask, flags, prep, run, destroy }
#define FR_K(kind, op, mask, prep, run, destroy) FR_KF(kind, op, mask, 0, prep, run, destroy)
constexpr uint32_t kSums = FR_KERNEL_SUMS_OPERANDS;
constexpr uint32_t kPrologue = FR_KERNEL_CONV_PROLOGUE;
constexpr uint32_t kWgradBn = FR_KERNEL_WGRAD_BN_PROLOGUE;
constexpr uint32_t kJoinEpilogue = FR_KERNEL_CONV_JOIN_EPILOGUE;
constexpr uint32_t kStepMomentum = FR_KERNEL_STEP_MOMENTUM;
constexpr uint32_t kWeightCopy = FR_KERNEL_WEIGHT_COPY;
constexpr uint32_t kHalfGrads = FR_KERNEL_HALF_GRADS;
constexpr uint32_t kCompact = FR_KERNEL_COMPACT_GRAD;
constexpr uint32_t kSubsample = FR_KERNEL_SUBSAMPLED_OUTPUT;
constexpr uint32_t kJoinPrologue = FR_KERNEL_CONV_JOIN_PROLOGUE;
constexpr uint32_t kBackups = FR_KERNEL_UPDATE_BACKUPS;
const FrKernelDef kKernels[] = {
    FR_K(FR_COMPUTE, FR_OP_FC, kF32, fc_prepare, fc_run, fc_destroy),
    FR_K(FR_COMPUTE, FR_OP_FC_BACKWARD, kF32, fc_backward_prepare, fc_backward_run, fc_backward_destroy),
    FR_K(FR_COMPUTE, FR_OP_RELU, kFloats, nullptr, relu_run, nullptr),
    FR_KF(FR_COMPUTE, FR_OP_RELU_BACKWARD, kFloats, kSums, relu_backward_prepare, relu_backward_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_ADD, kFloats, nullptr, add_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_ADD_RELU, kFloats, nullptr, add_relu_run, nullptr),
    FR_KF(FR_COMPUTE, FR_OP_ADD_RELU_BACKWARD, kFloats, kSums | kCompact, add_relu_backward_prepare,
          add_relu_backward_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_CONCAT, kFloats, nullptr, concat_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_CONCAT_BACKWARD, kFloats, nullptr, concat_backward_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_GELU, kFloats, nullptr, gelu_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_GELU_BACKWARD, kFloats, nullptr, gelu_backward_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_SILU, kFloats, nullptr, silu_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_SILU_BACKWARD, kFloats, nullptr, silu_backward_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_SIGMOID, kFloats, nullptr, sigmoid_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_SIGMOID_BACKWARD, kFloats, nullptr, sigmoid_backward_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_TANH, kFloats, nullptr, tanh_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_TANH_BACKWARD, kFloats, nullptr, tanh_backward_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_MAX_POOL2D, kFloats, nullptr, max_pool2d_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_MAX_POOL2D_BACKWARD, kFloats, nullptr, max_pool2d_backward_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_AVG_POOL2D, kFloats, nullptr, avg_pool2d_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_AVG_POOL2D_BACKWARD, kFloats, nullptr, avg_pool2d_backward_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_GLOBAL_AVG_POOL, kFloats, nullptr, global_avg_pool_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_GLOBAL_AVG_POOL_BACKWARD, kFloats, nullptr, global_avg_pool_backward_run, nullptr),
    FR_KF(FR_COMPUTE, FR_OP_BATCHNORM, kFloats, kSums | kPrologue, batchnorm_prepare, batchnorm_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_BATCHNORM_FOLD, kF32, nullptr, batchnorm_fold_run, nullptr),
    FR_KF(FR_COMPUTE, FR_OP_BATCHNORM_ADD, kFloats, kSums | kSubsample, batchnorm_add_prepare,
          batchnorm_add_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_CHANNEL_AFFINE, kFloats, nullptr, channel_affine_run, nullptr),
    FR_KF(FR_COMPUTE, FR_OP_BATCHNORM_BACKWARD, kFloats, kSums | kWgradBn, batchnorm_backward_prepare,
          batchnorm_backward_run, nullptr),
    FR_KF(FR_COMPUTE, FR_OP_CONV2D, kFloats, kSums | kPrologue | kJoinPrologue, conv2d_prepare, conv2d_run,
          conv2d_destroy),
    FR_KF(FR_COMPUTE, FR_OP_CONV2D_BACKWARD, kFloats, kPrologue | kWgradBn | kJoinEpilogue | kCompact,
          conv2d_backward_prepare, conv2d_backward_run, conv2d_backward_destroy),
    FR_K(FR_COMPUTE, FR_OP_FLATTEN_CHW, kFloats, nullptr, flatten_chw_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_FLATTEN_CHW_BACKWARD, kFloats, nullptr, flatten_chw_backward_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_DROPOUT, kF32, nullptr, dropout_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_DROPOUT_BACKWARD, kF32, nullptr, dropout_backward_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_NORMALIZE_INPUT, kFloats, nullptr, normalize_input_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_SOFTMAX_XENT, kF32, softmax_xent_prepare, softmax_xent_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_FC_SOFTMAX_XENT, kF32, fc_softmax_xent_prepare, fc_softmax_xent_run, nullptr),
    FR_K(FR_RANGE, FR_OP_CLEAR, kAny, nullptr, clear_run, nullptr),
    FR_K(FR_RANGE, FR_OP_COPY, kAny, nullptr, copy_run, nullptr),
    FR_K(FR_RANGE, FR_OP_ACCUMULATE_METRICS, kAny, nullptr, accumulate_metrics_run, nullptr),
    FR_K(FR_RANGE, FR_OP_LR_SCHEDULE, kAny, nullptr, lr_schedule_run, nullptr),
    FR_K(FR_RANGE, FR_OP_STEP_DONE, kAny, nullptr, step_done_run, nullptr),
    FR_KF(FR_RANGE, FR_OP_SGD_UPDATE, kF32, kStepMomentum | kWeightCopy | kHalfGrads | kBackups, nullptr,
          sgd_update_run, nullptr),
    FR_K(FR_RANGE, FR_OP_EMA_UPDATE, kF32, nullptr, ema_update_run, nullptr),
    FR_KF(FR_RANGE, FR_OP_ADAM_UPDATE, kF32, kStepMomentum | kWeightCopy | kHalfGrads | kBackups, nullptr,
          adam_update_run, nullptr),
    FR_KF(FR_RANGE, FR_OP_LARS_UPDATE, kF32, kStepMomentum, lars_update_prepare, lars_update_run, nullptr),
    FR_K(FR_COMPUTE, FR_OP_CAST, kFloats, nullptr, cast_run, nullptr),
    FR_K(FR_RANGE, FR_OP_CAST_RANGE, kFloats, nullptr, cast_range_run, nullptr),
    FR_K(FR_RANGE, FR_OP_UNSCALE_GRADS, kF32, nullptr, unscale_grads_run, nullptr),
    FR_K(FR_RANGE, FR_OP_CHECK_GRADS, kAny, nullptr, check_grads_run, nullptr),
    FR_K(FR_RANGE, FR_OP_RESTORE_IF_SKIPPED, kAny, nullptr, restore_if_skipped_run, nullptr),
    FR_K(FR_RANGE, FR_OP_LOSS_SCALE_UPDATE, kAny, nullptr, loss_scale_update_run, nullptr),
};
#undef FR_K
#undef FR_KF
}  // namespace

}  // namespace fresco::cuda

extern "C" FR_EXPORT FrAbiInfo fresco_plugin_abi(void) {
  return FrAbiInfo{sizeof(FrAbiInfo), FR_ABI_MAJOR, FR_ABI_MINOR, "cuda", "0.1.0"};
}

extern "C" FR_EXPORT FrError* fresco_plugin_init(const FrHostApi* host, FrPlugin* out) {
  using namespace fresco::cuda;
  return fresco::sdk::init_plugin(
      host, out, "cuda",
      {&kCudaDevice, nullptr, kKernels, static_cast<uint32_t>(sizeof(kKernels) / sizeof(kKernels[0]))});
}
