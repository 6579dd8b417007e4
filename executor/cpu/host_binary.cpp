// Binary element-wise ops with broadcasting on our own host loop, for the broadcasts oneDNN 2.6
// runs only by reference (an efficient linear attention's num / den with den broadcast over the
// last axis, masks over middle axes): f32 row-major tensors of any rank (nchw, nc or plain), both
// operands tensors or the second a constant. Rows of the last axis are spread over the threads;
// the inner loop reads the second operand with stride 1 or 0.
#include "common/strings.h"
#include "executor/cpu/ops.h"

namespace stagecraft::executor::cpu {

namespace {

struct HostBinary {
  std::vector<int64_t> dims;             // of the destination
  std::vector<int64_t> second_strides;   // of the second operand (0 where it is broadcast)
  graph::BinaryOp op = graph::BinaryOp::kAdd;
  bool constant_first = false;
  graph::Activation activation = graph::Activation::kNone;
  std::vector<float> constant;           // when the second operand is a constant
};

bool row_major(const graph::TensorDesc& d) {
  return d.layout == graph::Layout::kPlain || d.layout == graph::Layout::kNC ||
         d.layout == graph::Layout::kNCHW;
}

float apply(graph::BinaryOp op, float a, float b) {
  switch (op) {
    case graph::BinaryOp::kAdd: return a + b;
    case graph::BinaryOp::kSub: return a - b;
    case graph::BinaryOp::kMul: return a * b;
    case graph::BinaryOp::kDiv: return a / b;
  }
  return a;
}

void run(const HostBinary& h, const float* a, const float* b, float* y) {
  const size_t rank = h.dims.size();
  const int64_t inner = h.dims[rank - 1];
  const int64_t rows = graph::Shape(h.dims).numel() / inner;
  const int64_t inner_stride = h.second_strides[rank - 1];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rest = r, offset = 0;
    for (size_t d = rank - 1; d-- > 0;) {
      offset += rest % h.dims[d] * h.second_strides[d];
      rest /= h.dims[d];
    }
    const float* x = a + r * inner;
    const float* s = b + offset;
    float* out = y + r * inner;
    for (int64_t i = 0; i < inner; ++i) {
      const float u = x[i], v = s[i * inner_stride];
      const float z = h.constant_first ? apply(h.op, v, u) : apply(h.op, u, v);
      out[i] = h.activation == graph::Activation::kNone ? z : graph::apply_activation(h.activation, z);
    }
  }
}

}  // namespace

bool host_binary_applies(const KernelSpec& spec) {
  if (spec.kind != graph::OpKind::kBinary || spec.srcs[0].shape != spec.dsts[0].shape) return false;
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
  h->second_strides.assign(h->dims.size(), 0);
  for (int64_t d = static_cast<int64_t>(h->dims.size()) - 1, stride = 1; d >= 0; --d) {
    const auto i = static_cast<size_t>(d);
    h->second_strides[i] = second[i] == 1 ? 0 : stride;
    stride *= second[i];
  }
  h->op = a.op;
  h->constant_first = a.constant_first;
  h->activation = a.activation;
  if (!a.constant.empty()) h->constant = spec.weights->weight;
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
