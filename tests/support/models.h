#pragma once
// Models, inputs and schedules shared by the executor tests of every backend.

#include <cstdint>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/tensor.h"
#include "graph/passes.h"
#include "graph/graph.h"
#include "graph/weights.h"
#include "scheduler/schedule.h"
#include "scheduler/search.h"

namespace stagecraft::testing {

/// The CPU backend, created once for the whole test program.
executor::Backend& cpu_backend();

/// An inference graph with its (folded) weights.
struct Model {
  graph::Graph graph;
  graph::WeightStore weights;
};

/// The inference graph of `raw` with seeded random weights, batch norms folded.
Model model_of(const graph::Graph& raw, uint64_t seed = 1, const graph::InferenceOptions& passes = {});

/// A built-in network at a reduced input size, ready to run.
Model network(const std::string& name, int64_t size, int64_t batch = 1,
              const graph::InferenceOptions& passes = {});

/// Every op kind in one small graph (batch norm unfolded, ceil-mode and both average pools,
/// a 3-input add, split, slice, a cropping pad, depthwise conv, softmax, two outputs).
graph::Graph every_op_graph(int64_t batch);

/// The convolution of the int8 kernel tests: 3x3, stride 2, padding 1, bias, ReLU6.
graph::Conv2dAttrs int8_test_conv(int64_t in_channels, int64_t out_channels);

/// Ops whose channel counts do not fill blocks of 8 or 16 (`width` channels, e.g. 12, 78 or 308,
/// at `size` x `size`): convolutions (plain, grouped with 4-channel groups, depthwise), additions
/// of two and three inputs with and without an activation, pooling, batch norm, unaligned split
/// and concatenation, global pooling. For layout and guard-byte checks.
graph::Graph channel_tail_graph(int64_t batch, int64_t width, int64_t size);

/// The op kinds PyTorch models bring beyond the classic CNNs, at `width` channels: hard sigmoid
/// (ONNX's default slope), hard swish, SiLU, a squeeze-and-excitation gate (global pool, reshape
/// to N×C, linear layers, reshape back, sigmoid, broadcast multiplication), binary ops with
/// per-channel and scalar constants (also constant-first subtraction and division), a channel
/// shuffle of a concatenation (ShuffleNet's unit ending), a leaky ReLU, a global max pool and a
/// reshape to N×C.
graph::Graph modern_ops_graph(int64_t batch, int64_t width);

/// A squeeze-and-excitation block after a hard-swish convolution, a residual addition with a fused
/// SiLU, the standalone activations (ONNX's hard sigmoid slope among them), a constant-first
/// subtraction with a fused hard sigmoid, channel shuffles (4 groups, and 16: no channel moves),
/// a global max pool, reshapes and a linear layer; not prepared for inference. Outputs: the
/// logits, a reshape of the SiLU, the shuffled map.
graph::Graph se_block_graph(int64_t batch);

/// A vision transformer in small (timm's layout): a patch-embedding convolution (`width` channels,
/// 4x4 patches of an 8x8 image: 4 tokens), tokens [N, T, C] by a reshape and a transpose, a class
/// token joined before them, a position embedding added, then `blocks` pre-norm blocks (layer norm,
/// one qkv linear layer, heads by reshape and transpose, narrows, Q·Kᵀ scaled, softmax over the
/// keys, ·V, heads merged, projection, residual; layer norm, MLP with GELU, residual), and a head
/// on the class token. Every row-major op kind in one graph.
graph::Graph vit_graph(int64_t batch, int64_t width, int64_t heads, int blocks);

/// conv -> layer_norm -> gelu -> conv (GELU tanh fused) -> pool -> flatten -> layer_norm over
/// features; the first layer norm is an output too.
graph::Graph channel_norms_graph(int64_t batch, int64_t channels);

/// A pre-activation dense block (DenseNet): layer i reads the concatenation of the stem and every
/// earlier layer's output through batch norm + ReLU, so the concatenations cat(f0, f1),
/// cat(f0, f1, f2), ... grow one part at a time; a transition (BN, ReLU, 1x1 conv, average pool)
/// follows. Outputs: the transition, and the second concatenation (a concatenation that is itself
/// a graph output).
graph::Graph dense_block_graph(int64_t batch, int64_t stem, int64_t growth, int layers);

/// Random inputs for every graph input.
std::vector<executor::HostTensor> inputs_of(const graph::Graph& g, uint64_t seed = 7);

/// A schedule found with the analytic V100 model (cheap, deterministic).
scheduler::Schedule analytic_schedule(const graph::Graph& g, scheduler::Strategy strategy,
                                      scheduler::DpMode mode = scheduler::DpMode::kBoth);

/// The networks every backend is checked on, with reduced input sizes and batches.
struct NetworkCase {
  const char* name;
  int64_t size;
  int64_t batch;
};
const std::vector<NetworkCase>& network_cases();

}  // namespace stagecraft::testing
