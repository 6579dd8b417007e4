// What the CUDA builders pass to the own kernels (op_params.h). CUDA-free.
#include "executor/cuda/op_params.h"

#include <algorithm>

#include "common/enum_table.h"
#include "executor/kernel_math.h"

namespace stagecraft::executor::cuda {

using graph::DataType;
using graph::Layout;
using graph::OpKind;
using graph::TensorDesc;

// The own kernels' codes follow the graph's order, so that a fused activation converts by value.
#define STAGECRAFT_SAME_ACT(value, name) \
  static_assert(static_cast<int>(Act::value) == static_cast<int>(graph::Activation::value), name);
STAGECRAFT_ACTIVATIONS(STAGECRAFT_SAME_ACT)
#undef STAGECRAFT_SAME_ACT
#define STAGECRAFT_SAME_BINOP(value, name) \
  static_assert(static_cast<int>(BinOp::value) == static_cast<int>(graph::BinaryOp::value), name);
STAGECRAFT_BINARY_OPS(STAGECRAFT_SAME_BINOP)
#undef STAGECRAFT_SAME_BINOP

// The element types the own kernels read and write; every other type is read as f32.
constexpr Mapped<DataType, Elem> kElems[] = {
    {DataType::kF16, Elem::kF16}, {DataType::kU8, Elem::kU8}, {DataType::kI8, Elem::kI8}};

Elem elem_of(DataType t) { return mapped_or(kElems, t, Elem::kF32); }

Dims4 dims_of(const TensorDesc& d) {
  Dims4 r;
  const graph::Shape& s = d.shape;
  if (s.rank() == 4) {
    r.n = s[0];
    r.c = s[1];
    r.h = s[2];
    r.w = s[3];
  } else if (s.rank() == 2) {
    r.n = s[0];
    r.c = s[1];
  } else if (s.rank() == 1) {
    r.n = s[0];
  } else if (s.rank() > 2) {
    r.n = s[0];
    r.c = s[1];
    r.h = s.numel() / (s[0] * s[1]);
  }
  r.nhwc = d.layout == Layout::kNHWC;
  return r;
}

bool row_major(const TensorDesc& d) { return d.layout == Layout::kRowMajor; }

Act act_of(graph::Activation a) { return static_cast<Act>(static_cast<int>(a)); }

BinOp binop_of(graph::BinaryOp op) { return static_cast<BinOp>(static_cast<int>(op)); }

ActParams act_params(const KernelSpec& spec) {
  ActParams a;
  a.relu6_max = relu6_bound(spec.dsts[0]);
  switch (spec.kind) {
    case OpKind::kLeakyRelu:
      a.act = Act::kLeakyRelu;
      a.alpha = static_cast<float>(std::get<graph::LeakyReluAttrs>(spec.attrs).alpha);
      return a;
    case OpKind::kClip: {
      const auto& c = std::get<graph::ClipAttrs>(spec.attrs);
      a.act = Act::kClip;
      a.alpha = static_cast<float>(c.min);
      a.beta = static_cast<float>(c.max);
      return a;
    }
    case OpKind::kHardSigmoid: {
      const auto& h = std::get<graph::HardSigmoidAttrs>(spec.attrs);
      a.act = Act::kHardSigmoid;
      a.alpha = static_cast<float>(h.alpha);
      a.beta = static_cast<float>(h.beta);
      return a;
    }
    default:
      a.act = act_of(graph::activation_of_kind(spec.kind));
      return a;
  }
}

std::vector<Dims4> fold_broadcast(const std::vector<std::vector<int64_t>>& operands,
                                  const std::vector<int64_t>& out) {
  constexpr size_t kDims = 4;
  std::vector<std::vector<int64_t>> merged(operands.size() + 1);  // the operands', then out's
  std::vector<bool> last;                                         // broadcast pattern of the last merged
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    std::vector<bool> pattern;
    for (const auto& o : operands) pattern.push_back(o[d] == 1);
    if (merged.back().empty() || pattern != last) {
      for (auto& m : merged) m.push_back(1);
      last = pattern;
    }
    for (size_t k = 0; k < operands.size(); ++k) merged[k].back() *= operands[k][d];
    merged.back().back() *= out[d];
  }
  if (merged.back().size() > kDims) return {};
  std::vector<Dims4> r;
  for (auto& m : merged) {
    m.insert(m.begin(), kDims - m.size(), 1);
    Dims4 g;
    g.n = m[0];
    g.c = m[1];
    g.h = m[2];
    g.w = m[3];
    r.push_back(g);
  }
  return r;
}

