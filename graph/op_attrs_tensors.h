#pragma once
/// Typed attributes of the graph IR's ops, part 3: the ops on row-major tensors of any rank
/// (softmax, transpose, narrow, concatenation with a constant, reductions, grid sampling).
/// Included by op.h; see op_attrs.h.

#include <cstdint>
#include <vector>

#include "graph/op_attrs.h"

namespace stagecraft::graph {

/// Softmax over one axis (1: the channels of a rank-4 tensor or the features of a rank-2 one;
/// any axis of a row-major tensor: attention scores over their keys).
struct SoftmaxAttrs {
  int64_t axis = 1;  ///< the axis normalised (non-negative)
  bool log =
      false;  ///< log(softmax(x)) computed as x - max - log(sum(exp(x - max))) (ONNX LogSoftmax)
  /// 1 at the first largest element along the axis, 0 elsewhere (ONNX Hardmax; `log` false)
  bool hard = false;
  STAGECRAFT_ATTR_FIELDS(SoftmaxAttrs, (), (axis, log, hard))
};

/// Permutation of the dimensions of a row-major tensor (real data movement): output dimension i
/// is input dimension perm[i].
struct TransposeAttrs {
  std::vector<int64_t> perm;  ///< a permutation of 0 .. rank-1
  STAGECRAFT_ATTR_FIELDS(TransposeAttrs, (perm), ())
};

/// Concatenation along channels (axis 1).
struct ConcatAttrs {
  /// int8 only: the 8-bit parts keep their own scales (channel c of the output holds its part's,
  /// which the convolutions reading it took into their weights), and the value's scale is the
  /// largest part's (graph/quantize.h). Off: every part has the output's type and scale.
  bool part_scales = false;
  STAGECRAFT_ATTR_FIELDS(ConcatAttrs, (), (part_scales))
};

/// The range [begin, end) of one axis of a row-major tensor (PyTorch's narrow; ONNX Slice, Split
/// and Gather of one index on a transformer's tensors).
struct NarrowAttrs {
  int64_t axis = 0;   ///< the axis cut
  int64_t begin = 0;  ///< first index kept
  int64_t end = 0;    ///< one past the last
  STAGECRAFT_ATTR_FIELDS(NarrowAttrs, (axis, begin, end), ())
};

/// The input with a constant block joined before or after it along one axis of a row-major
/// tensor (a vision transformer's class and distillation tokens: Concat(Expand(token), x)). The
/// constant (weight) has the input's shape with `count` along `axis` and 1 as the first
/// dimension (the same for every sample).
struct ConcatConstantAttrs {
  int64_t axis = 1;    ///< the axis joined along (>= 1)
  int64_t count = 1;   ///< the constant's extent along it
  bool before = true;  ///< the constant comes first
  STAGECRAFT_ATTR_FIELDS(ConcatConstantAttrs, (axis, count), (before))
};

/// Mean, maximum, sum, minimum or product over `axes` of a tensor of any rank, the reduced
/// dimensions kept as 1 (ONNX ReduceMean/Max/Sum/Min/Prod with keepdims; CBAM's channel pooling).
/// The importer makes reductions over H and W alone of a rank-4 tensor global pools.
struct ReduceAttrs {
  std::vector<int64_t> axes;  ///< among 0 .. rank - 1, ascending
  STAGECRAFT_ATTR_FIELDS(ReduceAttrs, (axes), ())
};

/// y[n, c, p] = x[n, c] sampled at grid[n, p] (ONNX GridSample, 2-D and 3-D): x [N, C, spatial...]
/// and grid [N, out spatial..., k] of normalised coordinates in [-1, 1] (the last spatial axis
/// first, k = the spatial rank), y [N, C, out spatial...]. Row-major tensors.
struct GridSampleAttrs {
  int64_t mode = 1;     ///< 0 nearest (half to even), 1 linear, 2 cubic (Keys, a = -0.75)
  int64_t padding = 0;  ///< outside the input: 0 zeros, 1 the border's value, 2 reflected
  bool align_corners =
      false;  ///< -1 and 1 are the centres of the corner elements (else their edges)
  STAGECRAFT_ATTR_FIELDS(GridSampleAttrs, (), (mode, padding, align_corners))
};

/// Max or average pooling over the spatial axes of a row-major tensor [N, C, spatial...] of any
/// spatial rank (ONNX MaxPool / AveragePool in 1-D to 3-D and beyond, with dilations). Output
/// element o of an axis pools the taps o · stride - pad_begin + j · dilation (j < kernel) that lie
/// in the input; the output extent is floor (ceil with ceil_mode, the last window starting inside
/// the input or its begin padding) of (in + pads - (kernel - 1) · dilation - 1) / stride, plus 1.
/// An average divides by the taps inside the input, or with count_include_pad by the taps inside
/// the padded extent [-pad_begin, in + pad_end).
struct PoolNdAttrs {
  bool max = true;                 ///< max, else average
  std::vector<int64_t> kernel;     ///< per spatial axis (outermost first)
  std::vector<int64_t> stride;     ///< per spatial axis
  std::vector<int64_t> dilation;   ///< per spatial axis
  std::vector<int64_t> pad_begin;  ///< per spatial axis
  std::vector<int64_t> pad_end;    ///< per spatial axis
  bool ceil_mode = false;          ///< round the output extent up
  bool count_include_pad = false;  ///< an average counts the padding
  STAGECRAFT_ATTR_FIELDS(PoolNdAttrs, (max, kernel, stride, dilation, pad_begin, pad_end),
                         (ceil_mode, count_include_pad))
};

/// The output extent of one spatial axis of a pool_nd (see PoolNdAttrs).
int64_t pool_nd_extent(const PoolNdAttrs& a, size_t axis, int64_t in);

/// ONNX Resize in full, on a row-major tensor of any rank: each axis resampled by its own scale
/// (nearest, linear or cubic), any coordinate rule, nearest rounding, cubic coefficient,
/// exclude_outside, antialias (a stretched filter when downsampling) and tf_crop_and_resize's
/// region and extrapolation. Axes are resampled one after another, separably, as ONNX's reference
/// does; an axis whose scale is 1, extent unchanged and region whole is left alone. The resize op
/// keeps PyTorch's modes on the convolutions' layouts; this op takes the rest.
struct ResizeNdAttrs {
  std::vector<int64_t> sizes;  ///< the output extent of every axis
  std::vector<double>
      scales;  ///< per axis, the scale the coordinates use (output / input when sizes were given)
  std::vector<double>
      roi;  ///< tf_crop_and_resize: the region's starts, then its ends, per axis (fractions)
  int64_t mode = 0;  ///< 0 nearest, 1 linear, 2 cubic
  /// 0 half_pixel, 1 half_pixel_symmetric, 2 pytorch_half_pixel, 3 align_corners, 4 asymmetric,
  /// 5 tf_crop_and_resize
  int64_t transform = 0;
  int64_t nearest = 0;           ///< 0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil
  double cubic_a = -0.75;        ///< Keys' coefficient
  bool exclude_outside = false;  ///< taps outside the input weigh 0 (the others renormalised)
  bool antialias =
      false;  ///< linear and cubic: the filter stretched by 1 / scale when downsampling
  double extrapolation = 0;  ///< tf_crop_and_resize: the value where the region leaves the input
  STAGECRAFT_ATTR_FIELDS(ResizeNdAttrs, (sizes, scales),
                         (roi, mode, transform, nearest, cubic_a, exclude_outside, antialias,
                          extrapolation))
};

/// One axis of a resize_nd: for every output index, the input indices its value reads (clamped
/// into the input: edge values repeat) and their weights, and whether tf_crop_and_resize's region
/// left the input there (the value is then the extrapolation value).
struct ResizeTaps {
  std::vector<std::vector<int64_t>> index;
  std::vector<std::vector<double>> weight;
  std::vector<bool> outside;
  bool identity = false;  ///< the axis is left alone (scale 1, same extent, whole region)
};

/// The taps of `axis` of a resize_nd of an input extent `in` (ONNX's reference rules).
ResizeTaps resize_taps(const ResizeNdAttrs& a, size_t axis, int64_t in);

/// The k largest (or smallest) elements along `axis` of a row-major tensor, in order (ONNX TopK,
/// sorted; equal values by lower index first): outputs the values and their indices along the
/// axis. Indices are float32 integers (exact below 2^24, which shape inference requires of the
/// axis), as every tensor of the graph is floating-point; a NaN counts as larger than any number.
struct TopKAttrs {
  int64_t axis = -1;    ///< among 0 .. rank - 1 once imported
  int64_t k = 1;        ///< 1 .. the axis's extent
  bool largest = true;  ///< the largest first, else the smallest first
  /// NaN ranks above every number (TopK's order in ONNX Runtime); false (k = 1 only): comparisons
  /// with NaN are false, so the first element stays unless a later number beats it (ArgMax /
  /// ArgMin in ONNX Runtime).
  bool ordered_nan = true;
  STAGECRAFT_ATTR_FIELDS(TopKAttrs, (axis, k), (largest, ordered_nan))
};

/// y[p] = data[p with its `axis` coordinate replaced by indices[p]] (ONNX GatherElements): data
/// and indices row-major of one rank, y of the indices' shape; indices are float32 integers
/// (top_k's), a negative one counting from the end of the axis; one outside the axis is a run
/// error naming the op.
struct GatherElementsAttrs {
  int64_t axis = 0;  ///< among 0 .. rank - 1
  STAGECRAFT_ATTR_FIELDS(GatherElementsAttrs, (axis), ())
};

}  // namespace stagecraft::graph
