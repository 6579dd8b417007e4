// The plan passes one by one (executor/plan/), on a fake backend whose answers the tests choose:
// layouts (reference-only kernels move to a native layout, consumers convert), placement (views),
// synchronisation (events only across streams), memory (reuse only after every earlier access).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "executor/plan/plan_ir.h"
#include "networks/builder.h"
#include "support/models.h"

namespace stagecraft::executor::planning {
namespace {

using graph::Layout;
using graph::OpKind;
using networks::NetBuilder;
using networks::square_conv;

// A device of host memory whose properties the tests choose.
class FakeDevice : public Device {
 public:
  std::string name() const override { return "fake"; }
  std::string device_fingerprint() const override { return "fake"; }
  std::string description() const override { return "fake"; }
  const Capabilities& capabilities() const override { return caps_; }
  int parallelism() const override { return 4; }
  Layout preferred_layout(graph::DataType) const override { return Layout::kNChw8c; }
  std::unique_ptr<Buffer> allocate_buffer(const BufferRequest& request) override {
    return stagecraft::testing::cpu_backend().allocate_buffer(request);
  }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }

 private:
  Capabilities caps_{{graph::DataType::kF32}, {Layout::kNChw8c, Layout::kNHWC, Layout::kNCHW}, false, true};
};

// A backend that runs nothing: supports() answers by rule (convolutions in nChw16c are
// reference-only, every op needs one layout for its inputs and outputs), allocations are host
// memory, kernels are never created in these tests.
class FakeBackend : public Backend {
 public:
  Device& device() override { return device_; }
  const Device& device() const override { return device_; }
  std::unique_ptr<Stream> create_stream() override { return nullptr; }
  std::unique_ptr<Event> create_event() override { return nullptr; }
  KernelDesc describe(const KernelSpec& spec) const override {
    for (const auto& src : spec.srcs) {
      if (src.shape.rank() == 4 && !spec.dsts.empty() && src.layout != spec.dsts[0].layout) {
        return Support::unsupported(SupportReason::kLayout, "one layout");
      }
    }
    if (spec.kind == OpKind::kConv2d && spec.dsts[0].layout == Layout::kNChw16c) {
      return Support::reference("conv in nChw16c is reference-only here");
    }
    return Support::native();
  }
  std::unique_ptr<Kernel> build_kernel(const KernelSpec&, const KernelDesc&) override { return nullptr; }
  std::unique_ptr<Kernel> create_copy(const graph::TensorDesc&, const graph::TensorDesc&) override {
    return nullptr;
  }

