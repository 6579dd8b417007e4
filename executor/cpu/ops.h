#pragma once
// Internal to the CPU backend: op families. Each family pairs its support check with its builder
// (as oneDNN pairs a primitive descriptor with its primitive), so that what `supports()` answers
// is what `create_kernel()` builds: the check asks oneDNN for the same primitive descriptor and
// reports a reference-only implementation as such.
//
// To add an op kind: put it in a family's `kinds` (or add a family to the table of family_of in
// cpu_backend.cpp), give the family a check (library-specific rules; the backend-independent ones
// in executor/op_rules.h run before) and a builder appending oneDNN steps to a DnnlKernel.

#include <string>
#include <vector>

#include "executor/cpu/dnnl_kernel.h"

namespace stagecraft::executor::cpu {

/// A group of op kinds built alike.
struct OpFamily {
  const char* name;                 ///< for messages ("convolution")
  std::vector<graph::OpKind> kinds;  ///< kinds it builds
  /// Whether oneDNN runs `spec` natively, only by reference, or not at all.
  Support (*check)(const KernelSpec& spec, DnnlContext& ctx);
  /// Appends the steps of `spec` to `kernel`; returns the implementation name.
  std::string (*build)(DnnlKernel& kernel, const KernelSpec& spec, DnnlContext& ctx);
};

/// The family that builds `kind`.
const OpFamily& family_of(graph::OpKind kind);

// The families (one file each).
extern const OpFamily kConvolutionFamily;  // conv2d
extern const OpFamily kLinearFamily;       // linear
extern const OpFamily kPoolingFamily;      // max_pool, avg_pool, global_avg_pool, global_max_pool
extern const OpFamily kElementwiseFamily;  // activations, scale, batch_norm, softmax
extern const OpFamily kBinaryFamily;       // add, binary
extern const OpFamily kDataMovementFamily;  // concat, split, slice, identity, pad, flatten, reshape,
                                            // channel_shuffle
extern const OpFamily kResizeFamily;        // resize (our own host kernel)
extern const OpFamily kNormalisationFamily;  // layer_norm (our own host kernel)

}  // namespace stagecraft::executor::cpu
