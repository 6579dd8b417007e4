// Caller streams: a plan's stream 0 on the CPU runs its kernels on the thread that runs the plan
// (no worker thread, no second OpenMP team), the executor enqueues the other streams' work first,
// and the caller's OpenMP thread count and cores are given back after the run.
#include <gtest/gtest.h>
#include <omp.h>
#include <pthread.h>
#include <xmmintrin.h>
#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "executor/backend.h"
#include "executor/cpu/cpu_stream.h"
#include "executor/executor.h"
#include "support/models.h"

namespace stagecraft::executor {
namespace {

constexpr auto& cpu = stagecraft::testing::cpu_backend;
using stagecraft::testing::inputs_of;
using stagecraft::testing::Model;
using stagecraft::testing::network;

size_t threads_in_process() {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                                           std::filesystem::directory_iterator{}));
}

PlannedKernel kernel_on(int stream, std::vector<int> waits, int record) {
  PlannedKernel k;
  k.stream = stream;
  k.waits = std::move(waits);
  k.record = record;
  return k;
}

TEST(CallerStream, WorkRunsOnTheCallingThreadAndFailuresComeAtSynchronize) {
  auto caller = cpu().create_caller_stream();
  ASSERT_TRUE(caller->runs_on_caller());
  std::thread::id ran_on;
  bool done = false;
  caller->host_callback([&] {
    ran_on = std::this_thread::get_id();
    done = true;
  });
  EXPECT_TRUE(done) << "a caller stream's work is done when enqueue returns";
  EXPECT_EQ(ran_on, std::this_thread::get_id());

  int after_failure = 0;
  caller->host_callback([] { throw std::runtime_error("kernel failed"); });
  caller->host_callback([&] { ++after_failure; });
  EXPECT_EQ(after_failure, 1) << "later work still runs, as on a worker stream";
  EXPECT_THROW(caller->synchronize(), std::runtime_error);
  EXPECT_NO_THROW(caller->synchronize()) << "a failure is reported once";

  auto worker = cpu().create_stream();
  EXPECT_FALSE(worker->runs_on_caller());
  worker->host_callback([&] { ran_on = std::this_thread::get_id(); });
  worker->synchronize();
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(CallerStream, EventsOfWorkerStreamsAreWaitedForOnTheCaller) {
  auto caller = cpu().create_caller_stream();
  auto worker = cpu().create_stream();
  auto event = cpu().create_event();
  std::atomic<bool> released{false};
  std::atomic<int> worker_value{0};
  worker->host_callback([&] {
    while (!released) std::this_thread::yield();
    worker_value = 7;
  });
  worker->record(*event);
  released = true;
  caller->wait(*event);  // blocks this thread until the worker reaches the record
  EXPECT_EQ(worker_value.load(), 7);
  caller->synchronize();
  worker->synchronize();
}

TEST(LaunchOrder, OtherStreamsGoFirstAndEveryWaitFollowsItsRecord) {
  std::vector<PlannedKernel> ks;
  ks.push_back(kernel_on(0, {}, 0));   // 0: caller, records e0
  ks.push_back(kernel_on(1, {}, -1));  // 1
  ks.push_back(kernel_on(0, {}, 1));   // 2: caller, records e1
  ks.push_back(kernel_on(1, {0}, -1)); // 3: waits for e0 (kernel 0)
  ks.push_back(kernel_on(0, {}, -1));  // 4: caller
  ks.push_back(kernel_on(2, {1}, -1)); // 5: waits for e1 (kernel 2)
  ks.push_back(kernel_on(1, {}, -1));  // 6
  EXPECT_EQ(launch_order(ks, 0), (std::vector<size_t>{1, 0, 3, 2, 5, 6, 4}));
  EXPECT_EQ(launch_order(ks, -1), (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6}));
  // Caller stream 1: kernel 3 waits (for kernel 0, enqueued before it anyway).
  EXPECT_EQ(launch_order(ks, 1), (std::vector<size_t>{0, 2, 4, 5, 1, 3, 6}));
}

