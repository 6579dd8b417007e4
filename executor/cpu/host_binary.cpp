// Binary element-wise ops with broadcasting on our own host loop, for the operations oneDNN has no
// algorithm for (pow, mod) and the broadcasts oneDNN 2.6 runs only by reference (an efficient linear attention's num / den with den broadcast over the
// last axis, masks over middle axes): f32 row-major tensors of any rank (nchw, nc or plain), both
// operands tensors or the second a constant, either operand broadcast (NumPy's rules, equal ranks).
// Rows of the last axis are spread over the threads; the inner loop reads each operand with stride
// 1 or 0.
#include "common/strings.h"
#include "executor/cpu/ops.h"

namespace stagecraft::executor::cpu {

namespace {

struct HostBinary {
  std::vector<int64_t> dims;             // of the destination
  std::vector<int64_t> first_strides;    // of the first operand (0 where it is broadcast)
  std::vector<int64_t> second_strides;   // of the second operand (0 where it is broadcast)
  graph::BinaryOp op = graph::BinaryOp::kAdd;
  bool constant_first = false;
  graph::Activation activation = graph::Activation::kNone;
  std::vector<float> constant;           // when the second operand is a constant
  bool square = false;                   // x ^ 2 by a constant 2, no activation
};

bool row_major(const graph::TensorDesc& d) {
  return d.layout == graph::Layout::kRowMajor || d.layout == graph::Layout::kNC ||
         d.layout == graph::Layout::kNCHW;
}

// The rows of `h` with the element function `f` (inlined: the op is chosen once per run, not per
// element).
template <class F>
void rows(const HostBinary& h, const float* a, const float* b, float* y, F f) {
  const size_t rank = h.dims.size();
  const int64_t inner = h.dims[rank - 1];
  const int64_t count = graph::Shape(h.dims).numel() / inner;
  const int64_t first_inner = h.first_strides[rank - 1], inner_stride = h.second_strides[rank - 1];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < count; ++r) {
    int64_t rest = r, first = 0, offset = 0;
    for (size_t d = rank - 1; d-- > 0;) {
      const int64_t coord = rest % h.dims[d];
      first += coord * h.first_strides[d];
      offset += coord * h.second_strides[d];
      rest /= h.dims[d];
    }
    const float* x = a + first;
    const float* s = b + offset;
    float* out = y + r * inner;
    if (h.square) {  // x ^ 2 (an IoU matrix's squared differences): one multiply
      for (int64_t i = 0; i < inner; ++i) out[i] = x[i * first_inner] * x[i * first_inner];
      continue;
    }
    if (h.constant_first) {
      for (int64_t i = 0; i < inner; ++i) out[i] = f(s[i * inner_stride], x[i * first_inner]);
    } else {
      for (int64_t i = 0; i < inner; ++i) out[i] = f(x[i * first_inner], s[i * inner_stride]);
    }
    if (h.activation != graph::Activation::kNone) {
      for (int64_t i = 0; i < inner; ++i) out[i] = graph::apply_activation(h.activation, out[i]);
    }
  }
}

void run(const HostBinary& h, const float* a, const float* b, float* y) {
  // The arithmetic of an IoU matrix (1500x1500 in an oriented-box NMS head) inlined; the other
  // ops through graph::apply_binary, the definition every backend shares.
  using graph::BinaryOp;
  switch (h.op) {
    case BinaryOp::kAdd: return rows(h, a, b, y, [](float u, float v) { return u + v; });
    case BinaryOp::kSub: return rows(h, a, b, y, [](float u, float v) { return u - v; });
    case BinaryOp::kMul: return rows(h, a, b, y, [](float u, float v) { return u * v; });
    case BinaryOp::kDiv: return rows(h, a, b, y, [](float u, float v) { return u / v; });
    case BinaryOp::kGreater: return rows(h, a, b, y, [](float u, float v) { return u > v ? 1.0f : 0.0f; });
    case BinaryOp::kLess: return rows(h, a, b, y, [](float u, float v) { return u < v ? 1.0f : 0.0f; });
    default: return rows(h, a, b, y, [&h](float u, float v) { return graph::apply_binary(h.op, u, v); });
  }
}

}  // namespace

std::vector<int64_t> broadcast_strides(std::vector<int64_t> dims, size_t rank) {
  dims.insert(dims.begin(), rank - dims.size(), 1);
  std::vector<int64_t> strides(rank, 0);
  for (int64_t d = static_cast<int64_t>(rank) - 1, stride = 1; d >= 0; --d) {
    const auto i = static_cast<size_t>(d);
    strides[i] = dims[i] == 1 ? 0 : stride;
    stride *= dims[i];
  }
  return strides;
}

bool host_binary_applies(const KernelSpec& spec) {
  if (spec.kind != graph::OpKind::kBinary) return false;
  for (const auto* list : {&spec.srcs, &spec.dsts}) {
    for (const auto& d : *list) {
      if (d.dtype != graph::DataType::kF32 || !row_major(d)) return false;
    }
  }
  return true;
}

std::string add_host_binary(DnnlKernel& k, const KernelSpec& spec) {
  const auto& a = std::get<graph::BinaryAttrs>(spec.attrs);
  auto h = std::make_shared<HostBinary>();
  h->dims = spec.dsts[0].shape.dims();
  const std::vector<int64_t> second =
      a.constant.empty() ? spec.srcs[1].shape.dims() : graph::constant_shape(a, h->dims.size());
  h->first_strides = broadcast_strides(spec.srcs[0].shape.dims(), h->dims.size());
  h->second_strides = broadcast_strides(second, h->dims.size());
  h->op = a.op;
  h->constant_first = a.constant_first;
  h->activation = a.activation;
  if (!a.constant.empty()) h->constant = spec.weights->weight;
  h->square = a.op == graph::BinaryOp::kPow && !a.constant_first && h->constant.size() == 1 &&
              h->constant[0] == 2.0f && a.activation == graph::Activation::kNone;
  if (a.constant.empty()) {
    k.add_host([h](const std::vector<void*>& data) {
      run(*h, static_cast<const float*>(data[0]), static_cast<const float*>(data[1]), static_cast<float*>(data[2]));
    }, {0, 1, dst_slot(0)}, kHostBinaryImpl);
  } else {
    k.add_host([h](const std::vector<void*>& data) {
      run(*h, static_cast<const float*>(data[0]), h->constant.data(), static_cast<float*>(data[1]));
    }, {0, dst_slot(0)}, kHostBinaryImpl);
  }
  return kHostBinaryImpl;
}

}  // namespace stagecraft::executor::cpu
