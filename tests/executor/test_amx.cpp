// The AMX decision's parts (executor/cpu/amx.h): a function run in a child process, its outcome
// (exit, signal, timeout), the trial kernels, and the decision on this machine.
#include <signal.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <dnnl.hpp>
#include <fstream>
#include <string>
#include <thread>

#include "executor/cpu/amx.h"
#include "executor/cpu/conv_timing.h"
#include "executor/cpu/dnnl_kernel.h"

namespace stagecraft::executor {
namespace {

using Kind = cpu::ChildOutcome::Kind;

TEST(AmxTrial, AChildsExitStatusComesBack) {
  const auto zero = cpu::run_in_child([] { return 0; }, 10);
  EXPECT_EQ(zero.kind, Kind::kExited);
  EXPECT_TRUE(zero.ok());
  const auto three = cpu::run_in_child([] { return 3; }, 10);
  EXPECT_EQ(three.kind, Kind::kExited);
  EXPECT_EQ(three.code, 3);
  EXPECT_FALSE(three.ok());
  EXPECT_EQ(three.describe(10), "exited with status 3");
  const auto thrown = cpu::run_in_child([]() -> int { throw std::runtime_error("no"); }, 10);
  EXPECT_EQ(thrown.code, 70);
}

TEST(AmxTrial, AnIllegalInstructionIsReportedNotSuffered) {
  const auto outcome = cpu::run_in_child([] {
    raise(SIGILL);
    return 0;
  }, 10);
  EXPECT_EQ(outcome.kind, Kind::kSignalled);
  EXPECT_EQ(outcome.code, SIGILL);
  EXPECT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.describe(10), "died with SIGILL (signal 4)");
}

TEST(AmxTrial, AHangingChildIsKilledAtTheTimeout) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto outcome = cpu::run_in_child([] {
    std::this_thread::sleep_for(std::chrono::seconds(30));
    return 0;
  }, 0.3);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(outcome.kind, Kind::kTimedOut);
  EXPECT_LT(s, 10.0);
  EXPECT_EQ(outcome.describe(0.3), "did not end within 0.3 s");
}

// The trial kernels build and run on any x86 CPU (on AMX where oneDNN may use it; elsewhere on
// what the CPU has), in a child as the decision runs them.
TEST(AmxTrial, TheTrialKernelsRunInAChild) {
  const auto outcome = cpu::run_in_child(cpu::run_amx_trial_kernels, 60);
  EXPECT_TRUE(outcome.ok()) << outcome.describe(60);
}

TEST(AmxTrial, TheDecisionFollowsTheCpuAndTheEnvironment) {
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(in, line) && flags.empty()) {
    if (line.rfind("flags", 0) == 0) flags = line;
  }
  const bool amx = flags.find(" amx_tile") != std::string::npos;
  const cpu::AmxDecision& d = cpu::settle_amx();
  EXPECT_EQ(d.cpu_has_amx, amx);
  if (!amx) {
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.why, "");
  } else {
    EXPECT_NE(d.why.find("AMX"), std::string::npos) << d.why;
  }
  std::printf("this CPU: %s\n", amx ? d.why.c_str() : "no AMX (amx_tile not in /proc/cpuinfo)");
}

// A convolution's output on descriptor `pd`: src and weights the same for every call.
std::vector<float> convolve(const dnnl::engine& engine, const dnnl::convolution_forward::primitive_desc& pd) {
  using tag = dnnl::memory::format_tag;
  const dnnl::memory::desc src_user({1, 24, 9, 9}, dnnl::memory::data_type::f32, tag::nchw),
      w_user({40, 24, 3, 3}, dnnl::memory::data_type::f32, tag::oihw), dst_user({1, 40, 9, 9}, dnnl::memory::data_type::f32, tag::nchw);
  std::vector<float> src(24 * 81), w(40 * 24 * 9), dst(40 * 81);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>((i * 37) % 11) * 0.1f - 0.5f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 53) % 13) * 0.01f - 0.06f;
  dnnl::stream stream(engine);
  dnnl::memory s(pd.src_desc(), engine), k(pd.weights_desc(), engine), d(pd.dst_desc(), engine);
  dnnl::memory src_m(src_user, engine, src.data()), w_m(w_user, engine, w.data()), dst_m(dst_user, engine, dst.data());
  dnnl::reorder(src_m, s).execute(stream, src_m, s);
  dnnl::reorder(w_m, k).execute(stream, w_m, k);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, s}, {DNNL_ARG_WEIGHTS, k}, {DNNL_ARG_DST, d}};
  if (pd.scratchpad_desc().get_size() > 0) args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(pd.scratchpad_desc(), engine));
  dnnl::convolution_forward(pd).execute(stream, args);
  dnnl::reorder(d, dst_m).execute(stream, d, dst_m);
  stream.wait();
  return dst;
}