TEST(LaunchOrder, RealPlansKeepStreamOrderAndRecordBeforeWait) {
  const Model m = network("googlenet", 64);
  ExecutionPlan plan(m.graph, stagecraft::testing::analytic_schedule(m.graph, scheduler::Strategy::kGreedy),
                     m.weights, cpu());
  ASSERT_GT(plan.num_streams(), 1);
  const auto& ks = plan.kernels();
  const std::vector<size_t> order = launch_order(ks, 0);
  ASSERT_EQ(order.size(), ks.size());
  std::vector<bool> seen(ks.size(), false);
  std::vector<size_t> last_on_stream(static_cast<size_t>(plan.num_streams()), ks.size());
  std::vector<bool> recorded(static_cast<size_t>(plan.num_events()), false);
  size_t overtaken = 0;  // kernels of other streams enqueued before an earlier caller kernel
  for (size_t i : order) {
    ASSERT_FALSE(seen[i]) << "kernel " << i << " twice";
    seen[i] = true;
    const size_t s = static_cast<size_t>(ks[i].stream);
    if (last_on_stream[s] != ks.size()) {
      EXPECT_LT(last_on_stream[s], i) << "stream " << s;
    }
    last_on_stream[s] = i;
    for (int e : ks[i].waits) EXPECT_TRUE(recorded[static_cast<size_t>(e)]) << "kernel " << i;
    if (ks[i].record >= 0) recorded[static_cast<size_t>(ks[i].record)] = true;
    if (s != 0) {
      for (size_t j = 0; j < i; ++j) overtaken += ks[j].stream == 0 && !seen[j];
    }
  }
  EXPECT_GT(overtaken, 0u) << "the other streams' work should be enqueued ahead of the caller's";
}

TEST(CallerStream, RunningAPlanOpensNoSecondOpenMpTeam) {
  // The calling thread already has a team of two, as PyTorch leaves one after its first op.
  omp_set_num_threads(2);
  int team = 0;
#pragma omp parallel
  {
#pragma omp atomic
    ++team;
  }
  ASSERT_EQ(team, 2);
  const size_t before = threads_in_process();
  const Model m = network("squeezenet1_1", 64);
  ExecutionPlan plan(m.graph, stagecraft::testing::analytic_schedule(m.graph, scheduler::Strategy::kSequential),
                     m.weights, cpu());
  ASSERT_EQ(plan.num_streams(), 1);
  Executor executor(plan);
  omp_set_num_threads(5);  // the caller's setting, which the kernels (2 threads) change
  executor.run(inputs_of(m.graph));
  // A worker thread for stream 0 would add itself and an OpenMP team of its own (GNU OpenMP then
  // throttles every team's spinning: see CpuStream).
  EXPECT_LE(threads_in_process(), before);
  EXPECT_EQ(omp_get_max_threads(), 5) << "the caller's OpenMP thread count is given back";
}

// A caller stream keeps the caller's cores (pinning it put the one stream of every one-thread
// server replica on core 0, two replicas then sharing it); its kernels flush denormals to zero,
// and the caller's floating-point mode and OpenMP thread count come back at synchronize().
TEST(CallerStream, KernelsKeepTheCallersCoresAndGiveBackItsFloatingPointMode) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: streams are not placed";
  cpu_set_t mine;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(mine), &mine), 0);
  const int threads = omp_get_max_threads();
  const unsigned mode = _mm_getcsr();
  ASSERT_EQ(mode & 0x8040u, 0u) << "the test starts without flush-to-zero";
  auto stream = cpu().create_caller_stream();
  auto* caller = dynamic_cast<cpu::CpuStream*>(stream.get());
  ASSERT_NE(caller, nullptr);
  int cores_while_placed = 0;
  float denormal_times_one = -1;
  volatile float denormal = 1e-40f, one = 1.0f;
  stream->host_callback([&] {
    caller->place(1);  // what a kernel of one thread beside another stream does
    cpu_set_t now;
    pthread_getaffinity_np(pthread_self(), sizeof(now), &now);
    cores_while_placed = CPU_COUNT(&now);
    denormal_times_one = denormal * one;
    omp_set_num_threads(1);  // what its kernels do
  });
  EXPECT_EQ(cores_while_placed, CPU_COUNT(&mine)) << "the caller stream is not pinned";
  EXPECT_EQ(denormal_times_one, 0.0f) << "denormals flush to zero in the kernels";
  stream->synchronize();
  cpu_set_t after;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(after), &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&mine, &after)) << "the caller keeps the cores it had";
  EXPECT_EQ(omp_get_max_threads(), threads) << "the caller's OpenMP thread count is given back";
  // The mode is MXCSR's control bits (DAZ, exception masks, rounding, FTZ); bits 0-5 are sticky
  // exception flags that any inexact operation on this thread sets (an unordered_map's rehash
  // policy computes in floating point).
  constexpr unsigned kFlags = 0x3Fu;
  EXPECT_EQ(_mm_getcsr() & ~kFlags, mode & ~kFlags) << "the caller's floating-point mode is given back";
  EXPECT_GT(denormal * one, 0.0f) << "denormals are kept on the caller's thread after the run";
}

