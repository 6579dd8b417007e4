// int8 convolutions. What runs: cuDNN's INT8_EXT_CONFIG convolution (cudnnConvolutionForward with
// an i8 NHWC input, i8 NHWC (OHWI) filters, int32 compute and an f32 NHWC output; cuDNN supports
// it with IMPLICIT_PRECOMP_GEMM only and needs input and output channels that are multiples of 4:
// cuDNN API reference, cudnnConvolutionForward, "Supported configurations"), then an own
// epilogue that adds the bias in accumulator units, applies the per-channel requantisation scale
// and the activation and rounds into the 8-bit (or f32) output. The weights and the epilogue's
// numbers come from executor/kernel_math.h, as on the CPU (per-output-channel symmetric weights,
// the same requantisation), so the backends agree on what is computed.
//
// Channels are padded to multiples of 4: zero filters for the extra outputs, a zero-filled copy of
// the input when its channels are not. cuDNN takes unsigned 8-bit inputs only in its vectorised
// NCHW_VECT_C configurations, so a u8 input is halved into i8 on the way into that copy (its scale
// doubled: one bit of resolution less than the CPU's u8 × s8 kernels; requantisation() is told so).
// Grouped int8 convolutions are refused (conv_ops.cpp's check). Where cuDNN refuses a shape, the
// kernel's creation says so in one line naming the op and the configuration.
//
// Expect int8 to be no faster than f16 on tensor-core GPUs: the legacy API has no int8 tensor-core
// NHWC kernel for arbitrary shapes, and the epilogue is a separate pass over an f32 accumulator.
#include <mutex>
#include <set>

#include "common/strings.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/ops.h"
#include "executor/kernel_math.h"

namespace stagecraft::executor::cuda {

namespace {

using graph::DataType;
using graph::TensorDesc;

constexpr int64_t kInt8ChannelMultiple = 4;  // cuDNN's int8 NHWC convolutions need C % 4 == 0
constexpr float kHalving = 2.0f;             // u8 inputs are halved into i8

class Int8ConvKernel : public CudaKernel {
 public:
  Int8ConvKernel(const KernelSpec& spec, BuildContext& ctx) : CudaKernel("cudnn int8"), device_(ctx.device) {
    const auto& a = std::get<graph::Conv2dAttrs>(spec.attrs);
    const TensorDesc& src = spec.srcs[0];
    const TensorDesc& dst = spec.dsts[0];
    src_elem_ = elem_of(src.dtype);
    dst_elem_ = elem_of(dst.dtype);
    src_dims_ = dims_of(src);
    dst_dims_ = dims_of(dst);
    act_ = act_of(a.activation);
    const int64_t cin = a.in_channels, cin4 = round_up(cin, kInt8ChannelMultiple);
    const int64_t k = a.out_channels, k4 = round_up(k, kInt8ChannelMultiple);
    padded_dims_ = src_dims_;
    padded_dims_.c = cin4;
    acc_dims_ = dst_dims_;
    acc_dims_.c = k4;
    acc_dims_.nhwc = true;
    halve_input_ = src.dtype == DataType::kU8;
    pad_input_ = cin4 != cin || halve_input_;
    set_tensor_4d(x_, CUDNN_TENSOR_NHWC, CUDNN_DATA_INT8, padded_dims_);
    set_tensor_4d(y_, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, acc_dims_);
    set_filter(w_, CUDNN_DATA_INT8, CUDNN_TENSOR_NHWC, k4, cin4, a);
    set_convolution(conv_, a, CUDNN_DATA_INT32);

    // Weights and epilogue as on the CPU (kernel_math.h), the weights re-ordered to OHWI with zero
    // padding to k4 × kh × kw × cin4.
    const QuantisedWeights qw = quantise_per_channel(spec.weights->weight, k);
    const std::vector<int8_t> ohwi = oihw_to_ohwi(qw.values, conv_weight_dims(a), k4, cin4);
    const Requantisation r =
        requantisation(src, dst, qw.scales, a.bias ? spec.weights->bias : std::vector<float>{},
                       spec.dst_channel_scales, halve_input_ ? kHalving : 1.0f);
    weights_ = upload_bytes(*device_, ohwi.data(), ohwi.size());
    scale_ = DeviceFloats(*device_, r.output_scales);
    bias_ = DeviceFloats(*device_, r.bias);
    relu6_max_ = r.relu6_max;

    const std::string config = cat("INT8_EXT_CONFIG: i8 nhwc input with ", cin, " channels (", cin4,
                                   " padded), ", k, " filters (", k4, " padded) of ", a.kernel.h, "x",
                                   a.kernel.w, ", f32 nhwc accumulator");
    const cudnnStatus_t status = cudnnGetConvolutionForwardWorkspaceSize(
        device_->setup().cudnn, x_.get(), w_.get(), conv_.get(), y_.get(), algo_, &conv_workspace_);
    if (status != CUDNN_STATUS_SUCCESS) refuse(spec, config, status);
    acc_bytes_ = static_cast<size_t>(acc_dims_.numel()) * sizeof(float);
    padded_bytes_ = pad_input_ ? static_cast<size_t>(padded_dims_.numel()) : 0;
    workspace_ = align_bytes(conv_workspace_) + align_bytes(acc_bytes_) + align_bytes(padded_bytes_);
    impl_ = cat("cudnn int8 (", config, ")");
    validate_once(spec, ctx, config);
  }

