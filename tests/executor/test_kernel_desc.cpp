// Kernel descriptions on the CPU backend (KernelDesc, backend.h): what supports() answers is what
// create_kernel(spec, desc) builds — the implementation, the workspace where the desc knows it,
// the layouts — for a 1x1 convolution, a 3x3 one our Winograd kernels take, a ReLU and one spec of
// every other family; a kernel built from a desc computes what create_kernel(spec) computes; an
// unsupported desc, or one made for another op, is refused with an error naming the op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>

#include "executor/backend.h"
#include "executor/cpu/host_simd.h"
#include "executor/cpu/winograd.h"
#include "support/models.h"
#include "forced_fma512_gain.h"

namespace stagecraft::executor {
namespace {

using graph::Activation;
using graph::DataType;
using graph::Layout;
using graph::OpKind;
using graph::Shape;
using graph::TensorDesc;

constexpr auto& cpu = stagecraft::testing::cpu_backend;

TensorDesc tensor(Shape shape, Layout layout, DataType type = DataType::kF32) {
  TensorDesc d = graph::make_desc(std::move(shape), type);
  d.layout = layout;
  if (graph::is_int8(type)) d.scale = 0.05f;
  return d;
}

std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// A spec and the weights it points to (kept together: the spec holds a pointer).
struct Case {
  std::string name;
  KernelSpec spec;
  std::shared_ptr<graph::OpWeights> weights = std::make_shared<graph::OpWeights>();
};

Case conv(std::string name, TensorDesc in, TensorDesc out, graph::Conv2dAttrs a,
          bool residual_input = false) {
  Case c{std::move(name), {}};
  a.in_channels = in.shape[1];
  a.out_channels = out.shape[1];
  c.weights->weight = random_floats(static_cast<size_t>(a.out_channels * a.in_channels / a.groups *
                                                        a.kernel.h * a.kernel.w), 1);
  if (a.bias) c.weights->bias = random_floats(static_cast<size_t>(a.out_channels), 2);
  c.spec.kind = OpKind::kConv2d;
  c.spec.attrs = a;
  c.spec.srcs = {in};
  if (residual_input) c.spec.srcs.push_back(out);
  c.spec.dsts = {out};
  c.spec.weights = c.weights.get();
  c.spec.name = c.name;
  return c;
}

Case op(std::string name, OpKind kind, graph::OpAttrs attrs, std::vector<TensorDesc> srcs,
        std::vector<TensorDesc> dsts) {
  Case c{std::move(name), {}};
  c.spec.kind = kind;
  c.spec.attrs = std::move(attrs);
  c.spec.srcs = std::move(srcs);
  c.spec.dsts = std::move(dsts);
  c.spec.weights = c.weights.get();
  c.spec.name = c.name;
  return c;
}

graph::Conv2dAttrs square(int64_t k, Activation act = Activation::kNone) {
  graph::Conv2dAttrs a;
  a.kernel = {k, k};
  a.padding = {k / 2, k / 2, k / 2, k / 2};
  a.bias = true;
  a.activation = act;
  return a;
}

Case conv_1x1() {
  return conv("conv 1x1", tensor({1, 32, 8, 8}, Layout::kNHWC), tensor({1, 16, 8, 8}, Layout::kNHWC),
              square(1, Activation::kRelu));
}

// 16 -> 16 channels at 9x9 in nhwc: F(4x4,3x3) where our Winograd kernels run (see
// expect_winograd_where_it_runs).
Case conv_3x3_winograd() {
  return conv("conv 3x3", tensor({1, 16, 9, 9}, Layout::kNHWC), tensor({1, 16, 9, 9}, Layout::kNHWC),
              square(3, Activation::kRelu));
}

Case relu() {
  const TensorDesc x = tensor({1, 16, 8, 8}, cpu().preferred_layout());
  return op("relu", OpKind::kRelu, graph::NoAttrs{}, {x}, {x});
}

// One spec of every other family and of the convolutions' other ways.
std::vector<Case> other_cases() {
  std::vector<Case> cases;
  // 12 channels in nChw8c: a channel tail, so the residual is added after the convolution (and no
  // Winograd kernel takes it).
  graph::Conv2dAttrs residual = square(3, Activation::kRelu);
  residual.residual = true;
  cases.push_back(conv("conv residual step", tensor({1, 12, 8, 8}, Layout::kNChw8c),
                       tensor({1, 12, 8, 8}, Layout::kNChw8c), residual, true));
  graph::Conv2dAttrs grouped = square(3);
  grouped.groups = 8;  // 4 channels a group: narrower than the block
  cases.push_back(conv("conv grouped", tensor({1, 32, 8, 8}, Layout::kNChw8c),
                       tensor({1, 32, 8, 8}, Layout::kNChw8c), grouped));
  TensorDesc q = tensor({1, 8, 6, 6}, Layout::kNHWC, DataType::kU8);
  cases.push_back(conv("conv int8", q, tensor({1, 8, 6, 6}, Layout::kNHWC), square(1)));

  Case linear = op("linear", OpKind::kLinear, graph::LinearAttrs{64, 10, true, Activation::kRelu},
                   {tensor({2, 64}, Layout::kNC)}, {tensor({2, 10}, Layout::kNC)});
  linear.weights->weight = random_floats(640, 3);
  linear.weights->bias = random_floats(10, 4);
  cases.push_back(std::move(linear));

  const TensorDesc x = tensor({1, 16, 8, 8}, Layout::kNCHW);
  Case bn = op("batch norm", OpKind::kBatchNorm, graph::BatchNormAttrs{1e-5, Activation::kRelu6}, {x}, {x});
  bn.weights->gamma = random_floats(16, 5);
  bn.weights->beta = random_floats(16, 6);
  bn.weights->mean = random_floats(16, 7);
  bn.weights->var = std::vector<float>(16, 0.5f);
  cases.push_back(std::move(bn));

  graph::MaxPoolAttrs pool;
  pool.kernel = {3, 3};
  pool.stride = {2, 2};
  cases.push_back(op("max pool nchw", OpKind::kMaxPool, pool, {x}, {tensor({1, 16, 3, 3}, Layout::kNCHW)}));
  cases.push_back(op("max pool nhwc", OpKind::kMaxPool, pool, {tensor({1, 16, 8, 8}, Layout::kNHWC)},
                     {tensor({1, 16, 3, 3}, Layout::kNHWC)}));

  const TensorDesc b = tensor({1, 12, 4, 4}, Layout::kNChw8c);
  cases.push_back(op("add of three", OpKind::kAdd, graph::AddAttrs{Activation::kRelu}, {b, b, b}, {b}));
  graph::BinaryAttrs mul;
  mul.op = graph::BinaryOp::kMul;
  cases.push_back(op("binary mul", OpKind::kBinary, mul, {x, x}, {x}));
  const TensorDesc joined = tensor({1, 24, 4, 4}, Layout::kNChw8c);
  cases.push_back(op("concat", OpKind::kConcat, graph::ConcatAttrs{}, {b, b}, {joined}));
  return cases;
}

// Runs a kernel of `spec` on sources of seeded random values (every byte of their buffers, padding
// lanes too); returns the bytes of its destinations.
std::vector<std::vector<uint8_t>> run(Kernel& kernel, const KernelSpec& spec, uint64_t seed) {
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<TensorRef> srcs, dsts;
  for (const TensorDesc& d : spec.srcs) {
    const size_t bytes = static_cast<size_t>(d.bytes());
    buffers.push_back(cpu().allocate(bytes));
    if (d.dtype == DataType::kF32) {
      const std::vector<float> v = random_floats(bytes / sizeof(float), seed++);
      std::memcpy(buffers.back()->data(), v.data(), bytes);
    } else {
      std::mt19937_64 rng(seed++);
      auto* p = static_cast<uint8_t*>(buffers.back()->data());
      for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(rng() % 200);
    }
    srcs.push_back({buffers.back()->data(), d});
  }
  for (const TensorDesc& d : spec.dsts) {
    buffers.push_back(cpu().allocate(static_cast<size_t>(d.bytes())));
    std::memset(buffers.back()->data(), 0, static_cast<size_t>(d.bytes()));
    dsts.push_back({buffers.back()->data(), d});
  }
  auto workspace = cpu().allocate(std::max<size_t>(1, kernel.workspace_bytes()));
  kernel.bind(srcs, dsts, workspace->data());
  auto stream = cpu().create_stream();
  kernel.launch(*stream);
  stream->synchronize();
  std::vector<std::vector<uint8_t>> out;
  for (const TensorRef& d : dsts) {
    const auto* p = static_cast<const uint8_t*>(d.data);
    out.emplace_back(p, p + d.desc.bytes());
  }
  return out;
}

std::vector<Layout> expected_layouts(const KernelSpec& spec) {
  std::vector<Layout> layouts;
  for (const TensorDesc& d : spec.srcs) layouts.push_back(d.layout);
  for (const TensorDesc& d : spec.dsts) layouts.push_back(d.layout);
  return layouts;
}

// The desc of a runnable spec names the implementation the kernel built from it has, its
// workspace where it knows it, and the spec's layouts.
void expect_desc_matches_kernel(const Case& c, bool workspace_known) {
  SCOPED_TRACE(c.name);
  const KernelDesc desc = cpu().supports(c.spec);
  ASSERT_TRUE(desc.runnable()) << desc.support.message;
  EXPECT_EQ(desc.layouts, expected_layouts(c.spec));
  auto kernel = cpu().create_kernel(c.spec, desc);
  EXPECT_FALSE(desc.implementation.empty());
  EXPECT_EQ(desc.implementation, kernel->implementation());
  if (workspace_known) {
    EXPECT_TRUE(desc.knows_workspace());
  }
  if (desc.knows_workspace()) {
    EXPECT_EQ(desc.workspace_bytes, kernel->workspace_bytes());
  }
}

TEST(KernelDesc, NamesTheImplementationWorkspaceAndLayoutsOfTheKernel) {
  expect_desc_matches_kernel(conv_1x1(), true);
  expect_desc_matches_kernel(conv_3x3_winograd(), true);
  expect_desc_matches_kernel(relu(), true);
  EXPECT_EQ(cpu().supports(conv_1x1().spec).implementation.find("winograd"), std::string::npos);
}

TEST(KernelDesc, DescribesAWinogradConvolutionWhereOurKernelsRun) {
  const Case c = conv_3x3_winograd();
  cpu::WinogradProblem p;
  p.src = cpu::host_layout(c.spec.srcs[0]);
  p.dst = cpu::host_layout(c.spec.dsts[0]);
  // Our kernels wherever they apply (oneDNN's AVX-512 kernel would run where a 512-bit FMA does
  // about twice the work of a 256-bit one: test_winograd checks that choice).
  const testing::ForcedFma512Gain narrow(1.0);
  if (!cpu::winograd_supported(p)) GTEST_SKIP() << "this CPU has no AVX2 + FMA: no Winograd kernels";
  const KernelDesc desc = cpu().supports(c.spec);
  EXPECT_TRUE(desc.is_native());
  EXPECT_EQ(desc.implementation, "winograd F(2x2,3x3) (ours)");  // the default, accurate tiles
  EXPECT_GT(desc.workspace_bytes, 0u);
  EXPECT_EQ(desc.workspace_bytes, cpu().create_kernel(c.spec, desc)->workspace_bytes());
}

TEST(KernelDesc, EveryFamilyNamesWhatItBuilds) {
  for (const Case& c : other_cases()) expect_desc_matches_kernel(c, false);
}

TEST(KernelDesc, AKernelBuiltFromTheDescComputesWhatCreateKernelComputes) {
  std::vector<Case> cases = other_cases();
  cases.push_back(conv_1x1());
  cases.push_back(conv_3x3_winograd());
  cases.push_back(relu());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const KernelDesc desc = cpu().supports(c.spec);
    ASSERT_TRUE(desc.runnable()) << desc.support.message;
    auto from_desc = cpu().create_kernel(c.spec, desc);
    auto direct = cpu().create_kernel(c.spec);
    const auto a = run(*from_desc, c.spec, 11), b = run(*direct, c.spec, 11);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i], b[i]) << "destination " << i;
      EXPECT_TRUE(std::any_of(a[i].begin(), a[i].end(), [](uint8_t v) { return v != 0; }))
          << "destination " << i << " was not written";
    }
  }
}

