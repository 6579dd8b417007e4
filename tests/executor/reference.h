#pragma once
/// A plain reference implementation of every op kind, for tests: simple loops over dense fp32
/// tensors in logical order (NCHW for rank 4, NC for rank 2) with PyTorch's semantics, written to
/// be obviously correct rather than fast. Tests run a graph through it and compare a real
/// executor's outputs (or an optimised graph's) against it on random data.
///
/// Example:
///   networks::NetworkOptions options;
///   options.batch = 2;
///   options.input_size = 64;
///   graph::Graph g = networks::build_network("squeezenet1_1", options);
///   graph::WeightStore w = graph::random_weights(g, /*seed=*/1);
///   HostTensor x = random_tensor(g.value(g.inputs()[0]).desc.shape, /*seed=*/7);
///   std::vector<HostTensor> want = reference_run(g, w, {x});
///   EXPECT_LT(max_relative_error(got, want[0]), 1e-4);

#include <cstdint>
#include <vector>

#include "graph/graph.h"
#include "executor/tensor.h"
#include "graph/weights.h"

namespace stagecraft::executor::testing {

/// A dense fp32 tensor on the host in logical order (NCHW for rank 4, NC for rank 2), whatever
/// data type and layout the graph's descriptor names: the executor's own host tensor.
using HostTensor = ::stagecraft::executor::HostTensor;

/// A tensor of `shape` with values uniform in [-1, 1), the same for the same seed on every
/// platform (SplitMix64; every value is exact in fp32).
HostTensor random_tensor(const graph::Shape& shape, uint64_t seed);

/// Evaluates every op of `graph` in topological order with the weights in `weights` (by op name)
/// and returns the graph outputs in `graph.outputs()` order. `inputs` are the graph inputs in
/// `graph.inputs()` order. Arithmetic is fp32 in and out with sums accumulated in double, whatever
/// the descriptors' data type. Throws GraphError when an input's shape or size does not match,
/// when `graph::check_weights` rejects the weights, or when an op's computed output shape
/// disagrees with the graph's descriptor.
std::vector<HostTensor> reference_run(const graph::Graph& graph, const graph::WeightStore& weights,
                                      const std::vector<HostTensor>& inputs);

/// max |got - want| / max(1e-6, max |want|): the largest error relative to the scale of `want`.
/// Infinity when the shapes differ, a data size does not match its shape, or a value is NaN.
double max_relative_error(const HostTensor& got, const HostTensor& want);

}  // namespace stagecraft::executor::testing
