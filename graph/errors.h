#pragma once
/// Errors raised by the graph layer. All derive from `stagecraft::Error`.

#include <string>
#include <vector>

#include "common/error.h"

namespace stagecraft::graph {

/// The graph's structure is invalid: a cycle, a dangling input, a duplicate name, an unknown op
/// kind or attribute, a wrong number of inputs.
class GraphError : public Error {
 public:
  using Error::Error;
};

/// An op's inputs or attributes give no valid output shape (channel mismatch, concat of different
/// H×W, a window larger than its padded input, ...).
class ShapeError : public GraphError {
 public:
  using GraphError::GraphError;
};

/// A graph file is malformed: not YAML, a missing or mistyped field, an unsupported version.
class FormatError : public GraphError {
 public:
  using GraphError::GraphError;
};

/// An ONNX node needs a constant (a convolution's weights, a resize's scales) where the model has a
/// tensor computed from graph inputs: `inputs` names those graph inputs. Binding their values at
/// load (OnnxImportOptions::constant_inputs) imports the model specialised to them.
class ConstantInputError : public FormatError {
 public:
  ConstantInputError(const std::string& message, std::vector<std::string> inputs)
      : FormatError(message), inputs_(std::move(inputs)) {}
  const std::vector<std::string>& inputs() const { return inputs_; }

 private:
  std::vector<std::string> inputs_;
};

}  // namespace stagecraft::graph
