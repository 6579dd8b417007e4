// resize_nd (ONNX Resize in full: any rank, mode, coordinate rule, antialias, region) on our own
// host loop: f32 row-major tensors. The taps of every axis come from graph::resize_taps at build;
// a run resamples the axes one after another (separably, as ONNX's reference does), in double,
// from the input into a scratch buffer and back, rows of each pass spread over the threads.
#include <algorithm>

#include "common/strings.h"
#include "executor/cpu/ops.h"

namespace stagecraft::executor::cpu {

namespace {

constexpr const char* kResizeNdImpl = "resize_nd host";

struct AxisPass {
  size_t axis = 0;
  graph::ResizeTaps taps;
  int64_t outer = 1, in = 1, out = 1, inner = 1;  // the tensor as [outer, in, inner] -> [outer, out, inner]
};

struct HostResizeNd {
  std::vector<AxisPass> passes;
  int64_t in_numel = 1, out_numel = 1;
  double extrapolation = 0;
};

void resample(const AxisPass& p, double extrapolation, const double* src, double* dst) {
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < p.outer * p.out; ++row) {
    const int64_t o = row / p.out, y = row % p.out;
    double* to = dst + row * p.inner;
    if (p.taps.outside[static_cast<size_t>(y)]) {
      std::fill(to, to + p.inner, extrapolation);
      continue;
    }
    std::fill(to, to + p.inner, 0.0);
    const auto& index = p.taps.index[static_cast<size_t>(y)];
    const auto& weight = p.taps.weight[static_cast<size_t>(y)];
    for (size_t t = 0; t < index.size(); ++t) {
      if (weight[t] == 0) continue;
      const double* from = src + (o * p.in + index[t]) * p.inner;
      for (int64_t i = 0; i < p.inner; ++i) to[i] += weight[t] * from[i];
    }
  }
}

void run(const HostResizeNd& r, const float* x, float* y) {
  std::vector<double> a(x, x + r.in_numel), b;
  for (const AxisPass& p : r.passes) {
    b.assign(static_cast<size_t>(p.outer * p.out * p.inner), 0.0);
    resample(p, r.extrapolation, a.data(), b.data());
    a.swap(b);
  }
  for (int64_t i = 0; i < r.out_numel; ++i) y[i] = static_cast<float>(a[static_cast<size_t>(i)]);
}

KernelDesc check(const KernelSpec& spec, DnnlContext&) { return host_row_major_desc(spec, kResizeNdImpl); }

std::string build(DnnlKernel& k, const KernelSpec& spec, const KernelDesc&, DnnlContext&) {
  const auto& a = std::get<graph::ResizeNdAttrs>(spec.attrs);
  auto r = std::make_shared<HostResizeNd>();
  r->extrapolation = a.extrapolation;
  std::vector<int64_t> dims = spec.srcs[0].shape.dims();
  for (int64_t d : dims) r->in_numel *= d;
  for (size_t axis = 0; axis < dims.size(); ++axis) {
    AxisPass p;
    p.axis = axis;
    p.taps = graph::resize_taps(a, axis, dims[axis]);
    if (p.taps.identity) continue;
    for (size_t d = 0; d < axis; ++d) p.outer *= dims[d];
    for (size_t d = axis + 1; d < dims.size(); ++d) p.inner *= dims[d];
    p.in = dims[axis];
    p.out = a.sizes[axis];
    dims[axis] = p.out;  // the next passes read this one's output
    r->passes.push_back(std::move(p));
  }
  for (int64_t d : dims) r->out_numel *= d;
  return k.add_host_f32([r](const float* from, float* to) { run(*r, from, to); }, kResizeNdImpl);
}

}  // namespace

const OpFamily kResizeNdFamily{"resize_nd", {graph::OpKind::kResizeNd}, check, build};

}  // namespace stagecraft::executor::cpu
