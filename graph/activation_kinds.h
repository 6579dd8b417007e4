#pragma once
// The case labels of the op kinds that are a fused activation as they are (activation_of_kind maps
// each to its Activation, with no attributes): one list for the switches that treat them alike, so
// that a new activation kind reaches each of them.
//   switch (op.kind) {
//     STAGECRAFT_PLAIN_ACTIVATION_KINDS:
//       return activate(x, activation_of_kind(op.kind));
#include "graph/op.h"

#define STAGECRAFT_PLAIN_ACTIVATION_KINDS           \
  case ::stagecraft::graph::OpKind::kRelu:          \
  case ::stagecraft::graph::OpKind::kRelu6:         \
  case ::stagecraft::graph::OpKind::kSigmoid:       \
  case ::stagecraft::graph::OpKind::kHardSwish:     \
  case ::stagecraft::graph::OpKind::kSilu:          \
  case ::stagecraft::graph::OpKind::kGelu:          \
  case ::stagecraft::graph::OpKind::kGeluTanh:      \
  case ::stagecraft::graph::OpKind::kTanh:          \
  case ::stagecraft::graph::OpKind::kSqrt