 private:
  FakeDevice device_;
};

// conv -> max pool -> two convolutions -> their concatenation.
stagecraft::testing::Model small_model() {
  NetBuilder b("passes", 1, 8, 8, 8);
  auto x = b.input();
  auto c1 = b.conv(x, square_conv(16, 3, 1, 1), "c1");
  auto r = b.max_pool(c1, 3, 1, 1, false, "r");
  auto c2 = b.conv(r, square_conv(16, 1), "c2");
  auto c3 = b.conv(r, square_conv(16, 1), "c3");
  auto cat = b.concat({c2, c3}, "cat");
  return stagecraft::testing::model_of(std::move(b).finish({cat}));
}

struct Built {
  stagecraft::testing::Model m;
  scheduler::Schedule s;
  PlanOptions options;
  std::unique_ptr<PlanIR> ir;
};

std::unique_ptr<Built> build_until_placement(Backend& backend, Layout layout,
                                             scheduler::Strategy strategy = scheduler::Strategy::kSequential) {
  auto b = std::make_unique<Built>();
  b->m = small_model();
  b->s = stagecraft::testing::analytic_schedule(b->m.graph, strategy);
  b->options.layouts = graph::LayoutAssignment::uniform(layout);
  b->ir = std::make_unique<PlanIR>(b->m.graph, b->s, b->m.weights, backend, b->options);
  describe_values(*b->ir);
  legalise_layouts(*b->ir);
  convert_inputs(*b->ir);
  place_tasks(*b->ir);
  return b;
}

graph::OpId op(const graph::Graph& g, const char* name) { return *g.find_op(name); }

TEST(PlanPasses, LayoutsMoveReferenceOnlyKernelsToTheFirstNativeLayout) {
  FakeBackend backend;
  auto b = build_until_placement(backend, Layout::kNChw16c);
  const graph::Graph& g = b->m.graph;
  const PlanIR& ir = *b->ir;
  // Each convolution runs in nChw8c (the fake's first native layout), the pool stays in nChw16c.
  for (const char* conv : {"c1", "c2", "c3"}) {
    EXPECT_EQ(ir.values[g.op(op(g, conv)).outputs[0]].desc.layout, Layout::kNChw8c) << conv;
  }
  EXPECT_EQ(ir.values[g.op(op(g, "r")).outputs[0]].desc.layout, Layout::kNChw16c);
  ASSERT_EQ(ir.fallbacks.size(), 3u);
  for (const LayoutFallback& f : ir.fallbacks) {
    EXPECT_EQ(f.wanted, Layout::kNChw16c);
    EXPECT_EQ(f.used, Layout::kNChw8c);
    EXPECT_NE(f.reason.find("reference-only"), std::string::npos);
  }
  // The pool reads c1 (nChw8c) through a conversion into its own layout; c2 and c3 read the pool
  // through conversions; every kernel task sees one layout.
  size_t conversions = 0;
  for (const Task& t : ir.tasks) {
    if (t.copy) {
      ++conversions;
      continue;
    }
    for (int v : t.srcs) EXPECT_EQ(ir.values[v].desc.layout, ir.values[t.dsts[0]].desc.layout) << t.label;
  }
  EXPECT_GE(conversions, 3u);
}

TEST(PlanPasses, LayoutsRefuseOrAllowReferenceKernelsWhenAsked) {
  FakeBackend backend;
  auto m = small_model();
  const auto s = stagecraft::testing::analytic_schedule(m.graph, scheduler::Strategy::kSequential);
  PlanOptions refuse;
  refuse.layouts = graph::LayoutAssignment::uniform(Layout::kNChw16c);
  refuse.reference_kernels = PlanOptions::ReferenceKernels::kRefuse;
  PlanIR a(m.graph, s, m.weights, backend, refuse);
  describe_values(a);
  EXPECT_THROW(legalise_layouts(a), BackendError);
  PlanOptions allow = refuse;
  allow.reference_kernels = PlanOptions::ReferenceKernels::kAllow;
  PlanIR b(m.graph, s, m.weights, backend, allow);
  describe_values(b);
  legalise_layouts(b);
  EXPECT_TRUE(b.fallbacks.empty());
  for (size_t v = 0; v < m.graph.num_values(); ++v) {
    if (m.graph.value(static_cast<graph::ValueId>(v)).producer != graph::kNoOp) {
      EXPECT_EQ(b.values[v].desc.layout, Layout::kNChw16c);
    }
  }
}

TEST(PlanPasses, PlacementMakesConcatenationPartsViews) {
  FakeBackend backend;
  auto b = build_until_placement(backend, Layout::kNChw8c);
  const graph::Graph& g = b->m.graph;
  const PlanIR& ir = *b->ir;
  const int cat = g.op(op(g, "cat")).outputs[0];
  const int c2 = g.op(op(g, "c2")).outputs[0], c3 = g.op(op(g, "c3")).outputs[0];
  EXPECT_EQ(ir.values[c2].parent, cat);
  EXPECT_EQ(ir.values[c3].parent, cat);
  EXPECT_EQ(ir.values[c2].offset, 0u);
  EXPECT_EQ(ir.values[c3].offset, 16u * 8 * 8 * sizeof(float));  // 16 channels further on
  for (const Task& t : ir.tasks) {
    for (graph::OpId id : t.ops) EXPECT_NE(g.op(id).kind, OpKind::kConcat) << "a concat kernel";
  }
}

TEST(PlanPasses, PlacementNestsAConcatenationInsideTheLargerOneThatContainsIt) {
  // cat(x0, x1) is a run of cat(x0, x1, x2), planned first: the smaller becomes a view at the
  // start of the larger, no part is copied, and no concatenation runs a kernel.
  NetBuilder nb("nested", 1, 8, 8, 8);
  auto x = nb.input();
  auto x0 = nb.conv(x, square_conv(8, 1), "x0");
  auto x1 = nb.conv(x, square_conv(16, 1), "x1");
  auto x2 = nb.conv(x, square_conv(8, 1), "x2");
  auto big = nb.concat({x0, x1, x2}, "big");
  auto small = nb.concat({x0, x1}, "small");
  auto a = nb.conv(small, square_conv(8, 1), "a");
  auto b = nb.conv(big, square_conv(8, 1), "b");
  const auto m = stagecraft::testing::model_of(std::move(nb).finish({a, b}));
  const auto s = stagecraft::testing::analytic_schedule(m.graph, scheduler::Strategy::kSequential);
  FakeBackend backend;
  PlanOptions options;
  options.layouts = graph::LayoutAssignment::uniform(Layout::kNChw8c);
  PlanIR ir(m.graph, s, m.weights, backend, options);
  describe_values(ir);
  legalise_layouts(ir);
  convert_inputs(ir);
  place_tasks(ir);
  const graph::Graph& g = m.graph;
  const auto out = [&](const char* name) { return static_cast<int>(g.op(op(g, name)).outputs[0]); };
  EXPECT_EQ(ir.values[out("small")].parent, out("big"));
  EXPECT_EQ(ir.values[out("small")].offset, 0u);
  EXPECT_EQ(ir.memory.copies, 0u);
  for (const char* part : {"x0", "x1", "x2"}) EXPECT_EQ(ir.root(out(part)), out("big")) << part;
  EXPECT_EQ(ir.offset_in_root(out("x2")), 24u * 8 * 8 * sizeof(float));
  // x0 is a view of the larger concatenation, not of the smaller one: synchronisation must still
  // make `a` (reading the smaller) wait for x0's writer on another stream.
  int x0_task = -1, a_task = -1;
  for (size_t t = 0; t < ir.tasks.size(); ++t) {
    if (ir.tasks[t].ops.empty()) continue;
    if (ir.tasks[t].ops[0] == op(g, "x0")) {
      ir.tasks[t].stream = 1;
      x0_task = static_cast<int>(t);
    }
    if (ir.tasks[t].ops[0] == op(g, "a")) a_task = static_cast<int>(t);
  }
  ASSERT_GE(x0_task, 0);
  ASSERT_GE(a_task, 0);
  synchronise(ir);
  EXPECT_TRUE(ir.before[a_task].test(x0_task));
  EXPECT_EQ(ir.waits[a_task].size(), 1u);
}

TEST(PlanPasses, SynchronisationUsesEventsOnlyAcrossStreams) {
  FakeBackend backend;
  auto b = build_until_placement(backend, Layout::kNChw8c);
  PlanIR& ir = *b->ir;
  // Put c3 on a second stream: it needs the pool (stream 0), and the concatenation's output copy
  // (stream 0) needs c3: two events.
  const graph::Graph& g = b->m.graph;
  for (Task& t : ir.tasks) {
    if (!t.ops.empty() && t.ops[0] == op(g, "c3")) t.stream = 1;
  }
  synchronise(ir);
  EXPECT_EQ(ir.num_streams, 2);
  size_t waits = 0;
  for (size_t t = 0; t < ir.tasks.size(); ++t) {
    waits += ir.waits[t].size();
    if (!ir.tasks[t].ops.empty() && ir.tasks[t].ops[0] == op(g, "c3")) {
      EXPECT_EQ(ir.waits[t].size(), 1u);  // the pool, recorded on stream 0
    }
  }
  EXPECT_EQ(waits, 2u);
  EXPECT_EQ(ir.num_events, 2);
  // Happens-before is transitive along stream 0.
  const size_t last = ir.tasks.size() - 1;
  EXPECT_TRUE(ir.before[last].test(0));
}

TEST(PlanPasses, MemoryReusesBuffersOnlyAfterEveryEarlierAccess) {
  FakeBackend backend;
  auto b = build_until_placement(backend, Layout::kNChw8c);
  PlanIR& ir = *b->ir;
  synchronise(ir);
  plan_memory(ir);
  const graph::Graph& g = b->m.graph;
  const auto addr = [&](const char* name) { return ir.address[g.op(op(g, name)).outputs[0]]; };
  // c1 is dead once the pool has read it: the concatenation (after both) may take its buffer,
  // but the pool's output, read by c2 and c3, never shares with c1's.
  EXPECT_NE(addr("r"), addr("c1"));
  EXPECT_NE(ir.address[g.inputs()[0]], addr("c1"));  // a graph input is never shared
  EXPECT_LT(ir.memory.activation_bytes, ir.memory.activation_bytes_without_reuse);
}

}  // namespace
}  // namespace stagecraft::executor::planning
