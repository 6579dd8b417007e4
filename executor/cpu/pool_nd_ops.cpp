// pool_nd (ONNX MaxPool / AveragePool of any spatial rank, with dilations) on our own host loop:
// f32 row-major tensors [N, C, spatial...]. Per spatial axis and output index, the taps inside
// the input (their offsets along the axis) and the taps inside the padded extent (an average's
// divisor with count_include_pad) are listed once at build; an output point then visits the
// product of its axes' taps. Output points of all planes (N x C) are spread over the threads.
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/strings.h"
#include "executor/cpu/ops.h"

namespace stagecraft::executor::cpu {

namespace {

constexpr const char* kPoolNdImpl = "pool_nd host";

struct AxisTaps {
  std::vector<std::vector<int64_t>> offsets;  // per output index: element offsets of the taps inside the input
  std::vector<int64_t> padded;                // per output index: taps inside [-pad_begin, in + pad_end)
};

struct HostPoolNd {
  bool max = true, count_include_pad = false;
  int64_t planes = 0, in_points = 1, out_points = 1;
  std::vector<int64_t> out;     // output extent per spatial axis (outermost first)
  std::vector<AxisTaps> taps;   // per spatial axis
};

// The taps of every output index of spatial axis `d` of an input of `dims` (row-major).
AxisTaps axis_taps(const graph::PoolNdAttrs& a, size_t d, int64_t in, int64_t out, int64_t step) {
  AxisTaps t;
  t.offsets.resize(static_cast<size_t>(out));
  t.padded.resize(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * a.stride[d] - a.pad_begin[d];
    for (int64_t j = 0; j < a.kernel[d]; ++j) {
      const int64_t at = start + j * a.dilation[d];
      if (at >= 0 && at < in) t.offsets[static_cast<size_t>(o)].push_back(at * step);
      if (at >= -a.pad_begin[d] && at < in + a.pad_end[d]) ++t.padded[static_cast<size_t>(o)];
    }
  }
  return t;
}

void run(const HostPoolNd& g, const float* x, float* y) {
  const auto axes = static_cast<int>(g.out.size());
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < g.planes * g.out_points; ++task) {
    const int64_t plane = task / g.out_points;
    int64_t rest = task % g.out_points;
    // The output index along each axis, and its taps.
    const std::vector<int64_t>* lists[8];
    int64_t padded = 1;
    bool empty = false;
    for (int d = axes - 1; d >= 0; --d) {
      const auto o = static_cast<size_t>(rest % g.out[static_cast<size_t>(d)]);
      rest /= g.out[static_cast<size_t>(d)];
      lists[d] = &g.taps[static_cast<size_t>(d)].offsets[o];
      padded *= g.taps[static_cast<size_t>(d)].padded[o];
      empty = empty || lists[d]->empty();
    }
    const float* src = x + plane * g.in_points;
    double sum = 0;
    float best = -std::numeric_limits<float>::infinity();
    int64_t count = 0;
    size_t k[8] = {};
    while (!empty) {
      int64_t at = 0;
      for (int d = 0; d < axes; ++d) at += (*lists[d])[k[d]];
      const float v = src[at];
      best = std::isnan(v) || v > best ? v : best;  // a NaN in the window wins, as in ONNX Runtime
      sum += static_cast<double>(v);
      ++count;
      int d = axes - 1;
      while (d >= 0 && ++k[d] == lists[d]->size()) k[d--] = 0;
      if (d < 0) break;
    }
    const int64_t divisor = g.count_include_pad ? padded : count;
    y[task] = g.max ? best : divisor > 0 ? static_cast<float>(sum / static_cast<double>(divisor)) : 0.0f;
  }
}

KernelDesc check(const KernelSpec& spec, DnnlContext&) {
  if (spec.srcs[0].shape.rank() - 2 > 8) {
    return Support::unsupported(SupportReason::kAttributes, "pool_nd pools at most 8 spatial axes");
  }
  return host_row_major_desc(spec, kPoolNdImpl);
}

std::string build(DnnlKernel& k, const KernelSpec& spec, const KernelDesc&, DnnlContext&) {
  const auto& a = std::get<graph::PoolNdAttrs>(spec.attrs);
  auto g = std::make_shared<HostPoolNd>();
  g->max = a.max;
  g->count_include_pad = a.count_include_pad;
  const graph::Shape& x = spec.srcs[0].shape;
  const graph::Shape& out = spec.dsts[0].shape;
  g->planes = x[0] * x[1];
  const size_t axes = x.rank() - 2;
  std::vector<int64_t> step(axes, 1);  // row-major element step of each spatial axis
  for (size_t d = axes; d-- > 0;) {
    if (d + 1 < axes) step[d] = step[d + 1] * x[d + 3];
  }
  for (size_t d = 0; d < axes; ++d) {
    g->in_points *= x[d + 2];
    g->out_points *= out[d + 2];
    g->out.push_back(out[d + 2]);
    g->taps.push_back(axis_taps(a, d, x[d + 2], out[d + 2], step[d]));
  }
  return k.add_host_f32([g](const float* from, float* to) { run(*g, from, to); }, kPoolNdImpl);
}

}  // namespace

const OpFamily kPoolNdFamily{"pool_nd", {graph::OpKind::kPoolNd}, check, build};

}  // namespace stagecraft::executor::cpu
