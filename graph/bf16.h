#pragma once
/// bf16 inference: the convolutions, linear layers, matmuls and additions of an f32 inference graph
/// compute in bfloat16, on CPUs that have it natively (AVX512_BF16, AMX-BF16).
///
/// The model (oneDNN's and OpenVINO's): a bf16 tensor holds the top 16 bits of the f32 value,
/// rounded to nearest even (8 bits of mantissa, f32's range); weights are converted to bf16 by
/// the backend when it packs them, bias stays f32 and accumulation is f32 inside the kernels.
///
/// `to_bf16()` decides, op by op in topological order, what every value holds:
///   - convolutions (their fused activation and residual too), linear layers, matmuls of two
///     activations (attention) and additions compute in bf16: they read bf16 inputs and write a
///     bf16 output;
///   - concatenations compute in bf16 when any part is bf16 (the others are converted);
///   - max / average / global average pooling, batch normalisation, ReLU, padding with zeros,
///     flatten, split, slice, identity, scaling, and the moves of attention heads (reshape,
///     transpose, narrow) keep their input's type (their kernels compute in f32 and round only
///     what they write, or move 2-byte elements);
///   - every other op computes in f32;
///   - then, from the outputs back: an op whose outputs are graph outputs or read only by f32 ops
///     writes f32 — a convolution (without a fused residual), linear layer or matmul straight from
///     its f32 accumulators (a classifier's logits are not rounded to bf16), a follower by computing
///     in f32 itself; an addition keeps writing bf16 (a conversion follows it).
/// Where an op needs its input in the other type, an identity op converting it is inserted
/// (named "<value>.bf<N>"), shared by every reader that needs it, so conversions are ops the
/// scheduler places like any other. Graph inputs and outputs stay f32.
///
/// Example:
///   Graph g = to_bf16(prepare_for_inference(f32));   // same op names: the f32 weights apply

#include <cstddef>

#include "graph/graph.h"

namespace stagecraft::graph {

/// How an op of one kind takes part in a bf16 graph.
enum class Bf16Role {
  kF32,       ///< computes in f32 (bf16 inputs are converted first)
  kComputes,  ///< reads bf16 and writes bf16 or f32 (conv2d, linear, matmul, add; concat when any part is)
  kFollows,   ///< keeps its input's type (pooling, batch norm, relu, zero padding, moves, transposes)
};

/// The role of an op of `kind` with `attrs` (see the file comment). A backend that runs bf16
/// runs these ops in it.
Bf16Role bf16_role(OpKind kind, const OpAttrs& attrs);

/// What to_bf16() did.
struct Bf16Report {
  size_t bf16_ops = 0;     ///< ops computing on bf16 tensors
  size_t f32_ops = 0;      ///< ops left in f32
  size_t conversions = 0;  ///< identity ops inserted (to bf16 and back)
};

/// Whether any value of the graph is bf16: such graphs compute in bf16.
bool is_bf16(const Graph& graph);

/// The bf16 graph of an f32 inference graph (see the file comment). Op names are kept, so the f32
/// weights apply. Throws GraphError when the graph is not f32 (an int8 or f16 graph).
Graph to_bf16(const Graph& graph, Bf16Report* report = nullptr);

}  // namespace stagecraft::graph
