#pragma once
/// Support rules that do not depend on a library, shared by every backend's `supports()`: an op
/// that needs parameters has them, 8-bit tensors follow the quantisation contract
/// (graph/quantize.h), and ops that cannot mix layouts see one layout.
///
/// Example (inside a backend's supports()):
///   if (Support s = weights_support(spec); !s.runnable()) return s;
///   if (has_int8(spec)) if (Support s = quantised_support(spec); !s.runnable()) return s;

#include "executor/backend.h"

namespace stagecraft::executor {

/// Unsupported (kWeights) when an op that needs parameters (conv, linear, batch norm) has none.
Support weights_support(const KernelSpec& spec);

/// For a spec with 8-bit tensors: native when it follows the quantisation contract that every
/// backend shares, otherwise unsupported (kQuantisation) saying why. Convolutions, linear layers
/// and additions read 8-bit inputs and write any type (f32 when a sigmoid is fused); pooling,
/// ReLU, pad, flatten, split, slice and concat keep one type and scale; identity converts
/// anything; every other kind computes in f32 only.
Support quantised_support(const KernelSpec& spec);

/// Whether any source or destination of `spec` is 8-bit.
bool has_int8(const KernelSpec& spec);

/// Unsupported (kLayout) unless every source has the destination's layout.
Support same_layout_support(const KernelSpec& spec);

}  // namespace stagecraft::executor
