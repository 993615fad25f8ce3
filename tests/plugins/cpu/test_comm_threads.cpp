// The CPU plugin's collective backend "threads" (comm_threads.h) and its allreduce_mean kernel: ranks on
// threads get the mean of their ranges in place, every rank the same bits (the values added in rank order,
// times 1 / world), whatever order the threads arrive in; a rank that meets an aborted group fails instead
// of waiting; sizes that differ between ranks, a call without a communicator and a range that is not f32
// are refused. Part of test_cpu_ops.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fresco/core/plugin_loader.h"
#include "op_harness.h"

using namespace fresco;
using test::OpCall;

namespace {
struct Group {
  const FrCommApi* api = nullptr;
  void* group = nullptr;
  std::vector<void*> comms;
  explicit Group(int world) {
    test::CpuPlugin::get();
    api = PluginRegistry::instance().comm("cpu");
    if (!api) throw std::runtime_error("the cpu plugin has no collective backend");
    throw_if_error(api->group_create(world, &group), "group_create");
    for (int r = 0; r < world; ++r) {
      void* c = nullptr;
      throw_if_error(api->comm_create(group, r, test::CpuPlugin::get().ctx, 0, &c), "comm_create");
      comms.push_back(c);
    }
  }
  ~Group() {
    for (void* c : comms) api->comm_destroy(c);
    api->group_destroy(group);
  }
};

// allreduce_mean of `data[r]` on rank r's thread, each rank's error message (empty: none).
std::vector<std::string> allreduce(Group& g, std::vector<std::vector<float>>& data) {
  std::vector<std::string> errors(data.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < data.size(); ++r)
    threads.emplace_back([&, r] {
      std::this_thread::sleep_for(std::chrono::milliseconds(3 * ((r * 7) % 5)));  // arrive out of order
      errors[r] = OpCall(FR_OP_ALLREDUCE_MEAN).rout(test::range(data[r])).comm(g.comms[r]).run_error();
    });
  for (auto& t : threads) t.join();
  return errors;
}
}  // namespace

TEST(CommThreads, EveryRankGetsTheMeanInRankOrder) {
  constexpr int kRounds = 20;  // one collective after another on each rank's thread, no join between
  for (int world : {1, 2, 3, 5}) {
    SCOPED_TRACE(world);
    Group g(world);
    const int64_t n = 1000 + world;  // chunks of unequal length
    // rank r's values in round k: a pure function, so the expected means can be computed here
    auto value = [](int r, int k, int64_t i) {
      return static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.3 * r + 0.71 * k)) * 3.0f;
    };
    std::vector<std::vector<std::vector<float>>> got(static_cast<size_t>(world));
    std::vector<std::string> errors(static_cast<size_t>(world));
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r)
      threads.emplace_back([&, r] {
        for (int k = 0; k < kRounds; ++k) {
          std::vector<float> x(static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = value(r, k, i);
          if ((r + k) % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));  // out of order
          const std::string e = OpCall(FR_OP_ALLREDUCE_MEAN)
                                    .rout(test::range(x))
                                    .comm(g.comms[static_cast<size_t>(r)])
                                    .run_error();
          if (!e.empty() && errors[static_cast<size_t>(r)].empty()) errors[static_cast<size_t>(r)] = e;
          got[static_cast<size_t>(r)].push_back(std::move(x));
        }
      });
    for (auto& t : threads) t.join();
    for (const std::string& e : errors) ASSERT_EQ(e, "");
    for (int k = 0; k < kRounds; ++k) {
      std::vector<float> want(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        float s = value(0, k, i);
        for (int r = 1; r < world; ++r) s += value(r, k, i);
        want[static_cast<size_t>(i)] = s * (1.0f / static_cast<float>(world));
      }
      for (int r = 0; r < world; ++r)
        ASSERT_EQ(std::memcmp(got[static_cast<size_t>(r)][static_cast<size_t>(k)].data(), want.data(),
                              want.size() * sizeof(float)),
                  0)
            << "rank " << r << " round " << k;
    }
  }
}

TEST(CommThreads, AnAbortedGroupFailsInsteadOfWaiting) {
  Group g(2);
  std::vector<float> x(64, 1.0f);
  // rank 0 alone waits for rank 1, which never comes; the abort releases it with an error
  auto waiting = std::async(std::launch::async, [&] {
    return OpCall(FR_OP_ALLREDUCE_MEAN).rout(test::range(x)).comm(g.comms[0]).run_error();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  g.api->group_abort(g.group);
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "still waiting";
  EXPECT_NE(waiting.get().find("the group was aborted"), std::string::npos);
  // and every later collective fails at once
  EXPECT_NE(OpCall(FR_OP_ALLREDUCE_MEAN).rout(test::range(x)).comm(g.comms[1]).run_error().find("aborted"),
            std::string::npos);
}

TEST(CommThreads, RefusesWhatItCannotReduce) {
  Group g(3);
  // every rank refuses sizes that differ, and the group serves the next collective as before
  std::vector<std::vector<float>> unequal = {std::vector<float>(8, 1.0f), std::vector<float>(8, 2.0f),
                                             std::vector<float>(9, 1.0f)};
  for (const std::string& e : allreduce(g, unequal))
    EXPECT_NE(e.find(" bytes, rank "), std::string::npos) << e;  // "rank q reduces N bytes, rank r M"
  std::vector<std::vector<float>> equal = {std::vector<float>(8, 1.0f), std::vector<float>(8, 2.0f),
                                           std::vector<float>(8, 6.0f)};
  for (const std::string& e : allreduce(g, equal)) EXPECT_EQ(e, "");
  for (const auto& v : equal) EXPECT_EQ(v, std::vector<float>(8, 3.0f));
  std::vector<float> x(8, 1.0f);
  EXPECT_NE(OpCall(FR_OP_ALLREDUCE_MEAN).rout(test::range(x)).run_error().find("no communicator"),
            std::string::npos);
  std::vector<int32_t> ints(8, 1);
  EXPECT_NE(
      OpCall(FR_OP_ALLREDUCE_MEAN).rout(test::range(ints)).comm(g.comms[0]).run_error().find("needs an f32"),
      std::string::npos);
  void* group = nullptr;
  EXPECT_THROW(throw_if_error(g.api->group_create(0, &group), "group_create"), Error);
}
