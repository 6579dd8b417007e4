// Whether oneDNN may run its AMX kernels here: tried once in a child process (amx.h).
#include "executor/cpu/amx.h"

#include <omp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "common/strings.h"
#include "executor/cpu/conv_timing.h"

namespace stagecraft::executor::cpu {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// Runs `pd`'s primitive once on scratch tensors.
template <typename Primitive>
void run_once(const dnnl::engine& engine, const dnnl::primitive_desc_base& pd, const Primitive& primitive) {
  dnnl::stream stream(engine);
  primitive.execute(stream, scratch_arguments(pd, engine));
  stream.wait();
}

bool cpu_advertises_amx() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) return line.find(" amx_tile") != std::string::npos;
  }
  return false;
}

bool env_is(const char* name, std::initializer_list<const char*> values) {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  for (const char* w : values) {
    if (std::strcmp(v, w) == 0) return true;
  }
  return false;
}

void cap_below_amx() {
  try {
    dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx512_core_bf16);
  } catch (const dnnl::error&) {
    // Too late (a primitive exists already) or not x86: nothing to cap.
  }
}

constexpr double kTrialTimeoutS = 20.0;

AmxDecision decide() {
  AmxDecision d;
  d.cpu_has_amx = cpu_advertises_amx();
  if (std::getenv("ONEDNN_MAX_CPU_ISA") || std::getenv("DNNL_MAX_CPU_ISA")) {
    d.allowed = d.cpu_has_amx;  // as far as the environment's cap lets it
    if (d.cpu_has_amx) d.why = "AMX as the environment's ISA cap allows";
    return d;
  }
  if (!d.cpu_has_amx) return d;
  if (env_is("STAGECRAFT_AMX", {"off", "0"})) {
    cap_below_amx();
    d.why = "AMX off (STAGECRAFT_AMX=off)";
    return d;
  }
  if (env_is("STAGECRAFT_AMX", {"on", "1"})) {
    d.allowed = true;
    d.why = "AMX on (STAGECRAFT_AMX=on, untried)";
    return d;
  }
  const ChildOutcome trial = run_in_child(run_amx_trial_kernels, kTrialTimeoutS);
  d.allowed = trial.ok();
  if (d.allowed) {
    d.why = "AMX on (its kernels ran in a trial process)";
  } else {
    cap_below_amx();
    d.why = cat("AMX off: its trial kernels ", trial.describe(kTrialTimeoutS),
                " (STAGECRAFT_AMX=on or DNNL_MAX_CPU_ISA=AVX512_CORE_AMX forces them)");
  }
  return d;
}

}  // namespace

std::string ChildOutcome::describe(double timeout_s) const {
  switch (kind) {
    case Kind::kExited:
      return cat("exited with status ", code);
    case Kind::kSignalled: {
      const char* abbrev = sigabbrev_np(code);
      return cat("died with ", abbrev ? cat("SIG", abbrev) : std::string("a signal"), " (signal ", code, ")");
    }
    case Kind::kTimedOut:
      return cat("did not end within ", timeout_s, " s");
    case Kind::kNotStarted:
      break;
  }
  return cat("could not start (", std::strerror(code), ")");
}

ChildOutcome run_in_child(const std::function<int()>& body, double timeout_s) {
  ChildOutcome out;
  const pid_t pid = fork();
  if (pid < 0) {
    out.code = errno;
    return out;
  }
  if (pid == 0) {
    int status = 70;
    try {
      omp_set_num_threads(1);
      status = body();
    } catch (...) {
      status = 70;
    }
    _exit(status);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      out.code = errno;
      return out;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      out.kind = ChildOutcome::Kind::kTimedOut;
      return out;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (WIFSIGNALED(status)) {
    out.kind = ChildOutcome::Kind::kSignalled;
    out.code = WTERMSIG(status);
  } else {
    out.kind = ChildOutcome::Kind::kExited;
    out.code = WEXITSTATUS(status);
  }
  return out;
}

int run_amx_trial_kernels() {
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  // A quantised linear layer: the kernel that faulted.
  const dnnl::memory::desc src({4, 64}, dt::u8, tag::nc), weights({64, 64}, dt::s8, tag::any),
      dst({4, 64}, dt::f32, tag::nc);
  const dnnl::inner_product_forward::primitive_desc ip(
      dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, src, weights, dst), engine);
  run_once(engine, ip, dnnl::inner_product_forward(ip));
  // A bf16 convolution in nhwc (where oneDNN has bf16 at all).
  const dnnl::memory::desc csrc({1, 32, 8, 8}, dt::bf16, tag::nhwc), cweights({32, 32, 3, 3}, dt::bf16, tag::any),
      cdst({1, 32, 8, 8}, dt::bf16, tag::nhwc);
  const dnnl::convolution_forward::desc conv(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                             csrc, cweights, cdst, {1, 1}, {1, 1}, {1, 1});
  const dnnl::convolution_forward::primitive_desc cpd(conv, dnnl::primitive_attr(), engine, /*allow_empty=*/true);
  if (cpd) run_once(engine, cpd, dnnl::convolution_forward(cpd));
  return 0;
}

const AmxDecision& settle_amx() {
  static const AmxDecision decision = decide();
  return decision;
}

}  // namespace stagecraft::executor::cpu
