// ops/side_stream_sms.h: the SMs the weight gradients take beside the main stream, by the device's SM count
// and memory bandwidth, and the environment's overrides. Host only: runs without a GPU.
#include <gtest/gtest.h>

#include "ops/side_stream_sms.h"

namespace fresco::cuda {
namespace {

// Peak memory bandwidth as device.cpp computes it (memory clock x bus width x 2), GB/s.
constexpr double kH100Sxm = 2.0 * 2619000e3 * (5120 / 8.0) / 1e9;  // 3352 GB/s, 132 SMs: 25.4 an SM
constexpr double kH200 = 2.0 * 3201000e3 * (6144 / 8.0) / 1e9;     // 4917 GB/s, 132 SMs: 37.2 an SM

TEST(SideStreamSms, LeanMemoryIsUnder30GbsAnSm) {
  EXPECT_TRUE(lean_memory_per_sm(132, kH100Sxm));
  EXPECT_FALSE(lean_memory_per_sm(132, kH200));
  EXPECT_TRUE(lean_memory_per_sm(100, 2999.0));
  EXPECT_FALSE(lean_memory_per_sm(100, 3000.0));
  EXPECT_FALSE(lean_memory_per_sm(132, 0.0));  // the driver did not say: treated as not lean
  EXPECT_FALSE(lean_memory_per_sm(0, 0.0));
}

TEST(SideStreamSms, HopperWeightGradientBlocks) {
  EXPECT_EQ(conv3x3_wgrad_blocks(132, 0), 77);  // 7/12, on an H100 and an H200 alike
  EXPECT_EQ(conv3x3_wgrad_blocks(114, 0), 66);
  EXPECT_EQ(conv3x3_wgrad_blocks(132, 88), 88);    // named
  EXPECT_EQ(conv3x3_wgrad_blocks(132, 500), 132);  // at most every SM
  EXPECT_EQ(conv3x3_wgrad_blocks(1, 0), 1);        // at least one block
}

TEST(SideStreamSms, CudnnWeightGradientTarget) {
  EXPECT_EQ(cudnn_wgrad_sm_target(132, kH100Sxm, -1, true), 116);  // fp16: 7/8, to the nearest
  EXPECT_EQ(cudnn_wgrad_sm_target(114, 2039.0, -1, true), 100);    // an H100 PCIe: 17.9 GB/s an SM
  EXPECT_EQ(cudnn_wgrad_sm_target(132, kH100Sxm, -1, false), 0);   // other precisions: every SM
  EXPECT_EQ(cudnn_wgrad_sm_target(132, kH200, -1, true), 0);       // every SM
  EXPECT_EQ(cudnn_wgrad_sm_target(132, 0.0, -1, true), 0);
  EXPECT_EQ(cudnn_wgrad_sm_target(132, kH200, 116, false), 116);  // named, in any precision
  EXPECT_EQ(cudnn_wgrad_sm_target(132, kH100Sxm, 0, true), 0);    // 0: every SM
  EXPECT_EQ(cudnn_wgrad_sm_target(132, kH100Sxm, 132, true), 0);  // every SM asked: no target
  EXPECT_EQ(cudnn_wgrad_sm_target(132, kH100Sxm, 400, true), 0);
}

}  // namespace
}  // namespace fresco::cuda
