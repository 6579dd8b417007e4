#pragma once
/// Host tensors: the inputs given to and the outputs taken from an executor, always dense in the
/// logical NCHW (or NC) order whatever layout the plan uses inside.

#include <cstdint>
#include <vector>

#include "graph/types.h"

namespace stagecraft::executor {

/// A dense fp32 host tensor in logical order.
struct HostTensor {
  graph::Shape shape;       ///< logical dimensions
  std::vector<float> data;  ///< shape.numel() values, NCHW / NC order
};

/// A tensor of `shape` with values uniform in [-1, 1) from `seed` (deterministic).
HostTensor random_host_tensor(const graph::Shape& shape, uint64_t seed);

/// max |a - b| / max(1e-6, max |b|): the error of `got` relative to the scale of `want`; returns
/// infinity when the shapes differ.
double relative_error(const HostTensor& got, const HostTensor& want);

}  // namespace stagecraft::executor
