// tied_choice (plugins/cuda/tuning/tied_choice.h): the matmul search's choice among timed candidates.
#include "tuning/tied_choice.h"

#include <cmath>

#include <gtest/gtest.h>

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