// An f32 3x3 convolution (stride 1, pad 1) of `in` to `out` channels over h x h in nhwc, weights
// in the layout oneDNN prefers.
dnnl::convolution_forward::desc nhwc_conv(int64_t in, int64_t out, int64_t h) {
  using tag = dnnl::memory::format_tag;
  const auto f32 = dnnl::memory::data_type::f32;
  return {dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
          dnnl::memory::desc({1, in, h, h}, f32, tag::nhwc), dnnl::memory::desc({out, in, 3, 3}, f32, tag::any),
          dnnl::memory::desc({1, out, h, h}, f32, tag::nhwc), {1, 1}, {1, 1}, {1, 1}};
}

// Skipping oneDNN's first candidate by a part of its name (on AMX: "amx") gives its next one,
// which computes the same convolution; a name no candidate has leaves the first.
TEST(AmxTrial, SkippingImplementationsGivesOneDnnsNextCandidate) {
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const dnnl::convolution_forward::desc conv = nhwc_conv(24, 40, 9);  // alive while its descriptors iterate
  const auto fresh = [&] { return dnnl::convolution_forward::primitive_desc(conv, engine); };
  const auto first = fresh();
  const std::string first_impl = first.impl_info_str();
  auto same = fresh();
  EXPECT_TRUE(cpu::skip_implementations(same, "no-such-kernel"));
  EXPECT_EQ(std::string(same.impl_info_str()), first_impl);
  // The first candidate's kernel family ("brgconv", "jit", ...), as AMX's "amx".
  const std::string family = first_impl.substr(0, first_impl.find(':'));
  auto next = fresh();
  if (!cpu::skip_implementations(next, family)) {
    GTEST_SKIP() << "oneDNN has no optimised candidate after " << first_impl << " here";
  }
  const std::string next_impl = next.impl_info_str();
  EXPECT_EQ(next_impl.find(family), std::string::npos) << next_impl;
  std::printf("first candidate %s, next without '%s': %s\n", first_impl.c_str(), family.c_str(), next_impl.c_str());
  const std::vector<float> a = convolve(engine, first), b = convolve(engine, next);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4f) << i;
}

// The timing behind the AMX-or-not choice tells a fast kernel from a slow one either way round:
// oneDNN's optimised convolution against its reference loop (tens of times slower).
TEST(AmxTrial, TheTimingTellsTheFasterConvolution) {
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const dnnl::convolution_forward::desc conv = nhwc_conv(64, 64, 28);
  const dnnl::convolution_forward::primitive_desc fast(conv, engine);
  dnnl::convolution_forward::primitive_desc slow(conv, engine);
  while (std::string(slow.impl_info_str()).rfind("ref", 0) != 0) ASSERT_TRUE(slow.next_impl());
  ASSERT_NE(std::string(fast.impl_info_str()).rfind("ref", 0), 0u) << fast.impl_info_str();
  EXPECT_TRUE(cpu::first_kernel_faster(fast, slow, dnnl::memory::desc(), 2, engine)) << fast.impl_info_str();
  EXPECT_FALSE(cpu::first_kernel_faster(slow, fast, dnnl::memory::desc(), 2, engine)) << fast.impl_info_str();
}

}  // namespace
}  // namespace stagecraft::executor
