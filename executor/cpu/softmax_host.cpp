// (Log) softmax over any axis of a row-major f32 tensor on our own host loop, for the axes where
// oneDNN 2.6 has only its reference kernel: every axis but the last of a plain tensor; and
// hardmax (ONNX Hardmax: 1 at the first maximum along the axis), which oneDNN does not have. YOLO's
// distribution decoding, a softmax over the 16 bins of [1, 16, 4, 8400] (axis 1), took 77 ms on
// oneDNN's reference kernel and is about 0.3 ms here. The tensor is [outer, n, inner] around the
// axis; each (outer, block of inner) is reduced along n with the inner elements side by side, so
// the loops run over contiguous memory and vectorise.
#include <algorithm>
#include <cmath>
#include <vector>

#include "executor/cpu/ops.h"

namespace stagecraft::executor::cpu {

namespace {

struct HostSoftmax {
  int64_t outer = 1, n = 1, inner = 1;
  bool log = false;
  bool hard = false;  // 1 at the first maximum along the axis, 0 elsewhere
};

constexpr int64_t kBlock = 256;  // inner elements reduced together

void run(const HostSoftmax& s, const float* x, float* y) {
  const int64_t blocks = (s.inner + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < s.outer * blocks; ++task) {
    const int64_t o = task / blocks, begin = (task % blocks) * kBlock;
    const int64_t width = std::min(kBlock, s.inner - begin);
    float top[kBlock], sum[kBlock];
    const float* in = x + o * s.n * s.inner + begin;
    float* out = y + o * s.n * s.inner + begin;
    std::fill(top, top + width, -INFINITY);
    for (int64_t k = 0; k < s.n; ++k) {
      const float* row = in + k * s.inner;
      for (int64_t j = 0; j < width; ++j) top[j] = std::max(top[j], row[j]);
    }
    if (s.hard) {  // sum[j]: 1 until the first maximum of column j is written
      std::fill(sum, sum + width, 1.0f);
      for (int64_t k = 0; k < s.n; ++k) {
        const float* row = in + k * s.inner;
        float* dst = out + k * s.inner;
        for (int64_t j = 0; j < width; ++j) {
          const float first = row[j] == top[j] ? sum[j] : 0.0f;
          dst[j] = first;
          sum[j] -= first;
        }
      }
      continue;
    }
    std::fill(sum, sum + width, 0.0f);
    for (int64_t k = 0; k < s.n; ++k) {
      const float* row = in + k * s.inner;
      float* dst = out + k * s.inner;
      for (int64_t j = 0; j < width; ++j) {
        const float e = std::exp(row[j] - top[j]);
        if (!s.log) dst[j] = e;
        sum[j] += e;
      }
    }
    if (s.log) {
      for (int64_t j = 0; j < width; ++j) sum[j] = top[j] + std::log(sum[j]);
      for (int64_t k = 0; k < s.n; ++k) {
        const float* row = in + k * s.inner;
        float* dst = out + k * s.inner;
        for (int64_t j = 0; j < width; ++j) dst[j] = row[j] - sum[j];
      }
      continue;
    }
    for (int64_t j = 0; j < width; ++j) sum[j] = 1.0f / sum[j];
    for (int64_t k = 0; k < s.n; ++k) {
      float* dst = out + k * s.inner;
      for (int64_t j = 0; j < width; ++j) dst[j] *= sum[j];
    }
  }
}

bool plain(const graph::TensorDesc& d) {
  return d.layout == graph::Layout::kRowMajor || d.layout == graph::Layout::kNCHW || d.layout == graph::Layout::kNC;
}

}  // namespace

bool host_softmax_applies(const KernelSpec& spec) {
  const graph::TensorDesc &in = spec.srcs[0], &out = spec.dsts[0];
  const auto axis = static_cast<size_t>(std::get<graph::SoftmaxAttrs>(spec.attrs).axis);
  return in.dtype == graph::DataType::kF32 && out.dtype == graph::DataType::kF32 && plain(in) && plain(out) &&
         in.shape == out.shape && axis < in.shape.rank();
}

std::string add_host_softmax(DnnlKernel& k, const KernelSpec& spec) {
  auto s = std::make_shared<HostSoftmax>();
  const graph::Shape& shape = spec.srcs[0].shape;
  const auto& a = std::get<graph::SoftmaxAttrs>(spec.attrs);
  const auto axis = static_cast<size_t>(a.axis);
  for (size_t d = 0; d < shape.rank(); ++d) {
    if (d < axis) s->outer *= shape[d];
    else if (d == axis) s->n = shape[d];
    else s->inner *= shape[d];
  }
  s->log = a.log;
  s->hard = a.hard;
  return k.add_host_f32([s](const float* from, float* to) { run(*s, from, to); }, kHostSoftmaxImpl);
}

}  // namespace stagecraft::executor::cpu
