// ThreadLimiter: fewer intra-op threads only after slow runs, kept while they help, given back
// when they do not or when the other process is gone; and a plan's kernels built again for fewer
// threads compute what they compute with all of them.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "executor/executor.h"
#include "executor/thread_limiter.h"
#include "common/cpu_counters.h"
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

// Slow runs while nothing else holds a core (noise on a large VM, this process's own threads)
// do not set the limit off; the same runs with another process holding a core do, and so do
// they where the counters cannot tell (nullopt).
TEST(ThreadLimiter, SlowRunsWithoutOtherLoadKeepEveryThread) {
  ThreadLimiter l(16);
  l.note_other_load(0.1);
  EXPECT_FALSE(feed(l, 10, 3.0, 3.0));
  EXPECT_FALSE(feed(l, 200, 4.5, 5.0)) << "1.5x slower, no other load";
  EXPECT_EQ(l.limited_runs(), 0);
  EXPECT_GT(l.unloaded_slow_runs(), 190);
  l.note_other_load(1.0);
  EXPECT_TRUE(feed(l, 1, 4.5, 3.5)) << "a core held by another process: the same runs limit";
  EXPECT_EQ(l.limit(), 8);
  ThreadLimiter unknown(2);
  unknown.note_other_load(std::nullopt);
  feed(unknown, 10, 10.0, 10.0);
  EXPECT_TRUE(feed(unknown, 3, 25.0, 18.0)) << "no counters: latencies alone decide";
}

namespace {
void spin_for(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  volatile double x = 1;
  while (std::chrono::steady_clock::now() < end) x = x * 1.0000001 + 1e-9;
}
}  // namespace

// OtherLoad: a child process spinning is another's load; a thread of this process spinning is
// this process's own, counted by getrusage and taken off the CPUs' busy time.
TEST(OtherLoad, TellsAnotherProcessFromThisOne) {
  OtherLoad load;
  const std::optional<OtherLoad::Sample> a = load.sample();
  if (!a) GTEST_SKIP() << "no /proc/stat here: the limiter decides on latencies alone";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    spin_for(0.6);
    _exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::optional<OtherLoad::Sample> b = load.sample();
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(b);
  EXPECT_GE(OtherLoad::cores_between(*a, *b), 0.6) << "a spinning child holds about one core";
  EXPECT_LT(OtherLoad::own_cores_between(*a, *b), 0.3) << "this process slept";

  const std::optional<OtherLoad::Sample> c = load.sample();
  std::thread spinner([] { spin_for(0.5); });
  spinner.join();
  const std::optional<OtherLoad::Sample> d = load.sample();
  ASSERT_TRUE(c && d);
  const double own = OtherLoad::own_cores_between(*c, *d);
  EXPECT_GE(own, 0.4) << "this process's thread spun";
  EXPECT_LE(OtherLoad::cores_between(*c, *d), std::max(0.0, OtherLoad::busy_cores_between(*c, *d) - own) + 1e-9)
      << "its time is not another's";
  EXPECT_GE(OtherLoad::busy_cores_between(*c, *d), 0.4) << "the CPUs' counters saw it";
}

// tick() samples at most every kSampleGap; cores() needs samples kSpan apart.
TEST(OtherLoad, EstimatesOnlyOverLongEnoughSpans) {
  OtherLoad load;
  if (!load.sample()) GTEST_SKIP() << "no /proc/stat here";
  load.tick();
  load.tick();
  EXPECT_FALSE(load.cores()) << "one sample";
  std::this_thread::sleep_for(std::chrono::duration<double>(OtherLoad::kSampleGap * 1.5));
  load.tick();
  EXPECT_FALSE(load.cores()) << "two samples, under kSpan apart";
  std::this_thread::sleep_for(std::chrono::duration<double>(OtherLoad::kSpan));
  load.tick();
  ASSERT_TRUE(load.cores());
  EXPECT_GE(*load.cores(), 0.0);
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
