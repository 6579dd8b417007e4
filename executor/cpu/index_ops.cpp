// top_k and gather_elements (ONNX TopK, ArgMax / ArgMin, GatherElements: a detector's end-to-end
// head picking its best boxes) on our own host loops, f32 row-major tensors. A tensor is seen as
// [outer, axis, inner]; top_k sorts each line along the axis partially (std::partial_sort of its
// indices: the k first in order, equal values by lower index first, NaN before any number when
// largest, as ONNX Runtime orders them), lines spread over the threads; a top_k of one keeps a
// running best over lines side by side (and can follow ArgMax's NaN rule instead); gather_elements reads
// data[o, index, i] for every index element, an index outside the axis giving NaN.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/strings.h"
#include "executor/cpu/ops.h"

namespace stagecraft::executor::cpu {

namespace {

constexpr const char* kTopKImpl = "top_k host";
constexpr const char* kGatherElementsImpl = "gather_elements host";

// Outer and inner extents of `shape` around `axis` (row-major).
std::pair<int64_t, int64_t> around(const graph::Shape& shape, int64_t axis) {
  const auto dims = shape.dims();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= dims[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < dims.size(); ++d) inner *= dims[d];
  return {outer, inner};
}

struct HostTopK {
  int64_t outer = 1, extent = 1, inner = 1, k = 1;
  bool largest = true;
  bool ordered_nan = true;  // TopKAttrs::ordered_nan
};

// k = 1 (ArgMax / ArgMin, a semantic segmenter's class map over millions of pixels): a running
// best over the axis, `inner` lines side by side in contiguous (vectorised) loops, instead of one
// partial sort per line through strided loads. A later element wins only when strictly before the
// best: with ordered_nan, as top_k orders them (NaN before any number when largest, after when
// smallest); without, by plain comparisons (false with a NaN).
void top_1(const HostTopK& g, const float* x, float* values, float* indices) {
  constexpr int64_t kChunk = 2048;
  const int64_t chunks = (g.inner + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < g.outer * chunks; ++t) {
    const int64_t o = t / chunks, i0 = t % chunks * kChunk, n = std::min(kChunk, g.inner - i0);
    const float* src = x + o * g.extent * g.inner + i0;
    float* v = values + o * g.inner + i0;
    float* idx = indices + o * g.inner + i0;
    std::copy_n(src, n, v);
    std::fill_n(idx, n, 0.0f);
    for (int64_t j = 1; j < g.extent; ++j) {
      const float* row = src + j * g.inner;
      const auto fj = static_cast<float>(j);
      if (g.largest) {
        for (int64_t i = 0; i < n; ++i) {
          const bool take = row[i] > v[i] || (g.ordered_nan && std::isnan(row[i]) && !std::isnan(v[i]));
          v[i] = take ? row[i] : v[i];
          idx[i] = take ? fj : idx[i];
        }
      } else {
        for (int64_t i = 0; i < n; ++i) {
          const bool take = row[i] < v[i] || (g.ordered_nan && std::isnan(v[i]) && !std::isnan(row[i]));
          v[i] = take ? row[i] : v[i];
          idx[i] = take ? fj : idx[i];
        }
      }
    }
  }
}

void top_k(const HostTopK& g, const float* x, float* values, float* indices) {
  if (g.k == 1) return top_1(g, x, values, indices);
#pragma omp parallel
  {
    std::vector<int64_t> order(static_cast<size_t>(g.extent));
#pragma omp for schedule(static)
    for (int64_t line = 0; line < g.outer * g.inner; ++line) {
      const int64_t o = line / g.inner, i = line % g.inner;
      const float* src = x + o * g.extent * g.inner + i;
      const auto at = [&](int64_t j) { return src[j * g.inner]; };
      // a before b: the larger (smaller) first, NaN first when largest, then the lower index.
      const auto before = [&](int64_t a, int64_t b) {
        const float va = at(a), vb = at(b);
        const bool na = std::isnan(va), nb = std::isnan(vb);
        if (na || nb) return na && !nb ? g.largest : !na && nb ? !g.largest : a < b;
        if (va != vb) return g.largest ? va > vb : va < vb;
        return a < b;
      };
      std::iota(order.begin(), order.end(), int64_t{0});
      std::partial_sort(order.begin(), order.begin() + g.k, order.end(), before);
      float* v = values + o * g.k * g.inner + i;
      float* n = indices + o * g.k * g.inner + i;
      for (int64_t j = 0; j < g.k; ++j) {
        v[j * g.inner] = at(order[static_cast<size_t>(j)]);
        n[j * g.inner] = static_cast<float>(order[static_cast<size_t>(j)]);
      }
    }
  }
}

struct HostGatherElements {
  int64_t axis = 0;
  std::vector<int64_t> data_dims, index_dims;
  std::vector<int64_t> data_steps;  // row-major element step of each data axis
  int64_t count = 0;                // index elements
};

void gather_elements(const HostGatherElements& g, const float* data, const float* idx, float* y) {
  const auto rank = static_cast<int64_t>(g.index_dims.size());
  const int64_t extent = g.data_dims[static_cast<size_t>(g.axis)];
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < g.count; ++p) {
    int64_t rest = p, offset = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t c = rest % g.index_dims[static_cast<size_t>(d)];
      rest /= g.index_dims[static_cast<size_t>(d)];
      if (d != g.axis) offset += c * g.data_steps[static_cast<size_t>(d)];
    }
    const float f = idx[p];
    int64_t j = std::isfinite(f) ? static_cast<int64_t>(f) : extent;
    if (j < 0) j += extent;
    y[p] = j >= 0 && j < extent && static_cast<float>(static_cast<int64_t>(f)) == f
               ? data[offset + j * g.data_steps[static_cast<size_t>(g.axis)]]
               : std::numeric_limits<float>::quiet_NaN();
  }
}

