// Shape inference of the ops over an axis of a tensor of any rank (linear layers over the last,
// softmax, layer normalisation) and of the ops of row-major tensors (transformers): matmul,
// transpose, narrow, concat_constant, the reductions, grid_sample, pool_nd, top_k and gather_elements.
#include <algorithm>

#include "graph/shape_rules.h"

namespace stagecraft::graph::shape_rules {

namespace {

std::vector<TensorDesc> infer_linear(const Checker& check, const LinearAttrs& a,
                                     const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  const Shape& s = inputs[0].shape;
  check.require(s.rank() == 2 || s.rank() >= 3,
                cat("input must have rank 2 or >= 3 (features last), got ", s.to_string()));
  check.require(s.rank() != 4 || inputs[0].layout == Layout::kRowMajor,
                "a rank-4 input must be a row-major (plain) tensor");
  check.require(a.in_features >= 1 && a.out_features >= 1,
                "in_features and out_features must be >= 1");
  check.require(s[s.rank() - 1] == a.in_features,
                cat("input has ", s[s.rank() - 1], " features but in_features is ",
                    a.in_features));
  std::vector<int64_t> out = s.dims();
  out.back() = a.out_features;
  return {with_shape(inputs[0], Shape(out))};
}

std::vector<TensorDesc> infer_softmax(const Checker& check, const SoftmaxAttrs& a,
                                      const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  const int64_t axis = a.axis;
  check.require(axis >= 0 && axis < static_cast<int64_t>(inputs[0].shape.rank()),
                cat("axis ", axis, " is not a dimension of ", inputs[0].shape.to_string()));
  return {inputs[0]};
}

std::vector<TensorDesc> infer_layer_norm(const Checker& check, const LayerNormAttrs& a,
                                         const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  check.require(inputs[0].shape.rank() >= 2,
                cat("layer_norm needs rank >= 2 (got ", inputs[0].shape.to_string(), ")"));
  check.require(a.eps > 0, "eps must be > 0");
  return {inputs[0]};
}

std::vector<TensorDesc> infer_matmul(const Checker& check, const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 2, 2);
  const Shape& a = inputs[0].shape;
  const Shape& b = inputs[1].shape;
  const size_t r = a.rank();
  check.require(r >= 3 && b.rank() == r,
                cat("inputs must have the same rank >= 3, got ", a.to_string(), " and ",
                    b.to_string()));
  check.require(a[r - 1] == b[r - 2], cat("inner dimensions differ: ", a.to_string(), " x ",
                                          b.to_string()));
  check_same_dtype(check, inputs);
  std::vector<int64_t> out(r);
  for (size_t i = 0; i + 2 < r; ++i) {
    check.require(a[i] == b[i] || a[i] == 1 || b[i] == 1,
                  cat("batch dimensions of ", a.to_string(), " and ", b.to_string(),
                      " do not broadcast (dimension ", i, ")"));
    out[i] = std::max(a[i], b[i]);
  }
  out[r - 2] = a[r - 2];
  out[r - 1] = b[r - 1];
  return {row_major_like(inputs[0], Shape(out))};
}

std::vector<TensorDesc> infer_transpose(const Checker& check, const TransposeAttrs& a,
                                        const TensorDesc& x) {
  const size_t r = x.shape.rank();
  std::vector<int64_t> sorted = a.perm;
  std::sort(sorted.begin(), sorted.end());
  bool permutation = sorted.size() == r;
  for (size_t i = 0; permutation && i < r; ++i) permutation = sorted[i] == static_cast<int64_t>(i);
  check.require(permutation, cat("perm must be a permutation of 0 .. ", r - 1, " for ",
                                 x.shape.to_string()));
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) out[i] = x.shape[static_cast<size_t>(a.perm[i])];
  return {row_major_like(x, Shape(out))};
}

std::vector<TensorDesc> infer_narrow(const Checker& check, const NarrowAttrs& a,
                                     const TensorDesc& x) {
  const int64_t r = static_cast<int64_t>(x.shape.rank());
  check.require(a.axis >= 0 && a.axis < r, cat("axis ", a.axis, " is not a dimension of ",
                                               x.shape.to_string()));
  const int64_t size = x.shape[static_cast<size_t>(a.axis)];
  check.require(a.begin >= 0 && a.begin < a.end && a.end <= size,
                cat("range [", a.begin, ", ", a.end, ") is not inside [0, ", size, ") of axis ",
                    a.axis));
  Shape out = x.shape;
  out[static_cast<size_t>(a.axis)] = a.end - a.begin;
  return {row_major_like(x, out)};
}

std::vector<TensorDesc> infer_concat_constant(const Checker& check, const ConcatConstantAttrs& a,
                                              const TensorDesc& x) {
  const int64_t r = static_cast<int64_t>(x.shape.rank());
  check.require(a.axis >= 1 && a.axis < r, cat("axis ", a.axis, " must be in [1, ", r, ")"));
  check.require(a.count >= 1, cat("count must be >= 1, got ", a.count));
  Shape out = x.shape;
  out[static_cast<size_t>(a.axis)] += a.count;
  return {row_major_like(x, out)};
}

