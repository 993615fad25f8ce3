// tied_choice (plugins/cuda/tuning/tied_choice.h): the matmul search's choice among timed candidates.
#include "tuning/tied_choice.h"

#include <cmath>

#include <gtest/gtest.h>

using fresco::cuda::cluster_size;
using fresco::cuda::tied_choice;

TEST(TiedChoice, TheFastestWhenNothingTies) {
  EXPECT_EQ(tied_choice({3.0f, 2.0f, 2.5f}, {1, 1, 1}, 0.005f), 1);
  EXPECT_EQ(tied_choice({3.0f, 2.0f, 2.02f}, {1, 4, 1}, 0.005f), 1);  // 1% slower: not a tie
}

TEST(TiedChoice, FewerSplitsWinAmongTies) {
  // The H200 MLP's fc0 weight gradient: split-4 at 51.21 us against unsplit at 51.30 (0.18%).
  EXPECT_EQ(tied_choice({51.30f, 51.33f, 54.0f, 51.21f}, {1, 4, 1, 4}, 0.005f), 0);
  // Among equal splits the faster, among equal times the first.
  EXPECT_EQ(tied_choice({10.04f, 10.0f, 10.02f}, {2, 2, 2}, 0.005f), 1);
  EXPECT_EQ(tied_choice({10.0f, 10.0f}, {1, 1}, 0.005f), 0);
  EXPECT_EQ(tied_choice({10.03f, 10.0f, 10.01f}, {2, 8, 2}, 0.005f), 2);
}

// The convolution search's form (FRESCO_CUDNN_TIE_BREAK=1: a tie within 1%): ranks are negated cluster sizes.
// An H100's fp16 stage-2 input gradient (thirty-eighth session): #10 66.58 us (cluster 1), #2 66.86 (8),
// #3 67.00 (1), #1 68.10 (1): #2, which the whole step's tuning chose.
TEST(TiedChoice, TheLargestClusterAmongTiedEngines) {
  EXPECT_EQ(tied_choice({66.58f, 66.86f, 67.00f, 68.10f}, {-1, -8, -1, -1}, 0.01f), 1);
  EXPECT_EQ(tied_choice({66.58f, 66.86f, 67.00f, 68.10f}, {-1, -8, -1, -1}, 0.0f), 0);  // off: the fastest
  EXPECT_EQ(tied_choice({66.58f, 67.6f}, {-1, -8}, 0.01f), 0);  // 1.5% slower: not a tie
}

TEST(TiedChoice, TieZeroIsTheFastestFirst) {
  EXPECT_EQ(tied_choice({2.0f, 2.0f, 1.999f}, {1, 1, 8}, 0.0f), 2);
  EXPECT_EQ(tied_choice({2.0f, 1.999f}, {1, 8}, -0.5f), 1);  // a negative tie is 0
}

TEST(TiedChoice, CandidatesThatDidNotRunAreSkipped) {
  EXPECT_EQ(tied_choice({-1.0f, NAN, 5.0f}, {1, 1, 4}, 0.005f), 2);
  EXPECT_EQ(tied_choice({-1.0f, 0.0f, NAN}, {1, 1, 1}, 0.005f), -1);
  EXPECT_EQ(tied_choice({INFINITY, 7.0f}, {1, 4}, 0.005f), 1);
  EXPECT_EQ(tied_choice({INFINITY, INFINITY}, {1, 1}, 0.005f), -1);
  EXPECT_EQ(tied_choice({}, {}, 0.005f), -1);
}

// The cluster from an engine configuration's knobs (type, value): TILE_CGA_M x TILE_CGA_N (27, 28), as
// logged on an H100 (FRESCO_CUDNN_LOG=2).
TEST(ClusterSize, TheProductOfTheClusterKnobs) {
  EXPECT_EQ(cluster_size({{2, 0}, {13, 1}, {18, 0}, {25, 1}, {27, 8}, {28, 1}}), 8);
  EXPECT_EQ(cluster_size({{2, 1}, {13, 1}, {18, 1}, {25, 0}, {27, 2}, {28, 4}}), 8);
  EXPECT_EQ(cluster_size({{2, 3}, {13, 1}}), 1);    // no cluster knobs
  EXPECT_EQ(cluster_size({{27, 0}, {28, -1}}), 1);  // unset values count as 1
  EXPECT_EQ(cluster_size({}), 1);
}
