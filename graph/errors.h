#pragma once
/// Errors raised by the graph layer. All derive from `stagecraft::Error`.

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

}  // namespace stagecraft::graph