std::vector<TensorDesc> infer_reduce(const Checker& check, const ReduceAttrs& a,
                                     const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  const auto rank = static_cast<int64_t>(inputs[0].shape.rank());
  check.require(rank >= 1, "input must have rank >= 1");
  const auto& axes = a.axes;
  check.require(!axes.empty() && std::is_sorted(axes.begin(), axes.end()) &&
                    std::adjacent_find(axes.begin(), axes.end()) == axes.end() && axes.front() >= 0 &&
                    axes.back() < rank,
                cat("axes must be distinct, ascending, among 0 .. ", rank - 1));
  TensorDesc out = inputs[0];
  for (int64_t axis : axes) out.shape[static_cast<size_t>(axis)] = 1;
  return {out};
}

std::vector<TensorDesc> infer_grid_sample(const Checker& check, const GridSampleAttrs& a,
                                          const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 2, 2);
  check.require(a.mode >= 0 && a.mode <= 2, "mode must be 0 (nearest), 1 (linear) or 2 (cubic)");
  check.require(a.padding >= 0 && a.padding <= 2, "padding must be 0 (zeros), 1 (border) or 2 (reflection)");
  check_same_dtype(check, inputs);
  check.require(inputs[0].dtype == DataType::kF32, "grid_sample runs in f32");
  const Shape &x = inputs[0].shape, &grid = inputs[1].shape;
  check.require(x.rank() == 4 || x.rank() == 5, "the input must be 4-D or 5-D (2-D or 3-D sampling)");
  check.require(grid.rank() == x.rank(), "the grid must have the input's rank");
  check.require(grid[0] == x[0], "the grid's batch must be the input's");
  check.require(grid[grid.rank() - 1] == static_cast<int64_t>(x.rank()) - 2,
                "the grid's last dimension must be the number of spatial dimensions");
  std::vector<int64_t> out = {x[0], x[1]};
  for (size_t d = 1; d + 1 < grid.rank(); ++d) out.push_back(grid[d]);
  return {row_major_like(inputs[0], Shape(out))};
}

// An index as a float32 integer is exact below 2^24.
constexpr int64_t kExactIndices = int64_t{1} << 24;

std::vector<TensorDesc> infer_top_k(const Checker& check, const TopKAttrs& a, const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  check.require(inputs[0].dtype == DataType::kF32, "top_k runs in f32");
  const Shape& x = inputs[0].shape;
  check.require(a.axis >= 0 && a.axis < static_cast<int64_t>(x.rank()), cat("axis ", a.axis, " is outside ", x.to_string()));
  const int64_t extent = x[static_cast<size_t>(a.axis)];
  check.require(a.k >= 1 && a.k <= extent, cat("k ", a.k, " must be between 1 and the axis's extent ", extent));
  check.require(extent <= kExactIndices, cat("the axis has ", extent, " elements: indices are exact float32 integers below 2^24"));
  check.require(a.ordered_nan || a.k == 1, "ordered_nan false is for k = 1 (ArgMax / ArgMin)");
  std::vector<int64_t> out = x.dims();
  out[static_cast<size_t>(a.axis)] = a.k;
  const TensorDesc y = row_major_like(inputs[0], Shape(out));
  return {y, y};
}

std::vector<TensorDesc> infer_gather_elements(const Checker& check, const GatherElementsAttrs& a,
                                              const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 2, 2);
  check_same_dtype(check, inputs);
  check.require(inputs[0].dtype == DataType::kF32, "gather_elements runs in f32");
  const Shape &x = inputs[0].shape, &idx = inputs[1].shape;
  check.require(idx.rank() == x.rank(), cat("the indices ", idx.to_string(), " must have the data's rank (", x.to_string(), ")"));
  check.require(a.axis >= 0 && a.axis < static_cast<int64_t>(x.rank()), cat("axis ", a.axis, " is outside ", x.to_string()));
  check.require(x[static_cast<size_t>(a.axis)] <= kExactIndices,
                cat("the axis has ", x[static_cast<size_t>(a.axis)], " elements: indices are exact float32 integers below 2^24"));
  for (size_t d = 0; d < x.rank(); ++d) {
    check.require(static_cast<int64_t>(d) == a.axis || idx[d] <= x[d],
                  cat("the indices ", idx.to_string(), " exceed the data ", x.to_string(), " off the axis"));
  }
  return {row_major_like(inputs[0], idx)};
}