 protected:
  void run(CudaStream& s) override {
    char* base = static_cast<char*>(workspace_ptr_);
    auto* acc = reinterpret_cast<float*>(base + align_bytes(conv_workspace_));
    void* padded = base + align_bytes(conv_workspace_) + align_bytes(acc_bytes_);
    STAGECRAFT_CUDNN_CHECK(forward(s.cudnn(), prepare_input(s.get(), srcs_[0].data, padded), base, acc));
    launch_requantize(acc, acc_dims_, bias_.get(), scale_.get(), act_, relu6_max_, dst_elem_,
                      dsts_[0].data, dst_dims_, s.get());
    STAGECRAFT_CUDA_LAUNCHED();
  }

 private:
  // The input cuDNN reads: the padded (and halved) copy when needed, else the source itself.
  const void* prepare_input(cudaStream_t stream, const void* x, void* padded) const {
    if (!pad_input_) return x;
    launch_convert(src_elem_, x, src_dims_, Elem::kI8, padded, padded_dims_,
                   halve_input_ ? 1.0f / kHalving : 1.0f, stream);
    STAGECRAFT_CUDA_LAUNCHED();
    return padded;
  }
  // The convolution into the f32 accumulator.
  cudnnStatus_t forward(cudnnHandle_t handle, const void* x, void* conv_ws, float* acc) const {
    const float one = 1.0f, zero = 0.0f;
    return cudnnConvolutionForward(handle, &one, x_.get(), x, w_.get(), weights_->data(), conv_.get(), algo_,
                                   conv_ws, conv_workspace_, &zero, y_.get(), acc);
  }

  [[noreturn]] static void refuse(const KernelSpec& spec, const std::string& config, cudnnStatus_t status) {
    throw BackendError(cat("cuda: cuDNN refuses the int8 convolution '", spec.name, "' (", config, "): ",
                           cudnnGetErrorString(status), "; run this network in f32 or f16"));
  }

  // One trial run per signature and process on scratch tensors, so that a refusal is a clear error
  // when the plan is built rather than a failed launch later.
  void validate_once(const KernelSpec& spec, BuildContext& ctx, const std::string& config) {
    static std::mutex mutex;
    static std::set<std::string> validated;
    const std::string key = AlgorithmCache::key(
        ctx.fingerprint, cat("int8 conv ", graph::attrs_signature(spec.attrs), " ", spec.srcs[0].to_string(),
                             " -> ", spec.dsts[0].to_string()));
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (validated.count(key)) return;
    }
    CudaBuffer x(*device_, BufferRequest{.bytes = static_cast<size_t>(spec.srcs[0].bytes())});
    CudaBuffer work(*device_, BufferRequest{.bytes = workspace_});
    char* base = static_cast<char*>(work.data());
    StreamHandles& setup = device_->setup();
    const void* input =
        prepare_input(setup.stream, x.data(), base + align_bytes(conv_workspace_) + align_bytes(acc_bytes_));
    const cudnnStatus_t status =
        forward(setup.cudnn, input, base, reinterpret_cast<float*>(base + align_bytes(conv_workspace_)));
    STAGECRAFT_CUDA_CHECK(cudaStreamSynchronize(setup.stream));
    if (status != CUDNN_STATUS_SUCCESS) refuse(spec, config, status);
    std::lock_guard<std::mutex> lock(mutex);
    validated.insert(key);
  }

  std::shared_ptr<DeviceContext> device_;
  Elem src_elem_ = Elem::kU8, dst_elem_ = Elem::kU8;
  Dims4 src_dims_, dst_dims_, padded_dims_, acc_dims_;
  Act act_ = Act::kNone;
  float relu6_max_ = kRelu6Max;
  bool pad_input_ = false;
  bool halve_input_ = false;
  TensorDescriptor x_, y_;
  FilterDescriptor w_;
  ConvolutionDescriptor conv_;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  size_t conv_workspace_ = 0, acc_bytes_ = 0, padded_bytes_ = 0;
  std::shared_ptr<CudaBuffer> weights_;
  DeviceFloats scale_, bias_;
};

}  // namespace

std::unique_ptr<Kernel> make_int8_conv(const KernelSpec& spec, BuildContext& ctx) {
  return std::make_unique<Int8ConvKernel>(spec, ctx);
}

}  // namespace stagecraft::executor::cuda
