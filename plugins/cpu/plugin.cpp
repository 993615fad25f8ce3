// libfresco-cpu entry points: the frozen ABI info and init, which hands the host the device API and the
// kernel table (an explicit array; adding an op = one file in ops/ plus one line here). Test: fresco plugins,
// op tests.
#include "cpu_common.h"

namespace fresco::cpu {

extern const FrDeviceApi kCpuDevice;
extern const FrCommApi kThreadsComm;

#define FR_DECLARE_RUN(name) FR_CPU_KERNEL_RUN(name);
#define FR_DECLARE_PREPARE(name) FR_CPU_KERNEL_PREPARE(name);
FR_DECLARE_PREPARE(fc)
FR_DECLARE_RUN(fc)
FR_DECLARE_PREPARE(fc_backward)
FR_DECLARE_RUN(fc_backward)
FR_DECLARE_PREPARE(conv2d)
FR_DECLARE_RUN(conv2d)
void conv2d_destroy(void* ctx, void* state) noexcept;
FR_DECLARE_PREPARE(conv2d_backward)
FR_DECLARE_RUN(conv2d_backward)
FR_DECLARE_RUN(relu)
FR_DECLARE_PREPARE(relu_backward)
FR_DECLARE_RUN(relu_backward)
FR_DECLARE_RUN(dropout)
FR_DECLARE_RUN(dropout_backward)
FR_DECLARE_RUN(normalize_input)
FR_DECLARE_PREPARE(softmax_xent)
FR_DECLARE_RUN(softmax_xent)
FR_DECLARE_PREPARE(fc_softmax_xent)
FR_DECLARE_RUN(fc_softmax_xent)
FR_DECLARE_PREPARE(batchnorm)
FR_DECLARE_RUN(batchnorm)
FR_DECLARE_PREPARE(batchnorm_backward)
FR_DECLARE_RUN(batchnorm_backward)
FR_DECLARE_RUN(batchnorm_fold)
FR_DECLARE_PREPARE(batchnorm_add)
FR_DECLARE_RUN(batchnorm_add)
FR_DECLARE_RUN(channel_affine)
FR_DECLARE_RUN(max_pool2d)
FR_DECLARE_RUN(max_pool2d_backward)
FR_DECLARE_RUN(avg_pool2d)
FR_DECLARE_RUN(avg_pool2d_backward)
FR_DECLARE_RUN(global_avg_pool)
FR_DECLARE_RUN(global_avg_pool_backward)
FR_DECLARE_RUN(add)
FR_DECLARE_RUN(add_relu)
FR_DECLARE_PREPARE(add_relu_backward)
FR_DECLARE_RUN(add_relu_backward)
FR_DECLARE_RUN(concat)
FR_DECLARE_RUN(concat_backward)
FR_DECLARE_RUN(cast)
FR_DECLARE_RUN(cast_range)
FR_DECLARE_RUN(unscale_grads)
FR_DECLARE_RUN(check_grads)
FR_DECLARE_RUN(restore_if_skipped)
FR_DECLARE_RUN(loss_scale_update)
FR_DECLARE_RUN(gelu)
FR_DECLARE_RUN(gelu_backward)
FR_DECLARE_RUN(silu)
FR_DECLARE_RUN(silu_backward)
FR_DECLARE_RUN(sigmoid)
FR_DECLARE_RUN(sigmoid_backward)
FR_DECLARE_RUN(tanh)
FR_DECLARE_RUN(tanh_backward)
FR_DECLARE_RUN(flatten_chw)
FR_DECLARE_RUN(flatten_chw_backward)
FR_DECLARE_RUN(clear)
FR_DECLARE_RUN(copy)
FR_DECLARE_RUN(accumulate_metrics)
FR_DECLARE_RUN(lr_schedule)
FR_DECLARE_RUN(step_done)
FR_DECLARE_RUN(sgd_update)
FR_DECLARE_RUN(ema_update)
FR_DECLARE_RUN(adam_update)
FR_DECLARE_PREPARE(lars_update)
FR_DECLARE_RUN(lars_update)
FR_DECLARE_RUN(allreduce_mean)

namespace {
constexpr uint32_t kF32 = FR_DTYPE_BIT(FR_F32);
constexpr uint32_t kAny = 0x3Fu;
constexpr uint32_t kFloats = FR_DTYPE_BIT(FR_F32) | FR_DTYPE_BIT(FR_F16) | FR_DTYPE_BIT(FR_BF16);
#define FR_KFD(kind, op, mask, flags, prep, run, destroy) \
  { sizeof(FrKernelDef), kind, op, "cpu", mask, flags, prep, in_arena<run>, destroy }
#define FR_KF(kind, op, mask, flags, prep, run) FR_KFD(kind, op, mask, flags, prep, run, nullptr)
#define FR_K(kind, op, mask, prep, run) FR_KF(kind, op, mask, 0, prep, run)
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
    FR_K(FR_COMPUTE, FR_OP_FC, kF32, fc_prepare, fc_run),
    FR_K(FR_COMPUTE, FR_OP_FC_BACKWARD, kF32, fc_backward_prepare, fc_backward_run),
    FR_KFD(FR_COMPUTE, FR_OP_CONV2D, kF32, kSums | kPrologue | kJoinPrologue, conv2d_prepare, conv2d_run,
           conv2d_destroy),
    FR_KF(FR_COMPUTE, FR_OP_CONV2D_BACKWARD, kF32, kPrologue | kWgradBn | kJoinEpilogue | kCompact,
          conv2d_backward_prepare, conv2d_backward_run),
    FR_K(FR_COMPUTE, FR_OP_RELU, kF32, nullptr, relu_run),
    FR_KF(FR_COMPUTE, FR_OP_RELU_BACKWARD, kF32, kSums, relu_backward_prepare, relu_backward_run),
    FR_K(FR_COMPUTE, FR_OP_DROPOUT, kF32, nullptr, dropout_run),
    FR_K(FR_COMPUTE, FR_OP_DROPOUT_BACKWARD, kF32, nullptr, dropout_backward_run),
    FR_K(FR_COMPUTE, FR_OP_NORMALIZE_INPUT, kF32, nullptr, normalize_input_run),
    FR_K(FR_COMPUTE, FR_OP_SOFTMAX_XENT, kF32, softmax_xent_prepare, softmax_xent_run),
    FR_K(FR_COMPUTE, FR_OP_FC_SOFTMAX_XENT, kF32, fc_softmax_xent_prepare, fc_softmax_xent_run),
    FR_KF(FR_COMPUTE, FR_OP_BATCHNORM, kF32, kSums | kPrologue, batchnorm_prepare, batchnorm_run),
    FR_KF(FR_COMPUTE, FR_OP_BATCHNORM_BACKWARD, kF32, kSums | kWgradBn, batchnorm_backward_prepare,
          batchnorm_backward_run),
    FR_K(FR_COMPUTE, FR_OP_BATCHNORM_FOLD, kF32, nullptr, batchnorm_fold_run),
    FR_KF(FR_COMPUTE, FR_OP_BATCHNORM_ADD, kF32, kSums | kSubsample, batchnorm_add_prepare,
          batchnorm_add_run),
    FR_K(FR_COMPUTE, FR_OP_CHANNEL_AFFINE, kF32, nullptr, channel_affine_run),
    FR_K(FR_COMPUTE, FR_OP_MAX_POOL2D, kF32, nullptr, max_pool2d_run),
    FR_K(FR_COMPUTE, FR_OP_MAX_POOL2D_BACKWARD, kF32, nullptr, max_pool2d_backward_run),
    FR_K(FR_COMPUTE, FR_OP_AVG_POOL2D, kF32, nullptr, avg_pool2d_run),
    FR_K(FR_COMPUTE, FR_OP_AVG_POOL2D_BACKWARD, kF32, nullptr, avg_pool2d_backward_run),
    FR_K(FR_COMPUTE, FR_OP_GLOBAL_AVG_POOL, kF32, nullptr, global_avg_pool_run),
    FR_K(FR_COMPUTE, FR_OP_GLOBAL_AVG_POOL_BACKWARD, kF32, nullptr, global_avg_pool_backward_run),
    FR_K(FR_COMPUTE, FR_OP_ADD, kF32, nullptr, add_run),
    FR_K(FR_COMPUTE, FR_OP_ADD_RELU, kF32, nullptr, add_relu_run),
    FR_KF(FR_COMPUTE, FR_OP_ADD_RELU_BACKWARD, kF32, kSums | kCompact, add_relu_backward_prepare,
          add_relu_backward_run),
    FR_K(FR_COMPUTE, FR_OP_CONCAT, kF32, nullptr, concat_run),
    FR_K(FR_COMPUTE, FR_OP_CONCAT_BACKWARD, kF32, nullptr, concat_backward_run),
    FR_K(FR_COMPUTE, FR_OP_CAST, kFloats, nullptr, cast_run),
    FR_K(FR_RANGE, FR_OP_CAST_RANGE, kFloats, nullptr, cast_range_run),
    FR_K(FR_RANGE, FR_OP_UNSCALE_GRADS, kF32, nullptr, unscale_grads_run),
    FR_K(FR_RANGE, FR_OP_CHECK_GRADS, kAny, nullptr, check_grads_run),
    FR_K(FR_RANGE, FR_OP_RESTORE_IF_SKIPPED, kAny, nullptr, restore_if_skipped_run),
    FR_K(FR_RANGE, FR_OP_LOSS_SCALE_UPDATE, kAny, nullptr, loss_scale_update_run),
    FR_K(FR_COMPUTE, FR_OP_GELU, kF32, nullptr, gelu_run),
    FR_K(FR_COMPUTE, FR_OP_GELU_BACKWARD, kF32, nullptr, gelu_backward_run),
    FR_K(FR_COMPUTE, FR_OP_SILU, kF32, nullptr, silu_run),
    FR_K(FR_COMPUTE, FR_OP_SILU_BACKWARD, kF32, nullptr, silu_backward_run),
    FR_K(FR_COMPUTE, FR_OP_SIGMOID, kF32, nullptr, sigmoid_run),
    FR_K(FR_COMPUTE, FR_OP_SIGMOID_BACKWARD, kF32, nullptr, sigmoid_backward_run),
    FR_K(FR_COMPUTE, FR_OP_TANH, kF32, nullptr, tanh_run),
    FR_K(FR_COMPUTE, FR_OP_TANH_BACKWARD, kF32, nullptr, tanh_backward_run),
    FR_K(FR_COMPUTE, FR_OP_FLATTEN_CHW, kF32, nullptr, flatten_chw_run),
    FR_K(FR_COMPUTE, FR_OP_FLATTEN_CHW_BACKWARD, kF32, nullptr, flatten_chw_backward_run),
    FR_K(FR_RANGE, FR_OP_CLEAR, kAny, nullptr, clear_run),
    FR_K(FR_RANGE, FR_OP_COPY, kAny, nullptr, copy_run),
    FR_K(FR_RANGE, FR_OP_ACCUMULATE_METRICS, kAny, nullptr, accumulate_metrics_run),
    FR_K(FR_RANGE, FR_OP_LR_SCHEDULE, kAny, nullptr, lr_schedule_run),
    FR_K(FR_RANGE, FR_OP_STEP_DONE, kAny, nullptr, step_done_run),
    FR_KF(FR_RANGE, FR_OP_SGD_UPDATE, kF32, kStepMomentum | kWeightCopy | kHalfGrads | kBackups, nullptr,
          sgd_update_run),
    FR_K(FR_RANGE, FR_OP_EMA_UPDATE, kF32, nullptr, ema_update_run),
    FR_KF(FR_RANGE, FR_OP_ADAM_UPDATE, kF32, kStepMomentum | kWeightCopy | kHalfGrads | kBackups, nullptr,
          adam_update_run),
    FR_KF(FR_RANGE, FR_OP_LARS_UPDATE, kF32, kStepMomentum, lars_update_prepare, lars_update_run),
    // waits for the other ranks: outside the thread arena (ops/allreduce_mean.cpp)
    {sizeof(FrKernelDef), FR_RANGE, FR_OP_ALLREDUCE_MEAN, "cpu", kF32, 0, nullptr, allreduce_mean_run,
     nullptr},
};
#undef FR_K
#undef FR_KF
#undef FR_KFD
}  // namespace

}  // namespace fresco::cpu

extern "C" FR_EXPORT FrAbiInfo fresco_plugin_abi(void) {
  return FrAbiInfo{sizeof(FrAbiInfo), FR_ABI_MAJOR, FR_ABI_MINOR, "cpu", "0.1.0"};
}

extern "C" FR_EXPORT FrError* fresco_plugin_init(const FrHostApi* host, FrPlugin* out) {
  using namespace fresco::cpu;
  return fresco::sdk::init_plugin(
      host, out, "cpu",
      {&kCpuDevice, &kThreadsComm, kKernels, static_cast<uint32_t>(sizeof(kKernels) / sizeof(kKernels[0]))});
}