std::vector<TensorDesc> infer_pool_nd(const Checker& check, const PoolNdAttrs& a,
                                      const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  check.require(inputs[0].dtype == DataType::kF32, "pool_nd runs in f32");
  const Shape& x = inputs[0].shape;
  check.require(x.rank() >= 3, cat("the input must be [N, C, spatial...] (rank 3 or more), got ", x.to_string()));
  const size_t axes = x.rank() - 2;
  for (const auto* v : {&a.kernel, &a.stride, &a.dilation, &a.pad_begin, &a.pad_end}) {
    check.require(v->size() == axes, cat("kernel, stride, dilation and pads need one value per spatial axis (", axes, ")"));
  }
  std::vector<int64_t> out = {x[0], x[1]};
  for (size_t d = 0; d < axes; ++d) {
    check.require(a.kernel[d] >= 1 && a.stride[d] >= 1 && a.dilation[d] >= 1,
                  "kernel, stride and dilation must be >= 1");
    check.require(a.pad_begin[d] >= 0 && a.pad_end[d] >= 0, "pads must be >= 0");
    check.require(a.pad_begin[d] < (a.kernel[d] - 1) * a.dilation[d] + 1 &&
                      a.pad_end[d] < (a.kernel[d] - 1) * a.dilation[d] + 1,
                  "each pad must be smaller than the window");
    const int64_t extent = pool_nd_extent(a, d, x[d + 2]);
    check.require(extent >= 1, cat("the window (", (a.kernel[d] - 1) * a.dilation[d] + 1,
                                   ") is larger than the padded input along spatial axis ", d));
    out.push_back(extent);
  }
  return {row_major_like(inputs[0], Shape(out))};
}

std::vector<TensorDesc> infer_resize_nd(const Checker& check, const ResizeNdAttrs& a,
                                        const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  check.require(inputs[0].dtype == DataType::kF32, "resize_nd runs in f32");
  const Shape& x = inputs[0].shape;
  check.require(a.sizes.size() == x.rank() && a.scales.size() == x.rank(),
                cat("sizes and scales need one value per axis (", x.rank(), ")"));
  check.require(a.mode >= 0 && a.mode <= 2, "mode must be 0 (nearest), 1 (linear) or 2 (cubic)");
  check.require(a.transform >= 0 && a.transform <= 5, "transform must be 0 to 5 (half_pixel ... tf_crop_and_resize)");
  check.require(a.nearest >= 0 && a.nearest <= 3, "nearest must be 0 to 3 (round_prefer_floor ... ceil)");
  check.require(a.transform != 5 || a.roi.size() == 2 * x.rank(),
                cat("tf_crop_and_resize needs a region of two values per axis (", 2 * x.rank(), ")"));
  check.require(!(a.antialias && a.mode == 0), "antialias applies to linear and cubic resizing");
  for (size_t d = 0; d < x.rank(); ++d) {
    check.require(a.sizes[d] >= 1, "every output extent must be >= 1");
    check.require(a.scales[d] > 0, "every scale must be > 0");
  }
  return {row_major_like(inputs[0], Shape(a.sizes))};
}

}  // namespace

std::vector<TensorDesc> infer_tensor_op(const Checker& check, const Op& op,
                                        const std::vector<TensorDesc>& inputs) {
  switch (op.kind) {
    case OpKind::kLinear:
      return infer_linear(check, op.attrs_as<LinearAttrs>(), inputs);
    case OpKind::kSoftmax:
      return infer_softmax(check, op.attrs_as<SoftmaxAttrs>(), inputs);
    case OpKind::kLayerNorm:
      return infer_layer_norm(check, op.attrs_as<LayerNormAttrs>(), inputs);
    case OpKind::kMatMul:
      return infer_matmul(check, inputs);
    case OpKind::kTranspose:
      check.arity(inputs, 1, 1);
      return infer_transpose(check, op.attrs_as<TransposeAttrs>(), inputs[0]);
    case OpKind::kNarrow:
      check.arity(inputs, 1, 1);
      return infer_narrow(check, op.attrs_as<NarrowAttrs>(), inputs[0]);
    case OpKind::kConcatConstant:
      check.arity(inputs, 1, 1);
      return infer_concat_constant(check, op.attrs_as<ConcatConstantAttrs>(), inputs[0]);
    case OpKind::kReduceMean:
    case OpKind::kReduceMax:
    case OpKind::kReduceSum:
    case OpKind::kReduceMin:
    case OpKind::kReduceProd:
      return infer_reduce(check, op.attrs_as<ReduceAttrs>(), inputs);
    case OpKind::kGridSample:
      return infer_grid_sample(check, op.attrs_as<GridSampleAttrs>(), inputs);
    case OpKind::kPoolNd:
      return infer_pool_nd(check, op.attrs_as<PoolNdAttrs>(), inputs);
    case OpKind::kTopK:
      return infer_top_k(check, op.attrs_as<TopKAttrs>(), inputs);
    case OpKind::kGatherElements:
      return infer_gather_elements(check, op.attrs_as<GatherElementsAttrs>(), inputs);
    case OpKind::kResizeNd:
      return infer_resize_nd(check, op.attrs_as<ResizeNdAttrs>(), inputs);
    default:
      check.fail("not an op of tensors of any rank");
  }
}

}  // namespace stagecraft::graph::shape_rules
