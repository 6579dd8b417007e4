#pragma once
/// Shape inference: the output descriptors of an op from its attributes and input descriptors.
/// Inputs: op kind, attributes, input descriptors. Output: one descriptor per output, or a
/// ShapeError naming the op and the rule broken. O(inputs + outputs).

#include <vector>

#include "graph/op.h"

namespace stagecraft::graph {

/// Checks `op`'s attributes against its inputs and returns its output descriptors. `op.inputs`
/// and `op.outputs` are not read; `inputs` gives the descriptors in slot order. Throws
/// ShapeError ("op 'x' (conv2d): ...") or GraphError (wrong input count).
std::vector<TensorDesc> infer_output_descs(const Op& op, const std::vector<TensorDesc>& inputs);

/// Number of outputs an op of this kind with these attributes produces.
size_t num_outputs(OpKind kind, const OpAttrs& attrs);

/// Output length of a sliding window over `size` elements (conv or pool), PyTorch's rule; may be
/// <= 0 when the window does not fit.
int64_t window_output_size(int64_t size, int64_t pad_begin, int64_t pad_end, int64_t kernel,
                           int64_t stride, int64_t dilation, bool ceil_mode);

}  // namespace stagecraft::graph
