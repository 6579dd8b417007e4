// Where (condition ? x : y) with NumPy broadcasting of its three operands on our own host loop:
// f32 row-major tensors (plain, nc or nchw), each operand an input or a constant of the op.
// Rows of the last axis are spread over the threads; the inner loop reads each operand with
// stride 1 or 0. The branch not taken is never read into the result (a NaN or -inf there stays
// out, unlike condition · x + (1 - condition) · y).
#include <algorithm>

#include "common/strings.h"
#include "executor/cpu/ops.h"

namespace stagecraft::executor::cpu {

namespace {

constexpr const char* kWhereImpl = "where host";

struct HostWhere {
  std::vector<int64_t> dims;                   // of the destination
  std::vector<int64_t> strides[3];             // of condition, x, y (0 where broadcast)
  std::vector<float> constants[3];             // the constant operands (empty: an input)
  int slot[3] = {-1, -1, -1};                  // the data pointer index of each input operand
};

bool row_major(const graph::TensorDesc& d) {
  return d.layout == graph::Layout::kRowMajor || d.layout == graph::Layout::kNC || d.layout == graph::Layout::kNCHW;
}

void run(const HostWhere& h, const float* const operands[3], float* y) {
  const size_t rank = h.dims.size();
  const int64_t inner = h.dims[rank - 1];
  const int64_t rows = graph::Shape(h.dims).numel() / inner;
  const int64_t sc = h.strides[0][rank - 1], sx = h.strides[1][rank - 1], sy = h.strides[2][rank - 1];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rest = r, offset[3] = {0, 0, 0};
    for (size_t d = rank - 1; d-- > 0;) {
      const int64_t coord = rest % h.dims[d];
      for (int k = 0; k < 3; ++k) offset[k] += coord * h.strides[k][d];
      rest /= h.dims[d];
    }
    const float* c = operands[0] + offset[0];
    const float* a = operands[1] + offset[1];
    const float* b = operands[2] + offset[2];
    float* out = y + r * inner;
    for (int64_t i = 0; i < inner; ++i) out[i] = c[i * sc] != 0 ? a[i * sx] : b[i * sy];
  }
}

KernelDesc check(const KernelSpec& spec, DnnlContext&) {
  for (const auto* list : {&spec.srcs, &spec.dsts}) {
    for (const auto& d : *list) {
      if (d.dtype != graph::DataType::kF32) {
        return Support::unsupported(SupportReason::kDataType, "where runs in f32 (dequantise its inputs first)");
      }
      if (!row_major(d)) return Support::unsupported(SupportReason::kLayout, "where reads and writes nchw, nc or plain");
    }
  }
  return described(kWhereImpl, "", 0);
}

std::string build(DnnlKernel& k, const KernelSpec& spec, const KernelDesc&, DnnlContext&) {
  const auto& a = std::get<graph::WhereAttrs>(spec.attrs);
  auto h = std::make_shared<HostWhere>();
  h->dims = spec.dsts[0].shape.dims();
  std::vector<std::vector<int64_t>> inputs;
  for (const auto& d : spec.srcs) inputs.push_back(d.shape.dims());
  const auto shapes = graph::where_operand_shapes(a, inputs);
  const bool constant[3] = {a.condition_constant, a.x_constant, a.y_constant};
  std::vector<int> slots;
  for (int i = 0; i < 3; ++i) {
    h->strides[i] = broadcast_strides(shapes[static_cast<size_t>(i)], h->dims.size());
    if (constant[i]) {
      const graph::OpWeights& w = *spec.weights;  // weights_support checked they are given
      h->constants[i] = i == 0 ? w.gamma : i == 1 ? w.weight : w.bias;
    } else {
      h->slot[i] = static_cast<int>(slots.size());
      slots.push_back(static_cast<int>(slots.size()));
    }
  }
  const int dst = static_cast<int>(slots.size());
  slots.push_back(dst_slot(0));
  k.add_host([h, dst](const std::vector<void*>& data) {
    const float* operands[3];
    for (int i = 0; i < 3; ++i) {
      operands[i] = h->slot[i] >= 0 ? static_cast<const float*>(data[static_cast<size_t>(h->slot[i])]) : h->constants[i].data();
    }
    run(*h, operands, static_cast<float*>(data[static_cast<size_t>(dst)]));
  }, std::move(slots), kWhereImpl);
  return kWhereImpl;
}

}  // namespace

const OpFamily kWhereFamily{"where", {graph::OpKind::kWhere}, check, build};

}  // namespace stagecraft::executor::cpu
