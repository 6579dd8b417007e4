// A failed capture is not fatal (issue 16, item 4): the executor runs that plan in stream mode with
// one warning naming the reason. Checked without a GPU on a backend that forwards to the CPU
// backend and whose capture fails the way a CUDA capture does (after part of the work was
// recorded).
#include <gtest/gtest.h>

#include "common/strings.h"
#include "executor/executor.h"
#include "support/models.h"

namespace stagecraft::executor {
namespace {

using stagecraft::testing::Model;

// The inner backend's device, saying that it can capture.
class CapturingDevice : public Device {
 public:
  explicit CapturingDevice(Device& inner) : inner_(inner), caps_(inner.capabilities()) {
    caps_.capture = true;
  }
  std::string name() const override { return inner_.name(); }
  std::string device_fingerprint() const override { return inner_.device_fingerprint(); }
  std::string description() const override { return "failing capture over " + inner_.description(); }
  int parallelism() const override { return inner_.parallelism(); }
  const Capabilities& capabilities() const override { return caps_; }
  graph::Layout preferred_layout(graph::DataType t) const override { return inner_.preferred_layout(t); }
  std::unique_ptr<Buffer> allocate_buffer(const BufferRequest& request) override {
    return inner_.allocate_buffer(request);
  }
  void upload(void* dst, const void* src, size_t bytes) override { inner_.upload(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { inner_.download(dst, src, bytes); }

 private:
  Device& inner_;
  Capabilities caps_;
};

class FailingCapture : public Backend {
 public:
  FailingCapture(Backend& inner, std::string reason)
      : inner_(inner), device_(inner.device()), reason_(std::move(reason)) {}
  Device& device() override { return device_; }
  const Device& device() const override { return device_; }
  std::unique_ptr<Stream> create_stream() override { return inner_.create_stream(); }
  std::unique_ptr<Event> create_event() override { return inner_.create_event(); }
  KernelDesc describe(const KernelSpec& spec) const override { return inner_.supports(spec); }
  std::unique_ptr<Kernel> build_kernel(const KernelSpec& spec, const KernelDesc& desc) override {
    return inner_.create_kernel(spec, desc);
  }
  std::unique_ptr<Kernel> create_copy(const graph::TensorDesc& s, const graph::TensorDesc& d) override {
    return inner_.create_copy(s, d);
  }
  std::unique_ptr<CapturedWork> capture(Stream& origin, const std::vector<Stream*>& others,
                                        const std::function<void()>& enqueue) override {
    ++captures;
    for (Stream* s : others) s->synchronize();
    origin.synchronize();
    enqueue();  // part of the work is recorded before the call that cannot be captured
    throw BackendError(reason_);
  }
  int captures = 0;

 private:
  Backend& inner_;
  CapturingDevice device_;
  std::string reason_;
};

std::vector<HostTensor> run_plain(const Model& m, const scheduler::Schedule& s,
                                  const std::vector<HostTensor>& inputs) {
  ExecutionPlan plan(m.graph, s, m.weights, stagecraft::testing::cpu_backend());
  ExecutorOptions stream_mode;
  stream_mode.replay_cuda_graph = false;
  Executor executor(plan, nullptr, stream_mode);
  return executor.run(inputs);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(CaptureFallback, AFailedCaptureRunsThePlanInStreamModeWithOneWarning) {
  const graph::Graph raw = stagecraft::testing::every_op_graph(2);
  const Model m{raw, graph::random_weights(raw, 5)};
  const auto s = stagecraft::testing::analytic_schedule(raw, scheduler::Strategy::kGreedy);
  const auto inputs = stagecraft::testing::inputs_of(m.graph, 1), other = stagecraft::testing::inputs_of(m.graph, 2);
  const std::string reason = "cuDNN call failed: operation not permitted when stream is capturing (test 1)";
  FailingCapture backend(stagecraft::testing::cpu_backend(), reason);
  ::testing::internal::CaptureStderr();
  {
    ExecutionPlan plan(m.graph, s, m.weights, backend);
    Executor executor(plan);  // graph mode
    const auto first = executor.run(inputs);
    const auto second = executor.run(other);
    const double ms = executor.execute_repeated(3);
    EXPECT_FALSE(executor.captured());
    EXPECT_EQ(backend.captures, 1) << "a plan tries to capture once";
    EXPECT_GT(ms, 0.0);
    const auto want_first = run_plain(m, s, inputs), want_second = run_plain(m, s, other);
    ASSERT_EQ(first.size(), want_first.size());
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_LT(relative_error(first[i], want_first[i]), 1e-6) << "output " << i;
      EXPECT_LT(relative_error(second[i], want_second[i]), 1e-6) << "output " << i << " (new inputs)";
    }
    // Another plan failing for the same reason does not repeat the warning.
    ExecutionPlan plan2(m.graph, s, m.weights, backend);
    Executor executor2(plan2);
    executor2.run(inputs);
    EXPECT_FALSE(executor2.captured());
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, reason), 1u) << err;
  EXPECT_NE(err.find("kernel by kernel"), std::string::npos) << err;
}

}  // namespace
}  // namespace stagecraft::executor