KernelDesc check(const KernelSpec& spec, DnnlContext&) {
  return host_row_major_desc(spec, spec.kind == graph::OpKind::kTopK ? kTopKImpl : kGatherElementsImpl);
}

std::string build(DnnlKernel& k, const KernelSpec& spec, const KernelDesc&, DnnlContext&) {
  if (spec.kind == graph::OpKind::kTopK) {
    const auto& a = std::get<graph::TopKAttrs>(spec.attrs);
    auto g = std::make_shared<HostTopK>();
    std::tie(g->outer, g->inner) = around(spec.srcs[0].shape, a.axis);
    g->extent = spec.srcs[0].shape[static_cast<size_t>(a.axis)];
    g->k = a.k;
    g->largest = a.largest;
    g->ordered_nan = a.ordered_nan;
    k.add_host([g](const std::vector<void*>& data) {
      top_k(*g, static_cast<const float*>(data[0]), static_cast<float*>(data[1]), static_cast<float*>(data[2]));
    }, {0, dst_slot(0), dst_slot(1)}, kTopKImpl);
    return kTopKImpl;
  }
  const auto& a = std::get<graph::GatherElementsAttrs>(spec.attrs);
  auto g = std::make_shared<HostGatherElements>();
  g->axis = a.axis;
  g->data_dims = spec.srcs[0].shape.dims();
  g->index_dims = spec.srcs[1].shape.dims();
  g->data_steps.assign(g->data_dims.size(), 1);
  for (size_t d = g->data_dims.size(); d-- > 1;) g->data_steps[d - 1] = g->data_steps[d] * g->data_dims[d];
  g->count = spec.srcs[1].shape.numel();
  k.add_host([g](const std::vector<void*>& data) {
    gather_elements(*g, static_cast<const float*>(data[0]), static_cast<const float*>(data[1]), static_cast<float*>(data[2]));
  }, {0, 1, dst_slot(0)}, kGatherElementsImpl);
  return kGatherElementsImpl;
}

}  // namespace

const OpFamily kIndexFamily{"indices", {graph::OpKind::kTopK, graph::OpKind::kGatherElements}, check, build};

}  // namespace stagecraft::executor::cpu
