#pragma once
// Internal to frontend/onnx/: multi-node patterns that exporters write for one operation, found
// before the walk and replaced by that operation's node, so that the walk translates one node:
//   GELU, erf form:  x * 0.5 * (1 + Erf(x / sqrt 2))     (any order of the two products; the
//                    division may be a product with 1 / sqrt 2)              -> Gelu
//   GELU, tanh form: x * 0.5 * (1 + Tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))) (x^3 as Pow or
//                    as products)                                             -> Gelu(approximate=tanh)
//   layer norm:      d = x - ReduceMean(x, a); d / Sqrt(ReduceMean(d^2, a) + eps) [* w] [+ b], a = 1
//                    (channels) or -1                                         -> LayerNormalization
// A pattern is replaced only when its inner values have no other readers. Constants are read
// from initializers, Constant nodes and Casts of them.

#include <onnx/onnx_pb.h>

#include <memory>
#include <string>
#include <vector>

namespace stagecraft::graph::onnx_import {

/// The attribute that marks a LayerNormalization made from a written-out channel normalisation
/// over axis 1: the channels alone (ONNX's axis 1 would normalise C, H and W together).
inline constexpr const char* kChannelsOnly = "stagecraft_channels_only";

/// The values a node's subgraphs (Scan's body, If's branches) read from the scopes around them,
/// once each: what the node reads besides its inputs.
std::vector<std::string> outer_reads(const onnx::NodeProto& node);

/// The nodes of `g` in order, each pattern's nodes replaced by one node (owned by `owned`) at
/// the position of the pattern's last node.
std::vector<const onnx::NodeProto*> fuse_patterns(const onnx::GraphProto& g,
                                                  std::vector<std::unique_ptr<onnx::NodeProto>>& owned);

}  // namespace stagecraft::graph::onnx_import
