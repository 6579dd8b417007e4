// ThreadLimiter: fewer intra-op threads only after slow runs, kept while they help, given back
// when they do not or when the other process is gone; and a plan's kernels built again for fewer
// threads compute what they compute with all of them.
#include <gtest/gtest.h>

#include <random>

#include "executor/executor.h"
#include "executor/thread_limiter.h"
#include "support/compare.h"
#include "support/models.h"

namespace stagecraft::executor {
namespace {

// Feeds `runs` latencies: `limited_ms` for runs under a limit, `full_ms` for the others (probes
// included); returns whether the limit is on after them.
bool feed(ThreadLimiter& l, int runs, double full_ms, double limited_ms) {
  for (int i = 0; i < runs; ++i) l.record(l.limit() > 0 ? limited_ms : full_ms);
  return l.limiting();
}

TEST(ThreadLimiter, AnIdleMachineKeepsEveryThread) {
  ThreadLimiter l(2);
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> jitter(10.0, 12.5);  // within 1.3x of the fastest
  for (int i = 0; i < 1000; ++i) {
    ASSERT_FALSE(l.limiting()) << "run " << i;
    l.record(jitter(rng));
  }
  EXPECT_EQ(l.limited_runs(), 0);
}

TEST(ThreadLimiter, SlowRunsTryHalfTheThreadsAndKeepThemWhileTheyHelp) {
  ThreadLimiter l(2);
  EXPECT_FALSE(feed(l, 10, 10.0, 10.0));
  // Another process takes a core: 25 ms with both threads, 18 with one.
  EXPECT_FALSE(feed(l, 2, 25.0, 18.0)) << "a median of slow runs first: most of a window";
  EXPECT_TRUE(feed(l, 1, 25.0, 18.0));
  EXPECT_EQ(l.limit(), 1);
  EXPECT_TRUE(feed(l, 200, 25.0, 18.0)) << "probes with both threads are slower: the limit stays";
  EXPECT_GT(l.limited_runs(), 180) << "probes: after 2, 4, 8, then every 16 limited runs";
  // The other process is gone: the next probe with both threads (10 ms) beats the limited 18.
  EXPECT_FALSE(feed(l, ThreadLimiter::kProbeEvery + 2, 10.0, 18.0));
  EXPECT_FALSE(feed(l, 100, 10.0, 18.0));
  EXPECT_EQ(l.limit(), 0);
  // Soon after the load starts, a probe comes after 2 limited runs: a short load ends soon.
  ThreadLimiter brief(2);
  feed(brief, 10, 10.0, 10.0);
  EXPECT_TRUE(feed(brief, 3, 25.0, 18.0));
  EXPECT_FALSE(feed(brief, 3, 10.0, 18.0)) << "the load ended: the first probe gives the threads back";
  ThreadLimiter eight(8);
  feed(eight, 5, 10.0, 10.0);
  EXPECT_TRUE(feed(eight, 3, 30.0, 20.0));
  EXPECT_EQ(eight.limit(), 4) << "half of 8";
}

TEST(ThreadLimiter, ALimitThatDoesNotHelpIsGivenBackAndTriedLessOften) {
  ThreadLimiter l(2);
  feed(l, 10, 10.0, 10.0);
  // Every core slower (a loaded host): fewer threads are slower still.
  EXPECT_TRUE(feed(l, 3, 20.0, 30.0));
  EXPECT_FALSE(feed(l, 6, 20.0, 30.0)) << "given back after one window of limited runs";
  int tries = 0;
  bool was_limited = false;
  for (int i = 0; i < 2000; ++i) {
    const bool limited = l.limiting();
    tries += limited && !was_limited;
    was_limited = limited;
    l.record(l.limit() > 0 ? 30.0 : 20.0);
  }
  // Waits of 16, 32, ... 1024 full runs between tries: 7 tries in 2000 runs, not 200.
  EXPECT_GE(tries, 3);
  EXPECT_LE(tries, 8);
}

// Idle cores while limited call a probe before its turn; one that proves slower makes the next
// such call wait longer.
TEST(ThreadLimiter, IdleCoresCallAProbe) {
  ThreadLimiter l(2);
  feed(l, 10, 10.0, 10.0);
  ASSERT_TRUE(feed(l, 3, 25.0, 18.0));
  EXPECT_TRUE(feed(l, 40, 25.0, 18.0));  // past the early probes: the next comes after 16 runs
  l.note_idle_cores(0.2);
  EXPECT_EQ(l.limit(), 1) << "less than half a core idle: no probe";
  l.note_idle_cores(1.0);
  EXPECT_EQ(l.limit(), 0) << "a core idle: the next run probes";
  l.record(25.0);  // slower: the load is still there
  EXPECT_TRUE(l.limiting());
  EXPECT_EQ(l.limit(), 1);
  feed(l, 4, 25.0, 18.0);
  l.note_idle_cores(1.0);
  EXPECT_EQ(l.limit(), 1) << "the gap doubled to 8 limited runs after a slower probe";
  feed(l, 4, 25.0, 18.0);
  l.note_idle_cores(1.0);
  EXPECT_EQ(l.limit(), 0);
  l.record(10.0);  // the load is gone
  EXPECT_FALSE(l.limiting());
}

TEST(ThreadLimiter, OneThreadIsNeverLimited) {
  ThreadLimiter l(1);
  EXPECT_FALSE(feed(l, 10, 10.0, 10.0));
  EXPECT_FALSE(feed(l, 50, 100.0, 100.0));
  EXPECT_EQ(l.limit(), 0);
}

// A plan that keeps its specs builds its kernels again for one thread, bound to the same tensors:
// a run with them (our Winograd convolutions, oneDNN's, a layer norm, pooling) gives what a run
// with every thread gives.
TEST(ThreadLimiter, KernelsBuiltForOneThreadComputeTheSame) {
  auto& backend = stagecraft::testing::cpu_backend();
  if (backend.device().parallelism() < 2) GTEST_SKIP() << "one OpenMP thread: nothing to limit";
  const stagecraft::testing::Model m = stagecraft::testing::model_of(stagecraft::testing::channel_norms_graph(1, 32), 5);
  const auto inputs = stagecraft::testing::inputs_of(m.graph);
  const auto schedule = stagecraft::testing::analytic_schedule(m.graph, scheduler::Strategy::kSequential);
  PlanOptions options;
  options.can_limit_threads = true;
  ExecutionPlan plan(m.graph, schedule, m.weights, backend, options);
  ASSERT_TRUE(plan.can_limit_threads());
  EXPECT_EQ(plan.parallelism(), backend.device().parallelism());
  const auto& one_thread = plan.limited_kernels(1);
  ASSERT_EQ(one_thread.size(), plan.kernels().size());
  size_t rebuilt = 0;
  for (size_t i = 0; i < one_thread.size(); ++i) {
    if (!one_thread[i]) continue;
    ++rebuilt;
    EXPECT_EQ(one_thread[i]->implementation(), plan.kernels()[i].kernel->implementation()) << plan.kernels()[i].label;
  }
  EXPECT_GT(rebuilt, 2u);
  EXPECT_EQ(&plan.limited_kernels(1), &one_thread) << "built once";
  Executor all(plan);
  const auto want = all.run(inputs);
  ExecutorOptions limited;
  limited.threads = 1;
  Executor one(plan, nullptr, limited);
  const auto got = one.run(inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LT(relative_error(got[i], want[i]), 1e-6) << "output " << i;
  PlanOptions plain;
  ExecutionPlan without(m.graph, schedule, m.weights, backend, plain);
  EXPECT_FALSE(without.can_limit_threads());
}

}  // namespace
}  // namespace stagecraft::executor
