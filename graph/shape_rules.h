#pragma once
// Internal to shape inference (shape_inference*.cpp): the checks every rule is written with
// (`Checker`, whose errors name the op), the shape helpers several families share, and the rules
// of each family of ops, one function per family file:
//   shape_inference_convolutions.cpp  convolutions, normalisations and pools of rank-4 tensors,
//                                     padding, resizing, and the channel ops (concat, split,
//                                     slice, shuffle), flatten and reshape
//   shape_inference_elementwise.cpp   activations, unary, binary, where and add
//   shape_inference_tensors.cpp       linear layers, softmax and layer norm over an axis, and the
//                                     ops of row-major tensors (matmul, transpose, narrow,
//                                     concat_constant, reductions, grid_sample)
// infer_output_descs (shape_inference.cpp) checks the attributes' type and picks the family.

#include <cstdint>
#include <string>
#include <vector>

#include "common/strings.h"
#include "graph/errors.h"
#include "graph/op.h"

namespace stagecraft::graph::shape_rules {

// Builds errors that start with the op's name and kind, so every message names its culprit.
class Checker {
 public:
  explicit Checker(const Op& op) : op_(op) {}

  [[noreturn]] void fail(const std::string& rule) const {
    throw ShapeError(cat("op '", op_.name, "' (", to_string(op_.kind), "): ", rule));
  }
  void require(bool ok, const std::string& rule) const {
    if (!ok) fail(rule);
  }
  void arity(const std::vector<TensorDesc>& inputs, size_t min, size_t max) const {
    if (inputs.size() >= min && inputs.size() <= max) return;
    const std::string expected = min == max ? cat(min) : max == SIZE_MAX ? cat("at least ", min)
                                                                         : cat(min, " to ", max);
    throw GraphError(cat("op '", op_.name, "' (", to_string(op_.kind), "): takes ", expected,
                         " input(s), got ", inputs.size()));
  }
  void rank(const TensorDesc& desc, size_t rank, const char* what = "input") const {
    require(desc.shape.rank() == rank, cat(what, " must have rank ", rank, ", got ",
                                           desc.shape.to_string()));
  }
  void positive(const Hw& hw, const char* field) const {
    require(hw.h >= 1 && hw.w >= 1, cat(field, " must be >= 1, got [", hw.h, ", ", hw.w, "]"));
  }
  void non_negative(const Pads& p, const char* field) const {
    require(p.top >= 0 && p.left >= 0 && p.bottom >= 0 && p.right >= 0,
            cat(field, " must be >= 0, got [", p.top, ", ", p.left, ", ", p.bottom, ", ", p.right,
                "]"));
  }

 private:
  const Op& op_;
};

// `like` with another shape (and the default layout of its rank where the rank changes).
TensorDesc with_shape(const TensorDesc& like, Shape shape);
// `like` with another shape, row-major (the result of an op on row-major tensors of any rank).
TensorDesc row_major_like(const TensorDesc& like, Shape shape);

// Fails unless every input has input 0's element type (u8 and i8 may mix).
void check_same_dtype(const Checker& check, const std::vector<TensorDesc>& inputs);

// The shape of a broadcast binary op's operands and result (NumPy rules: trailing dimensions
// aligned, each pair equal or one of them 1).
Shape broadcast_shape(const Checker& check, const Shape& a, std::vector<int64_t> b);

// The rules of each family: the output descriptors of `op`, whose kind is of that family.
std::vector<TensorDesc> infer_convolutions_op(const Checker& check, const Op& op,
                                              const std::vector<TensorDesc>& inputs);
std::vector<TensorDesc> infer_elementwise_op(const Checker& check, const Op& op,
                                             const std::vector<TensorDesc>& inputs);
std::vector<TensorDesc> infer_tensor_op(const Checker& check, const Op& op,
                                        const std::vector<TensorDesc>& inputs);

}  // namespace stagecraft::graph::shape_rules
