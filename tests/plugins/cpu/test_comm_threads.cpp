// The CPU plugin's collective backend "threads" (comm_threads.h) and its allreduce_mean kernel: ranks on
// threads get the mean of their ranges in place, every rank the same bits (the values added in rank order,
// times 1 / world), whatever order the threads arrive in; a rank that meets an aborted group fails instead
// of waiting; sizes that differ between ranks, a call without a communicator and a range that is not f32
// are refused. Part of test_cpu_ops.
#include <gtest/gtest.h>

#include <chrono>
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
  for (int world : {1, 2, 3, 5}) {
    SCOPED_TRACE(world);
    Group g(world);
    std::mt19937 rng(static_cast<uint32_t>(world));
    std::uniform_real_distribution<float> d(-3.0f, 3.0f);
    const int64_t n = 1000 + world;  // chunks of unequal length
    std::vector<std::vector<float>> data(static_cast<size_t>(world),
                                         std::vector<float>(static_cast<size_t>(n)));
    for (auto& v : data)
      for (float& x : v) x = d(rng);
    std::vector<float> want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      float s = data[0][static_cast<size_t>(i)];
      for (int r = 1; r < world; ++r) s += data[static_cast<size_t>(r)][static_cast<size_t>(i)];
      want[static_cast<size_t>(i)] = s * (1.0f / static_cast<float>(world));
    }
    for (int round = 0; round < 3; ++round) {  // the group serves one collective after another
      auto copy = data;
      for (const std::string& e : allreduce(g, copy)) ASSERT_EQ(e, "");
      for (int r = 0; r < world; ++r)
        ASSERT_EQ(std::memcmp(copy[static_cast<size_t>(r)].data(), want.data(), want.size() * sizeof(float)),
                  0)
            << "rank " << r << " round " << round;
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
  Group g(2);
  std::vector<std::vector<float>> unequal = {std::vector<float>(8, 1.0f), std::vector<float>(9, 1.0f)};
  for (const std::string& e : allreduce(g, unequal))
    EXPECT_NE(e.find(" bytes, rank "), std::string::npos) << e;  // "rank q reduces N bytes, rank r M"
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
