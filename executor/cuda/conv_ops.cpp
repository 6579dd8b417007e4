// Convolutions on cuDNN (legacy convolution API, deprecated in cuDNN 9 but present): f32 (FMA, or
// TF32 when allowed) and f16 (tensor cores), NCHW or NHWC. A bias with a ReLU or no activation is
// fused into cudnnConvolutionBiasActivationForward when cuDNN runs that call for the shape: the
// algorithm is timed on the fused call itself, since it supports fewer algorithms than the plain
// convolution (with an identity activation only IMPLICIT_PRECOMP_GEMM, cuDNN API reference,
// cudnnActivationMode_t); when cuDNN refuses the fused call for every algorithm, the convolution
// runs plain and an own kernel adds the bias and the activation. Choices are cached per device
// (algo_cache.h). A fused residual (y = act(conv(x) + b + r)) is the fused call's z operand
// (alpha2 = 1), or an own addition after the plain convolution. int8 convolutions are in
// conv_int8.cpp.
#include <cuda_runtime_api.h>

#include <optional>

#include "common/half.h"
#include "common/strings.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/ops.h"
#include "executor/kernel_math.h"

namespace stagecraft::executor::cuda {

namespace {

using graph::DataType;
using graph::Layout;
using graph::TensorDesc;

constexpr int kAlgoCandidates = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
constexpr int kFusedTimingRuns = 3;  // timed fused calls per candidate (after one untimed)

cudnnDataType_t cudnn_type(DataType t) { return t == DataType::kF16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT; }

void set_tensor(const TensorDescriptor& desc, const TensorDesc& d) {
  const Dims4 g = dims_of(d);
  set_tensor_4d(desc, g.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, cudnn_type(d.dtype), g);
}

// Device buffers for a search: input, output and the largest workspace that fits (halved until
// it does).
struct Scratch {
  std::unique_ptr<CudaBuffer> x, y, work;
  size_t space = 0;
  Scratch(DeviceContext& ctx, const KernelSpec& spec, size_t limit)
      : x(std::make_unique<CudaBuffer>(ctx, BufferRequest{.bytes = static_cast<size_t>(spec.srcs[0].bytes())})),
        y(std::make_unique<CudaBuffer>(ctx, BufferRequest{.bytes = static_cast<size_t>(spec.dsts[0].bytes())})),
        space(limit) {
    while (!work && space > 0) {
      try {
        work = std::make_unique<CudaBuffer>(ctx, BufferRequest{.bytes = space});
      } catch (const BackendError&) {
        space /= 2;  // little free memory: try with less workspace
      }
    }
  }
};

class ConvKernel : public CudaKernel {
 public:
  ConvKernel(const KernelSpec& spec, BuildContext& ctx) : CudaKernel("cudnn"), device_(ctx.device) {
    const auto& a = std::get<graph::Conv2dAttrs>(spec.attrs);
    const TensorDesc& src = spec.srcs[0];
    const TensorDesc& dst = spec.dsts[0];
    const bool nhwc = src.layout == Layout::kNHWC;
    const bool half = src.dtype == DataType::kF16;
    elem_ = elem_of(src.dtype);
    dst_dims_ = dims_of(dst);
    act_ = act_of(a.activation);
    relu6_max_ = relu6_bound(dst);
    residual_ = a.residual;
    set_tensor(x_, src);
    set_tensor(y_, dst);
    if (residual_) set_tensor(z_, spec.srcs[1]);
    set_filter(w_, cudnn_type(src.dtype), nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
               a.out_channels, a.in_channels / a.groups, a);
    set_convolution(conv_, a, CUDNN_DATA_FLOAT);
    STAGECRAFT_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv_.get(), static_cast<int>(a.groups)));
    STAGECRAFT_CUDNN_CHECK(cudnnSetConvolutionMathType(
        conv_.get(), half ? CUDNN_TENSOR_OP_MATH : (ctx.config.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH)));
    upload_weights(a, spec.weights->weight, nhwc, half);
    if (a.bias) bias_ = DeviceFloats(*device_, spec.weights->bias);
    // cudnnConvolutionBiasActivationForward takes ReLU or identity (no ReLU6, no sigmoid).
    fusable_ = a.bias && (a.activation == graph::Activation::kRelu ||
                          a.activation == graph::Activation::kNone);
    if (fusable_) {
      // The bias in the output's type, as an N=1, C=K, 1×1 tensor.
      STAGECRAFT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(bias_desc_.get(), CUDNN_TENSOR_NCHW,
                                                        cudnn_type(dst.dtype), 1,
                                                        static_cast<int>(a.out_channels), 1, 1));
      fused_bias_ = half ? upload_half(spec.weights->bias) : upload_floats(spec.weights->bias);
      STAGECRAFT_CUDNN_CHECK(cudnnSetActivationDescriptor(
          act_desc_.get(),
          a.activation == graph::Activation::kRelu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
          CUDNN_NOT_PROPAGATE_NAN, 0.0));
    }
    choose_algorithm(spec, ctx);
  }

 protected:
  void run(CudaStream& s) override {
    const void* z = residual_ ? srcs_[1].data : nullptr;
    STAGECRAFT_CUDNN_CHECK(call(s.cudnn(), srcs_[0].data, dsts_[0].data, workspace_ptr_, fused_, z));
    if (fused_) return;
    if (residual_) {
      // y = act(y + b + r): the bias alone, then the addition with the activation.
      if (bias_.get()) {
        launch_bias_act(elem_, dsts_[0].data, bias_.get(), dst_dims_, Act::kNone, relu6_max_, s.get());
        STAGECRAFT_CUDA_LAUNCHED();
      }
      const void* operands[] = {dsts_[0].data, z};
      launch_add(elem_, operands, 2, dsts_[0].data, dst_dims_.n * dst_dims_.c * dst_dims_.h * dst_dims_.w,
                 act_, relu6_max_, s.get());
      STAGECRAFT_CUDA_LAUNCHED();
    } else if (bias_.get() || act_ != Act::kNone) {
      launch_bias_act(elem_, dsts_[0].data, bias_.get(), dst_dims_, act_, relu6_max_, s.get());
      STAGECRAFT_CUDA_LAUNCHED();
    }
  }

 private:
  // The convolution call: fused (bias + residual z + activation) or plain, with the current
  // algorithm. Without a residual, z is y with alpha2 = 0 (cuDNN allows z to alias y).
  cudnnStatus_t call(cudnnHandle_t handle, const void* x, void* y, void* work, bool fused,
                     const void* z = nullptr) const {
    const float one = 1.0f, zero = 0.0f;
    if (fused) {
      const bool with_z = residual_ && z != nullptr;
      return cudnnConvolutionBiasActivationForward(
          handle, &one, x_.get(), x, w_.get(), weights_->data(), conv_.get(), algo_, work, workspace_,
          with_z ? &one : &zero, with_z ? z_.get() : y_.get(), with_z ? z : y, bias_desc_.get(),
          fused_bias_->data(), act_desc_.get(), y_.get(), y);
    }
    return cudnnConvolutionForward(handle, &one, x_.get(), x, w_.get(), weights_->data(), conv_.get(), algo_,
                                   work, workspace_, &zero, y_.get(), y);
  }

  std::shared_ptr<CudaBuffer> upload_floats(const std::vector<float>& v) {
    return upload_bytes(*device_, v.data(), v.size() * sizeof(float));
  }
  std::shared_ptr<CudaBuffer> upload_half(const std::vector<float>& v) {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = float_to_half(v[i]);
    return upload_bytes(*device_, h.data(), h.size() * sizeof(uint16_t));
  }

  void upload_weights(const graph::Conv2dAttrs& a, const std::vector<float>& oihw, bool nhwc, bool half) {
    const ConvWeightDims d = conv_weight_dims(a);
    // cuDNN's NHWC filters are OHWI.
    const std::vector<float> host = nhwc ? oihw_to_ohwi(oihw, d, d.out, d.in) : oihw;
    weights_ = half ? upload_half(host) : upload_floats(host);
  }

  std::string signature(const KernelSpec& spec, bool fused) const {
    return cat("conv ", graph::attrs_signature(spec.attrs), " ", spec.srcs[0].to_string(), " -> ",
               spec.dsts[0].to_string(), fused ? " fused" : "");
  }

  static const char* origin(AlgorithmCache::Source source) {
    return source == AlgorithmCache::Source::kFile ? "(cached)" : "(chosen earlier)";
  }

  size_t workspace_of(cudnnConvolutionFwdAlgo_t algo) const {
    size_t bytes = 0;
    STAGECRAFT_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(device_->setup().cudnn, x_.get(), w_.get(),
                                                                   conv_.get(), y_.get(), algo, &bytes));
    return bytes;
  }

  void use(int algo, bool fused, const std::string& how) {
    algo_ = static_cast<cudnnConvolutionFwdAlgo_t>(algo);
    workspace_ = workspace_of(algo_);
    fused_ = fused;
    impl_ = cat(fused ? "cudnn fused conv+bias+act algo " : "cudnn algo ", algo, " ", how);
  }

  // The time of the fused call with `algo` (ms), or nullopt when cuDNN refuses it.
  std::optional<float> time_fused(cudnnConvolutionFwdAlgo_t algo, size_t bytes, Scratch& scratch,
                                  std::string* refusal) {
    algo_ = algo;
    workspace_ = bytes;
    StreamHandles& setup = device_->setup();
    void* work = scratch.work ? scratch.work->data() : nullptr;
    void* z = residual_ ? scratch.y->data() : nullptr;  // the timed call adds a residual too
    const cudnnStatus_t status = call(setup.cudnn, scratch.x->data(), scratch.y->data(), work, true, z);
    if (status != CUDNN_STATUS_SUCCESS) {
      *refusal = cudnnGetErrorString(status);
      return std::nullopt;
    }
    cudaEvent_t start = nullptr, stop = nullptr;
    STAGECRAFT_CUDA_CHECK(cudaEventCreate(&start));
    STAGECRAFT_CUDA_CHECK(cudaEventCreate(&stop));
    float ms = 0;
    STAGECRAFT_CUDA_CHECK(cudaEventRecord(start, setup.stream));
    for (int i = 0; i < kFusedTimingRuns; ++i) {
      STAGECRAFT_CUDNN_CHECK(call(setup.cudnn, scratch.x->data(), scratch.y->data(), work, true, z));
    }
    STAGECRAFT_CUDA_CHECK(cudaEventRecord(stop, setup.stream));
    STAGECRAFT_CUDA_CHECK(cudaEventSynchronize(stop));
    STAGECRAFT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return ms / kFusedTimingRuns;
  }

  void choose_algorithm(const KernelSpec& spec, BuildContext& ctx) {
    const std::string plain_key = signature(spec, false), fused_key = signature(spec, true);
    AlgorithmCache* cache = ctx.algos;
    bool fused_refused = false;
    if (fusable_ && cache) {
      if (auto hit = cache->find(ctx.fingerprint, fused_key)) {
        if (hit->algo != AlgorithmCache::kUnfused) return use(hit->algo, true, origin(hit->source));
        fused_refused = true;
      }
    }
    if ((!fusable_ || fused_refused) && cache) {
      if (auto hit = cache->find(ctx.fingerprint, plain_key)) {
        use(hit->algo, false, origin(hit->source));
        if (fused_refused) impl_ += " + own epilogue (fused call refused)";
        return;
      }
    }
    // Candidates from cuDNN's measurements of the plain convolution, fastest first.
    Scratch scratch(*device_, spec, ctx.config.workspace_limit);
    cudnnConvolutionFwdAlgoPerf_t perf[kAlgoCandidates];
    int returned = 0;
    STAGECRAFT_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
        device_->setup().cudnn, x_.get(), scratch.x->data(), w_.get(), weights_->data(), conv_.get(),
        y_.get(), scratch.y->data(), kAlgoCandidates, &returned, perf,
        scratch.work ? scratch.work->data() : nullptr, scratch.work ? scratch.space : 0));
    int plain = -1;
    for (int i = 0; i < returned && plain < 0; ++i) {
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= scratch.space) plain = i;
    }
    if (plain < 0) {
      throw BackendError(cat("cuda: no cuDNN algorithm runs convolution '", spec.name, "' within ",
                             byte_size(static_cast<double>(ctx.config.workspace_limit)), " of workspace"));
    }
    std::string note = fused_refused ? " + own epilogue (fused call refused)" : "";
    if (fusable_ && !fused_refused) {
      // Time the fused call itself with every candidate cuDNN can run plain.
      std::optional<float> best;
      int best_algo = 0;
      std::string refusal;
      for (int i = 0; i < returned; ++i) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > scratch.space) continue;
        const auto ms = time_fused(perf[i].algo, perf[i].memory, scratch, &refusal);
        if (ms && (!best || *ms < *best)) {
          best = ms;
          best_algo = static_cast<int>(perf[i].algo);
        }
      }
      if (cache) cache->insert(ctx.fingerprint, fused_key, best ? best_algo : AlgorithmCache::kUnfused);
      if (best) return use(best_algo, true, cat("(timed ", fixed(*best, 3), " ms)"));
      note = cat(" + own epilogue (fused call refused: ", refusal, ")");
    }
    if (cache) cache->insert(ctx.fingerprint, plain_key, static_cast<int>(perf[plain].algo));
    use(static_cast<int>(perf[plain].algo), false, cat("(timed ", fixed(perf[plain].time, 3), " ms)"));
    impl_ += note;
  }

  std::shared_ptr<DeviceContext> device_;
  Elem elem_ = Elem::kF32;
  Dims4 dst_dims_;
  Act act_ = Act::kNone;
  float relu6_max_ = kRelu6Max;
  TensorDescriptor x_, y_, z_, bias_desc_;
  FilterDescriptor w_;
  ConvolutionDescriptor conv_;
  ActivationDescriptor act_desc_;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  std::shared_ptr<CudaBuffer> weights_, fused_bias_;
  DeviceFloats bias_;  // f32, for the own epilogue
  bool fusable_ = false;
  bool fused_ = false;
  bool residual_ = false;
};