BinaryOperands binary_operands(const KernelSpec& spec) {
  const auto& a = std::get<graph::BinaryAttrs>(spec.attrs);
  const TensorDesc& dst = spec.dsts[0];
  BinaryOperands r;
  r.params.op = binop_of(a.op);
  r.params.act = act_of(a.activation);
  r.params.relu6_max = relu6_bound(dst);
  const std::vector<int64_t> out(dst.shape.dims().begin(), dst.shape.dims().end());
  const auto shape_of = [](const TensorDesc& d) { return std::vector<int64_t>(d.shape.dims().begin(), d.shape.dims().end()); };
  // Row-major tensors: every operand's geometry from one fold (x first, o second).
  const auto fold = [&](const std::vector<int64_t>& x, const std::vector<int64_t>& o) {
    const std::vector<Dims4> g = fold_broadcast({x, o}, out);
    if (g.empty()) {
      r.folded = false;
      return;
    }
    r.xd = g[0];
    r.od = g[1];
    r.yd = g[2];
  };
  r.yd = dims_of(dst);
  r.xd = dims_of(spec.srcs[0]);
  if (!a.constant.empty()) {
    const std::vector<int64_t> s = graph::constant_shape(a, dst.shape.rank());
    r.o_src = -1;
    r.params.swap = a.constant_first;
    if (row_major(dst)) {
      fold(shape_of(spec.srcs[0]), s);
      return r;
    }
    r.od = Dims4{};
    r.od.n = s[0];
    r.od.c = s[1];
    if (s.size() == 4) {
      r.od.h = s[2];
      r.od.w = s[3];
    }
    return r;
  }
  const bool swap = spec.srcs[0].shape != dst.shape && spec.srcs[1].shape == dst.shape;
  r.x_src = swap ? 1 : 0;
  r.o_src = swap ? 0 : 1;
  r.params.swap = swap;
  const TensorDesc& x = spec.srcs[static_cast<size_t>(r.x_src)];
  const TensorDesc& o = spec.srcs[static_cast<size_t>(r.o_src)];
  if (row_major(dst)) {
    fold(shape_of(x), shape_of(o));
    return r;
  }
  r.xd = dims_of(x);
  r.od = dims_of(o);
  return r;
}

bool reduce_dims(const TensorDesc& in, const TensorDesc& out, Dims4* in_dims, Dims4* out_dims) {
  if (graph::takes_layouts(in) || in.shape.rank() == 2) {
    *in_dims = dims_of(in);
    *out_dims = dims_of(out);
    return true;
  }
  const auto shape_of = [](const TensorDesc& d) { return std::vector<int64_t>(d.shape.dims().begin(), d.shape.dims().end()); };
  const std::vector<Dims4> g = fold_broadcast({shape_of(out)}, shape_of(in));
  if (g.empty() || g[0].n != g[1].n) return false;  // reduce_at keeps N
  *out_dims = g[0];
  *in_dims = g[1];
  return true;
}

Dims4 norm_dims(const TensorDesc& d) {
  if (graph::takes_layouts(d)) return dims_of(d);
  Dims4 r;
  r.c = d.shape[d.shape.rank() - 1];
  r.n = d.shape.numel() / r.c;
  return r;
}

SoftmaxGeometry softmax_geometry(const TensorDesc& d, int64_t axis) {
  SoftmaxGeometry g;
  const graph::Shape& s = d.shape;
  if (graph::takes_layouts(d)) {  // rank 4: the channels (axis 1) in d's layout
    const Dims4 g4 = dims_of(d);
    g.outer = d.layout == Layout::kNHWC ? g4.n * g4.h * g4.w : g4.n;
    g.extent = g4.c;
    g.inner = d.layout == Layout::kNHWC ? 1 : g4.h * g4.w;
    return g;
  }
  const auto at = static_cast<size_t>(axis);
  for (size_t k = 0; k < at; ++k) g.outer *= s[k];
  g.extent = s[at];
  for (size_t k = at + 1; k < s.rank(); ++k) g.inner *= s[k];
  return g;
}

