#pragma once
// Internal to the CUDA backend: op families, as in executor/cpu/ops.h. Each family pairs its
// support check (what cuDNN, cuBLAS and the own kernels add to the backend-independent rules of
// executor/op_rules.h, which cuda_backend.cpp applies first) with its builder, so that what
// `supports()` answers is what `create_kernel()` builds. Families: conv_ops.cpp (convolution,
// with conv_int8.cpp), linear_ops.cpp, pool_ops.cpp, eltwise_ops.cpp, binary_ops.cpp,
// data_ops.cpp, tensor_ops.cpp.
//
// Also here: the kernel base classes and the conversions between graph descriptors and the own
// kernels' geometry.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/cuda/algo_cache.h"
#include "executor/cuda/device_context.h"
#include "executor/cuda/kernels.h"
#include "executor/cuda/op_params.h"

namespace stagecraft::executor::cuda {

/// What a builder may use.
struct BuildContext {
  std::shared_ptr<DeviceContext> device;  ///< setup stream, transfers
  AlgorithmCache* algos = nullptr;        ///< convolution algorithms (null: search every time)
  std::string fingerprint;                ///< the backend's device fingerprint (cache key)
  BackendConfig config;                   ///< TF32, workspace limit
};

/// A group of op kinds built alike.
struct OpFamily {
  const char* name;                  ///< for messages ("convolution")
  std::vector<graph::OpKind> kinds;  ///< kinds it builds
  /// What this family adds to the generic checks: native or unsupported with the reason.
  Support (*check)(const KernelSpec& spec);
  /// Builds the kernel of a supported spec.
  std::unique_ptr<Kernel> (*build)(const KernelSpec& spec, BuildContext& ctx);
};

/// The family that builds `kind`, or nullptr when the CUDA backend has none.
const OpFamily* find_family(graph::OpKind kind);
/// The family that builds `kind`; throws BackendError when the CUDA backend has none.
const OpFamily& family_of(graph::OpKind kind);

extern const OpFamily kConvolutionFamily;   // conv2d (f32, f16; int8 in conv_int8.cpp)
extern const OpFamily kLinearFamily;        // linear
extern const OpFamily kPoolingFamily;       // max_pool, avg_pool, global_avg_pool, global_max_pool
extern const OpFamily kElementwiseFamily;   // relu, relu6, sigmoid, hard_sigmoid, hard_swish, silu,
                                            // gelu, gelu_tanh, leaky_relu, scale, batch_norm,
                                            // layer_norm, add, softmax
extern const OpFamily kBinaryFamily;        // binary (broadcasting add/sub/mul/div, constants)
extern const OpFamily kDataMovementFamily;  // concat, split, slice, identity, pad (reflect too),
                                            // flatten, reshape, channel_shuffle, space_to_depth,
                                            // reduce_mean, reduce_max, reduce_sum
extern const OpFamily kTensorFamily;        // matmul, transpose, narrow, concat_constant (row-major)

/// An int8 convolution (cuDNN INT8_EXT_CONFIG + own requantising epilogue; conv_int8.cpp).
std::unique_ptr<Kernel> make_int8_conv(const KernelSpec& spec, BuildContext& ctx);
/// A dense copy between layouts of one type and scale, or a conversion (type or scale) between
/// layouts (data_ops.cpp): graph inputs and outputs, layout conversions, quantisation.
std::unique_ptr<Kernel> make_copy(const graph::TensorDesc& src, const graph::TensorDesc& dst);

// ---- Descriptors --------------------------------------------------------------------------------

// elem_of, dims_of, act_of, binop_of, act_params, binary_operands: op_params.h (CUDA-free).
/// The real value of a quantised element is scale · q; other tensors have scale 1.
float real_scale(const graph::TensorDesc& d);
/// x rounded up to a multiple of m.
int64_t round_up(int64_t x, int64_t m);
/// Bytes rounded up to the 256-byte alignment of workspace parts.
size_t align_bytes(size_t x);
/// Unsupported (kLayout) unless every rank-4 source has the destination's layout (the own kernels
/// index all their tensors with one geometry).
Support one_layout(const KernelSpec& spec);

// ---- Kernels ------------------------------------------------------------------------------------

/// A kernel remembering its bound tensors and workspace; `run` enqueues the work.
class CudaKernel : public Kernel {
 public:
  explicit CudaKernel(std::string impl) : impl_(std::move(impl)) {}
  size_t workspace_bytes() const override { return workspace_; }
  std::string implementation() const override { return impl_; }
  void bind(const std::vector<TensorRef>& srcs, const std::vector<TensorRef>& dsts,
            void* workspace) override {
    srcs_ = srcs;
    dsts_ = dsts;
    workspace_ptr_ = workspace;
  }
  void launch(Stream& stream) override { run(static_cast<CudaStream&>(stream)); }

 protected:
  virtual void run(CudaStream& s) = 0;
  std::string impl_;
  size_t workspace_ = 0;
  std::vector<TensorRef> srcs_, dsts_;
  void* workspace_ptr_ = nullptr;
};

/// A kernel given as a function of (stream, srcs, dsts, workspace).
class FnKernel : public CudaKernel {
 public:
  using Refs = const std::vector<TensorRef>&;
  using Fn = std::function<void(CudaStream&, Refs, Refs, void*)>;
  FnKernel(std::string impl, Fn fn, size_t workspace = 0);

 protected:
  void run(CudaStream& s) override;

 private:
  Fn fn_;
};

/// A cuDNN descriptor, destroyed with its owner (not once the process is exiting: see
/// device_context.h).
template <class Handle, cudnnStatus_t (*Create)(Handle*), cudnnStatus_t (*Destroy)(Handle)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() {
    const cudnnStatus_t status = Create(&handle_);
    if (status != CUDNN_STATUS_SUCCESS) {
      throw BackendError(std::string("cuDNN: cannot create a descriptor: ") + cudnnGetErrorString(status));
    }
  }
  ~CudnnDescriptor() {
    if (handle_ && !DeviceContext::exiting()) Destroy(handle_);
  }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;
  Handle get() const { return handle_; }

 private:
  Handle handle_ = nullptr;
};

using TensorDescriptor =
    CudnnDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDescriptor =
    CudnnDescriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor = CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                                              cudnnDestroyConvolutionDescriptor>;
using ActivationDescriptor = CudnnDescriptor<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor,
                                             cudnnDestroyActivationDescriptor>;

// Descriptor settings shared by the convolutions (conv_ops.cpp, conv_int8.cpp).

/// A tensor of `g`'s sizes (N, C, H, W) in `format` and `type`.
void set_tensor_4d(const TensorDescriptor& desc, cudnnTensorFormat_t format, cudnnDataType_t type,
                   const Dims4& g);
/// `k` filters of `c` channels each over `a`'s kernel window, in `format` and `type`.
void set_filter(const FilterDescriptor& desc, cudnnDataType_t type, cudnnTensorFormat_t format,
                int64_t k, int64_t c, const graph::Conv2dAttrs& a);
/// `a`'s padding (top, left), stride and dilation as a cross-correlation accumulating in `compute`.
void set_convolution(const ConvolutionDescriptor& desc, const graph::Conv2dAttrs& a,
                     cudnnDataType_t compute);

}  // namespace stagecraft::executor::cuda