Support check(const KernelSpec& spec) {
  const auto& a = std::get<graph::Conv2dAttrs>(spec.attrs);
  if (a.padding.top != a.padding.bottom || a.padding.left != a.padding.right) {
    return Support::unsupported(SupportReason::kAttributes,
                                "asymmetric convolution padding is not supported by cuDNN's convolution API");
  }
  if (spec.srcs[0].layout != spec.dsts[0].layout) {
    return Support::unsupported(SupportReason::kLayout, "source and destination must have the same layout");
  }
  if (a.residual && (spec.srcs[1].layout != spec.dsts[0].layout || spec.srcs[1].dtype != spec.dsts[0].dtype)) {
    return Support::unsupported(SupportReason::kLayout,
                                "a residual input must have the destination's layout and type");
  }
  if (graph::is_int8(spec.srcs[0].dtype)) {
    const auto no = [](std::string m) { return Support::unsupported(SupportReason::kQuantisation, std::move(m)); };
    if (a.groups != 1) return no("grouped int8 convolutions are not supported on CUDA (run them in f32)");
    if (a.residual) return no("int8 convolutions take no residual input (quantise before fusing additions)");
    if (spec.srcs[0].layout != Layout::kNHWC) {
      return no("cuDNN's int8 convolutions read nhwc: use --layout nhwc (the default for int8)");
    }
  }
  return Support::native();
}

std::unique_ptr<Kernel> build(const KernelSpec& spec, BuildContext& ctx) {
  if (graph::is_int8(spec.srcs[0].dtype)) return make_int8_conv(spec, ctx);
  return std::make_unique<ConvKernel>(spec, ctx);
}

}  // namespace

const OpFamily kConvolutionFamily{"convolution", {graph::OpKind::kConv2d}, check, build};

}  // namespace stagecraft::executor::cuda
