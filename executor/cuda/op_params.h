#pragma once
// Internal to the CUDA backend: what the builders of the own kernels pass to them, derived from a
// KernelSpec: geometries, activation and binary codes, the parameters of standalone activations
// and the operand order of binary ops. CUDA-free (compiled in every build), so that host tests
// (tests/cuda/test_element_ops.cpp) run the bodies of element_ops.h with exactly these values.

#include <cstddef>

#include "executor/backend.h"
#include "executor/cuda/element_ops.h"

namespace stagecraft::executor::cuda {

/// The own kernels' element type of a data type.
Elem elem_of(graph::DataType t);
/// The geometry of a rank-4 (or rank-2: N × C) tensor.
Dims4 dims_of(const graph::TensorDesc& d);
/// The own kernels' activation code of a fused activation.
Act act_of(graph::Activation a);
/// The own kernels' binary operation code.
BinOp binop_of(graph::BinaryOp op);

/// The activation and parameters of a standalone activation op (relu, relu6, sigmoid,
/// hard_sigmoid with its slope and offset, hard_swish, silu, leaky_relu with its slope); ReLU6's
/// bound in the destination's units.
ActParams act_params(const KernelSpec& spec);

/// How a binary kernel reads its operands: y = act(x OP o), or act(o OP x) with params.swap.
struct BinaryOperands {
  int x_src = 0;          ///< the source read as x (the destination's shape where one has it)
  int o_src = 1;          ///< the source read as o; -1: the constant
  Dims4 xd, od;           ///< their geometries (the constant: plain order, destination's rank)
  BinaryParams params;    ///< operation, order, fused activation
};

/// The operands of a supported binary spec (executor/cuda/binary_ops.cpp checks support): a
/// constant first operand swaps the operation; a broadcast first input is read as o, swapped, when
/// the second has the destination's shape (so that x can be read in packs).
BinaryOperands binary_operands(const KernelSpec& spec);

}  // namespace stagecraft::executor::cuda