TEST(KernelDesc, AnUnsupportedDescIsRefusedNamingTheOp) {
  TensorDesc x = tensor({1, 16, 8, 8}, Layout::kNCHW, DataType::kF16);
  const Case c = op("half relu", OpKind::kRelu, graph::NoAttrs{}, {x}, {x});
  const KernelDesc desc = cpu().supports(c.spec);
  EXPECT_FALSE(desc.runnable());
  EXPECT_EQ(desc.support.reason, SupportReason::kDataType);
  EXPECT_EQ(desc.implementation, "");
  EXPECT_EQ(desc.state, nullptr);
  EXPECT_EQ(desc.layouts, expected_layouts(c.spec));
  for (const auto& create : std::vector<std::function<void()>>{
           [&] { cpu().create_kernel(c.spec, desc); }, [&] { cpu().create_kernel(c.spec); }}) {
    try {
      create();
      ADD_FAILURE() << "an unsupported spec was built";
    } catch (const BackendError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("cpu cannot run op 'half relu' (relu)"), std::string::npos) << message;
    }
  }
}

TEST(KernelDesc, ADescMadeForAnotherOpIsRefused) {
  const Case c = conv_1x1();
  for (const KernelDesc& foreign : {cpu().supports(relu().spec), KernelDesc(Support::native())}) {
    try {
      cpu().create_kernel(c.spec, foreign);
      ADD_FAILURE() << "a convolution was built from another op's description";
    } catch (const BackendError& e) {
      EXPECT_NE(std::string(e.what()).find("'conv 1x1'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace stagecraft::executor