// A worker's OpenMP team is counted by GNU OpenMP even while it idles; a kept schedule's worker
// teams beside a full caller team made every session of the process sleep between kernels. The
// teams of one session (backend) end when another session runs a kernel of more than one thread
// while it is not in a run.
TEST(WorkerTeams, EndWhenAnotherSessionRunsAndComeBackWithTheirOwner) {
  auto mine = make_backend("cpu");
  auto other = make_backend("cpu");
  auto worker_stream = mine->create_stream();
  auto mine_caller = mine->create_caller_stream();
  auto other_caller = other->create_caller_stream();
  auto& worker = dynamic_cast<cpu::CpuStream&>(*worker_stream);
  // This thread's own team (what the caller streams use) settles at two threads first.
  omp_set_num_threads(2);
#pragma omp parallel
  { (void)omp_get_thread_num(); }
  const int kept_before = cpu::CpuStream::kept_teams();
  const size_t before = threads_in_process();
  std::atomic<int> team{0};
  auto open_team = [&](cpu::CpuStream& s) {  // what a kernel of three threads does
    s.host_callback([&] {
      s.place(3);
      team = 0;
#pragma omp parallel num_threads(3)
      team.fetch_add(1);
    });
    s.synchronize();
  };
  auto run_on = [](Stream& caller, auto& s) {  // a kernel of two threads on a caller stream
    caller.host_callback([&] { s.place(2); });
    caller.synchronize();
  };
  open_team(worker);
  ASSERT_EQ(team.load(), 3);
  EXPECT_EQ(threads_in_process(), before + 2) << "the worker's team: two threads besides it";
  EXPECT_EQ(cpu::CpuStream::kept_teams(), kept_before + 1);

  run_on(*mine_caller, dynamic_cast<cpu::CpuStream&>(*mine_caller));
  worker.synchronize();
  EXPECT_EQ(threads_in_process(), before + 2) << "its own session's kernels keep the team";

  run_on(*other_caller, dynamic_cast<cpu::CpuStream&>(*other_caller));
  worker.synchronize();  // the team ends on the worker, after the work queued there
  EXPECT_EQ(threads_in_process(), before) << "another session's kernel ends the idle team";
  EXPECT_EQ(cpu::CpuStream::kept_teams(), kept_before);

  open_team(worker);
  EXPECT_EQ(team.load(), 3) << "the worker makes a new team for its next kernel";
  EXPECT_EQ(threads_in_process(), before + 2);

  // Sessions running at once (served from several threads) keep their teams; a run that ends
  // while another session holds the cores ends its own.
  mine_caller->host_callback([] {});  // a run of this session begins on its caller stream
  run_on(*other_caller, dynamic_cast<cpu::CpuStream&>(*other_caller));
  worker.synchronize();
  EXPECT_EQ(threads_in_process(), before + 2) << "a session in a run keeps its team";
  mine_caller->synchronize();  // the run ends
  worker.synchronize();
  EXPECT_EQ(threads_in_process(), before) << "its run ended while the other session held the cores";
  open_team(worker);
  worker_stream.reset();
  EXPECT_EQ(cpu::CpuStream::kept_teams(), kept_before) << "a stream that is gone keeps nothing";
  EXPECT_EQ(threads_in_process(), before - 1) << "its thread and team are gone";
}

}  // namespace
}  // namespace stagecraft::executor