StridedView gather_view(const KernelSpec& spec) {
  const graph::Shape& in = spec.srcs[0].shape;
  const graph::Shape& out = spec.dsts[0].shape;
  std::vector<int64_t> in_strides(in.rank(), 1);
  for (size_t k = in.rank(); k-- > 1;) in_strides[k - 1] = in_strides[k] * in[k];
  StridedView v;
  v.rank = static_cast<int>(out.rank());
  for (size_t k = 0; k < out.rank(); ++k) v.dims[k] = out[k];
  if (spec.kind == OpKind::kTranspose) {
    const auto& perm = std::get<graph::TransposeAttrs>(spec.attrs).perm;
    for (size_t k = 0; k < perm.size(); ++k) v.strides[k] = in_strides[static_cast<size_t>(perm[k])];
    return v;
  }
  const auto& a = std::get<graph::NarrowAttrs>(spec.attrs);  // a narrow
  for (size_t k = 0; k < in.rank(); ++k) v.strides[k] = in_strides[k];
  v.base = a.begin * in_strides[static_cast<size_t>(a.axis)];
  return v;
}

ConcatConstantParams concat_constant_params(const KernelSpec& spec) {
  const auto& a = std::get<graph::ConcatConstantAttrs>(spec.attrs);
  const graph::Shape& in = spec.srcs[0].shape;
  const auto axis = static_cast<size_t>(a.axis);
  ConcatConstantParams p;
  for (size_t k = 0; k < axis; ++k) p.outer *= in[k];
  p.per_sample = p.outer / in[0];
  p.in_extent = in[axis];
  p.count = a.count;
  for (size_t k = axis + 1; k < in.rank(); ++k) p.inner *= in[k];
  p.before = a.before;
  return p;
}

std::vector<GemmCall> matmul_gemms(const graph::Shape& a, const graph::Shape& b) {
  const size_t r = a.rank(), batch_dims = r - 2;
  const int64_t m = a[r - 2], k = a[r - 1], n = b[r - 1];
  std::vector<int64_t> out(batch_dims);
  for (size_t d = 0; d < batch_dims; ++d) out[d] = std::max(a[d], b[d]);
  // The trailing batch dimensions over which each input is whole or broadcast throughout.
  struct Reach {
    bool whole = true, broadcast = true;
  } ra, rb;
  const auto extend = [&](Reach& reach, int64_t extent, size_t d) {
    Reach next{reach.whole && extent == out[d], reach.broadcast && extent == 1};
    if (!next.whole && !next.broadcast) return false;
    reach = next;
    return true;
  };
  size_t first = batch_dims;  // batched: dimensions [first, batch_dims)
  while (first > 0) {
    Reach na = ra, nb = rb;
    if (!extend(na, a[first - 1], first - 1) || !extend(nb, b[first - 1], first - 1)) break;
    ra = na;
    rb = nb;
    --first;
  }
  int64_t batch = 1;
  for (size_t d = first; d < batch_dims; ++d) batch *= out[d];
  // Row-major element strides of each batch dimension of a and b.
  std::vector<int64_t> sa(batch_dims), sb(batch_dims);
  int64_t step_a = m * k, step_b = k * n;
  for (size_t d = batch_dims; d-- > 0;) {
    sa[d] = step_a;
    sb[d] = step_b;
    step_a *= a[d];
    step_b *= b[d];
  }
  const GemmCall base{.m = n,
                      .n = m,
                      .k = k,
                      .lda = n,
                      .ldb = k,
                      .ldc = n,
                      .stride_a = rb.whole ? k * n : 0,  // cuBLAS's A is the second input
                      .stride_b = ra.whole ? m * k : 0,
                      .stride_c = m * n,
                      .batch = batch};
  int64_t groups = 1;
  for (size_t d = 0; d < first; ++d) groups *= out[d];
  std::vector<GemmCall> calls;
  for (int64_t g = 0; g < groups; ++g) {
    GemmCall c = base;
    int64_t rest = g;
    for (size_t d = first; d-- > 0;) {
      const int64_t coord = rest % out[d];
      rest /= out[d];
      if (a[d] != 1) c.offset_b += coord * sa[d];
      if (b[d] != 1) c.offset_a += coord * sb[d];
    }
    c.offset_c = g * batch * m * n;
    calls.push_back(c);
  }
  return calls;
}

}  // namespace stagecraft::executor::cuda
