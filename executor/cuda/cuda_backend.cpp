// The CUDA backend. Compiled by the host compiler; own kernels are launched through the plain
// launchers of kernels.h. Uses cuDNN's (deprecated but present in cuDNN 9) legacy convolution API.
#include "executor/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "common/strings.h"
#include "common/value_cache.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/kernels.h"
#include "executor/op_rules.h"

namespace stagecraft::executor {

namespace cuda {

void fail_call(const char* library, const char* statement, const char* file, int line,
               const std::string& error) {
  throw BackendError(cat(library, " call failed: ", statement, " at ", file, ":", line, ": ", error));
}

const char* cublas_error_string(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "architecture mismatch";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "execution failed";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "not supported";
    default:
      return "error";
  }
}

}  // namespace cuda

namespace {

using cuda::Act;
using cuda::Dims4;
using cuda::Elem;
using graph::DataType;
using graph::Layout;
using graph::OpKind;
using graph::TensorDesc;

constexpr int kAlgoCandidates = 8;
constexpr int kMaxAddPerLaunch = 8;

Elem elem_of(DataType t) {
  switch (t) {
    case DataType::kF16:
      return Elem::kF16;
    case DataType::kU8:
      return Elem::kU8;
    case DataType::kI8:
      return Elem::kI8;
    default:
      return Elem::kF32;
  }
}

cudnnDataType_t cudnn_type(DataType t) {
  return t == DataType::kF16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

constexpr float kRelu6Max = 6.0f;
constexpr int64_t kInt8ChannelMultiple = 4;  // cuDNN's int8 NHWC convolutions need C % 4 == 0

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
size_t align_bytes(size_t x) { return (x + 255) / 256 * 256; }

// The real value of a quantised element is scale · q; f32 tensors have scale 1.
float real_scale(const TensorDesc& d) { return graph::is_int8(d.dtype) ? d.scale : 1.0f; }

Dims4 dims_of(const TensorDesc& d) {
  Dims4 r;
  const graph::Shape& s = d.shape;
  if (s.rank() == 4) {
    r.n = s[0];
    r.c = s[1];
    r.h = s[2];
    r.w = s[3];
  } else if (s.rank() == 2) {
    r.n = s[0];
    r.c = s[1];
  }
  r.nhwc = d.layout == Layout::kNHWC;
  return r;
}

Act act_of(graph::Activation a) { return static_cast<Act>(static_cast<int>(a)); }

// ---- Memory, streams, events ----------------------------------------------------------------

class CudaBuffer : public Buffer {
 public:
  explicit CudaBuffer(size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&data_, std::max<size_t>(bytes, 1)) != cudaSuccess) {
      cudaGetLastError();
      throw BackendError(cat("cuda: cannot allocate ", byte_size(static_cast<double>(bytes)),
                             " of GPU memory"));
    }
    STAGECRAFT_CUDA_CHECK(cudaMemset(data_, 0, std::max<size_t>(bytes, 1)));
  }
  ~CudaBuffer() override { cudaFree(data_); }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_;
};

class CudaEvent : public Event {
 public:
  CudaEvent() { STAGECRAFT_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  ~CudaEvent() override { cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_;
};

class CudaStream : public Stream {
 public:
  CudaStream() {
    STAGECRAFT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    STAGECRAFT_CUDNN_CHECK(cudnnCreate(&cudnn_));
    STAGECRAFT_CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
    STAGECRAFT_CUBLAS_CHECK(cublasCreate(&cublas_));
    STAGECRAFT_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  }
  ~CudaStream() override {
    cudaStreamSynchronize(stream_);
    cublasDestroy(cublas_);
    cudnnDestroy(cudnn_);
    cudaStreamDestroy(stream_);
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  void record(Event& event) override {
    STAGECRAFT_CUDA_CHECK(cudaEventRecord(static_cast<CudaEvent&>(event).get(), stream_));
  }
  void wait(Event& event) override {
    STAGECRAFT_CUDA_CHECK(cudaStreamWaitEvent(stream_, static_cast<CudaEvent&>(event).get(), 0));
  }
  void synchronize() override { STAGECRAFT_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  void host_callback(std::function<void()> fn) override {
    auto* heap = new std::function<void()>(std::move(fn));
    STAGECRAFT_CUDA_CHECK(cudaLaunchHostFunc(
        stream_,
        [](void* data) {
          std::unique_ptr<std::function<void()>> f(static_cast<std::function<void()>*>(data));
          (*f)();
        },
        heap));
  }

  cudaStream_t get() const { return stream_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasHandle_t cublas() const { return cublas_; }

 private:
  cudaStream_t stream_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
};

class CudaGraphWork : public CapturedWork {
 public:
  explicit CudaGraphWork(cudaGraphExec_t exec) : exec_(exec) {}
  ~CudaGraphWork() override { cudaGraphExecDestroy(exec_); }
  CudaGraphWork(const CudaGraphWork&) = delete;
  CudaGraphWork& operator=(const CudaGraphWork&) = delete;
  void launch(Stream& origin) override {
    STAGECRAFT_CUDA_CHECK(cudaGraphLaunch(exec_, static_cast<CudaStream&>(origin).get()));
  }

 private:
  cudaGraphExec_t exec_;
};

// ---- Kernels ----------------------------------------------------------------------------------

// A kernel remembers its bound tensors and workspace; `run` enqueues the work.
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

// A kernel given as a function of (stream, srcs, dsts, workspace).
class FnKernel : public CudaKernel {
 public:
  using Fn = std::function<void(CudaStream&, const std::vector<TensorRef>&,
                                const std::vector<TensorRef>&, void*)>;
  FnKernel(std::string impl, Fn fn, size_t workspace = 0) : CudaKernel(std::move(impl)), fn_(std::move(fn)) {
    workspace_ = workspace;
  }

 protected:
  void run(CudaStream& s) override {
    fn_(s, srcs_, dsts_, workspace_ptr_);
    STAGECRAFT_CUDA_LAUNCHED();
  }

 private:
  Fn fn_;
};

// Device copies of small float arrays (bias, scale, shift) owned by kernels.
class DeviceFloats {
 public:
  DeviceFloats() = default;
  explicit DeviceFloats(const std::vector<float>& host) {
    if (host.empty()) return;
    buffer_ = std::make_shared<CudaBuffer>(host.size() * sizeof(float));
    STAGECRAFT_CUDA_CHECK(
        cudaMemcpy(buffer_->data(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  const float* get() const { return buffer_ ? static_cast<const float*>(buffer_->data()) : nullptr; }

 private:
  std::shared_ptr<CudaBuffer> buffer_;
};

class TensorDescriptor {
 public:
  TensorDescriptor() { STAGECRAFT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_)); }
  ~TensorDescriptor() { cudnnDestroyTensorDescriptor(desc_); }
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  void set(const TensorDesc& d) {
    const Dims4 g = dims_of(d);
    STAGECRAFT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(
        desc_, g.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, cudnn_type(d.dtype),
        static_cast<int>(g.n), static_cast<int>(g.c), static_cast<int>(g.h), static_cast<int>(g.w)));
  }
  void set_bias(int64_t channels) {
    STAGECRAFT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                                      static_cast<int>(channels), 1, 1));
  }
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_;
};

// Convolution through cuDNN: the algorithm is timed once per shape (or taken from the cache).
class ConvKernel : public CudaKernel {
 public:
  ConvKernel(const KernelSpec& spec, CudaStream& setup, ValueCache* algos, const BackendConfig& config)
      : CudaKernel("cudnn") {
    const auto& a = std::get<graph::Conv2dAttrs>(spec.attrs);
    const TensorDesc& src = spec.srcs[0];
    const TensorDesc& dst = spec.dsts[0];
    elem_ = elem_of(src.dtype);
    dst_dims_ = dims_of(dst);
    activation_ = a.activation;
    x_.set(src);
    y_.set(dst);
    const bool nhwc = src.layout == Layout::kNHWC;
    STAGECRAFT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_));
    STAGECRAFT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(
        w_, cudnn_type(src.dtype), nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
        static_cast<int>(a.out_channels), static_cast<int>(a.in_channels / a.groups),
        static_cast<int>(a.kernel.h), static_cast<int>(a.kernel.w)));
    STAGECRAFT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_));
    STAGECRAFT_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        conv_, static_cast<int>(a.padding.top), static_cast<int>(a.padding.left),
        static_cast<int>(a.stride.h), static_cast<int>(a.stride.w), static_cast<int>(a.dilation.h),
        static_cast<int>(a.dilation.w), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    STAGECRAFT_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv_, static_cast<int>(a.groups)));
    const bool half = src.dtype == DataType::kF16;
    STAGECRAFT_CUDNN_CHECK(cudnnSetConvolutionMathType(
        conv_, half ? CUDNN_TENSOR_OP_MATH : (config.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH)));
    upload_weights(a, spec.weights->weight, nhwc, half, setup);
    if (a.bias) bias_ = DeviceFloats(spec.weights->bias);
    // ReLU (or none) after a bias fuses into cuDNN's conv-bias-activation in f32.
    fused_ = !half && a.bias && (a.activation == graph::Activation::kRelu);
    if (fused_) {
      bias_desc_.set_bias(a.out_channels);
      STAGECRAFT_CUDNN_CHECK(cudnnCreateActivationDescriptor(&act_));
      STAGECRAFT_CUDNN_CHECK(cudnnSetActivationDescriptor(act_, CUDNN_ACTIVATION_RELU,
                                                          CUDNN_NOT_PROPAGATE_NAN, 0.0));
    }
    choose_algorithm(spec, setup, algos, config.workspace_limit);
  }
  ~ConvKernel() override {
    if (act_) cudnnDestroyActivationDescriptor(act_);
    cudnnDestroyConvolutionDescriptor(conv_);
    cudnnDestroyFilterDescriptor(w_);
  }
  ConvKernel(const ConvKernel&) = delete;
  ConvKernel& operator=(const ConvKernel&) = delete;

 protected:
  void run(CudaStream& s) override {
    const float one = 1.0f, zero = 0.0f;
    if (fused_) {
      STAGECRAFT_CUDNN_CHECK(cudnnConvolutionBiasActivationForward(
          s.cudnn(), &one, x_.get(), srcs_[0].data, w_, weights_->data(), conv_, algo_,
          workspace_ptr_, workspace_, &zero, y_.get(), dsts_[0].data, bias_desc_.get(), bias_.get(),
          act_, y_.get(), dsts_[0].data));
      return;
    }
    STAGECRAFT_CUDNN_CHECK(cudnnConvolutionForward(s.cudnn(), &one, x_.get(), srcs_[0].data, w_,
                                                   weights_->data(), conv_, algo_, workspace_ptr_,
                                                   workspace_, &zero, y_.get(), dsts_[0].data));
    if (bias_.get() || activation_ != graph::Activation::kNone) {
      cuda::launch_bias_act(elem_, dsts_[0].data, bias_.get(), dst_dims_, act_of(activation_), s.get());
      STAGECRAFT_CUDA_LAUNCHED();
    }
  }

 private:
  void upload_weights(const graph::Conv2dAttrs& a, const std::vector<float>& oihw, bool nhwc,
                      bool half, CudaStream& setup) {
    std::vector<float> host = oihw;
    if (nhwc) {  // OIHW -> OHWI (cuDNN's NHWC filter order)
      const int64_t o = a.out_channels, i = a.in_channels / a.groups, kh = a.kernel.h,
                    kw = a.kernel.w;
      for (int64_t oo = 0; oo < o; ++oo)
        for (int64_t ii = 0; ii < i; ++ii)
          for (int64_t y = 0; y < kh; ++y)
            for (int64_t x = 0; x < kw; ++x)
              host[static_cast<size_t>(((oo * kh + y) * kw + x) * i + ii)] =
                  oihw[static_cast<size_t>(((oo * i + ii) * kh + y) * kw + x)];
    }
    DeviceFloats staged(host);
    weights_ = std::make_shared<CudaBuffer>(host.size() * (half ? 2 : 4));
    if (half) {
      cuda::launch_float_to_half(staged.get(), weights_->data(), static_cast<int64_t>(host.size()),
                                 setup.get());
      STAGECRAFT_CUDA_LAUNCHED();
    } else {
      STAGECRAFT_CUDA_CHECK(cudaMemcpyAsync(weights_->data(), staged.get(), host.size() * 4,
                                            cudaMemcpyDeviceToDevice, setup.get()));
    }
    setup.synchronize();
  }

  std::string signature(const KernelSpec& spec) const {
    return cat("conv ", graph::attrs_signature(spec.attrs), " ", spec.srcs[0].to_string(), " -> ",
               spec.dsts[0].to_string(), fused_ ? " fused" : "");
  }

  void choose_algorithm(const KernelSpec& spec, CudaStream& setup, ValueCache* algos,
                        size_t limit) {
    const std::string key = signature(spec);
    if (algos) {
      if (auto cached = algos->find(key)) {
        algo_ = static_cast<cudnnConvolutionFwdAlgo_t>(static_cast<int>(*cached));
        STAGECRAFT_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
            setup.cudnn(), x_.get(), w_, conv_, y_.get(), algo_, &workspace_));
        impl_ = cat("cudnn algo ", static_cast<int>(algo_), " (cached)");
        return;
      }
    }
    // Candidates from cuDNN's heuristics, timed once on scratch tensors.
    const size_t x_bytes = static_cast<size_t>(spec.srcs[0].bytes());
    const size_t y_bytes = static_cast<size_t>(spec.dsts[0].bytes());
    CudaBuffer x(x_bytes), y(y_bytes);
    size_t space = limit;
    std::unique_ptr<CudaBuffer> work;
    while (!work && space > 0) {
      try {
        work = std::make_unique<CudaBuffer>(space);
      } catch (const BackendError&) {
        space /= 2;  // little free memory: try with less workspace
      }
    }
    cudnnConvolutionFwdAlgoPerf_t perf[kAlgoCandidates];
    int returned = 0;
    STAGECRAFT_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
        setup.cudnn(), x_.get(), x.data(), w_, weights_->data(), conv_, y_.get(), y.data(),
        kAlgoCandidates, &returned, perf, work ? work->data() : nullptr, work ? space : 0));
    for (int i = 0; i < returned; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > space) continue;
      if (fused_ && perf[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING) continue;
      algo_ = perf[i].algo;
      workspace_ = perf[i].memory;
      impl_ = cat("cudnn algo ", static_cast<int>(algo_), " (", fixed(perf[i].time, 3), " ms)");
      if (algos) algos->insert(key, static_cast<double>(algo_));
      return;
    }
    throw BackendError(cat("cuda: no cuDNN algorithm runs convolution '", spec.name, "' within ",
                           byte_size(static_cast<double>(limit)), " of workspace"));
  }

  Elem elem_ = Elem::kF32;
  Dims4 dst_dims_;
  graph::Activation activation_ = graph::Activation::kNone;
  TensorDescriptor x_, y_, bias_desc_;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnActivationDescriptor_t act_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  std::shared_ptr<CudaBuffer> weights_;
  DeviceFloats bias_;
  bool fused_ = false;
};

// A quantised convolution: cuDNN's int8 NHWC convolution (i8 input, per-output-channel i8
// weights, s32 accumulation, f32 output: INT8_EXT_CONFIG) into a workspace, then an epilogue that
// adds the bias (in accumulator units), applies the per-channel requantisation scale and the
// activation, and rounds into the 8-bit (or f32) output. Channels are padded to multiples of 4:
// zero filters for the output, a zero-filled copy of the input when its channels are not. cuDNN
// takes unsigned 8-bit inputs only in its vectorised NCHW_VECT_C configurations, so a u8 input is
// halved into i8 on the way into that copy (its scale doubled: one bit of resolution less).
class Int8ConvKernel : public CudaKernel {
 public:
  Int8ConvKernel(const KernelSpec& spec, CudaStream& setup) : CudaKernel("cudnn int8") {
    const auto& a = std::get<graph::Conv2dAttrs>(spec.attrs);
    const TensorDesc& src = spec.srcs[0];
    const TensorDesc& dst = spec.dsts[0];
    src_elem_ = elem_of(src.dtype);
    dst_elem_ = elem_of(dst.dtype);
    src_dims_ = dims_of(src);
    dst_dims_ = dims_of(dst);
    activation_ = act_of(a.activation);
    const int64_t cin = a.in_channels, cin4 = round_up(cin, kInt8ChannelMultiple);
    const int64_t k = a.out_channels, k4 = round_up(k, kInt8ChannelMultiple);
    padded_dims_ = src_dims_;
    padded_dims_.c = cin4;
    acc_dims_ = dst_dims_;
    acc_dims_.c = k4;
    acc_dims_.nhwc = true;
    halve_input_ = src.dtype == DataType::kU8;
    pad_input_ = cin4 != cin || halve_input_;
    STAGECRAFT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(
        x_.get(), CUDNN_TENSOR_NHWC, CUDNN_DATA_INT8,
        static_cast<int>(src_dims_.n), static_cast<int>(cin4), static_cast<int>(src_dims_.h),
        static_cast<int>(src_dims_.w)));
    STAGECRAFT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(
        y_.get(), CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, static_cast<int>(dst_dims_.n),
        static_cast<int>(k4), static_cast<int>(dst_dims_.h), static_cast<int>(dst_dims_.w)));
    STAGECRAFT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_));
    STAGECRAFT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_, CUDNN_DATA_INT8, CUDNN_TENSOR_NHWC,
                                                      static_cast<int>(k4), static_cast<int>(cin4),
                                                      static_cast<int>(a.kernel.h),
                                                      static_cast<int>(a.kernel.w)));
    STAGECRAFT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_));
    STAGECRAFT_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        conv_, static_cast<int>(a.padding.top), static_cast<int>(a.padding.left),
        static_cast<int>(a.stride.h), static_cast<int>(a.stride.w), static_cast<int>(a.dilation.h),
        static_cast<int>(a.dilation.w), CUDNN_CROSS_CORRELATION, CUDNN_DATA_INT32));

    // Weights: symmetric per output channel, OHWI with zero padding to k4 x kh x kw x cin4.
    const std::vector<float>& w = spec.weights->weight;
    const int64_t kh = a.kernel.h, kw = a.kernel.w;
    std::vector<int8_t> q(static_cast<size_t>(k4 * kh * kw * cin4), 0);
    std::vector<float> scale(static_cast<size_t>(k)), bias;
    const float in_scale = real_scale(src) * (halve_input_ ? 2.0f : 1.0f);
    for (int64_t o = 0; o < k; ++o) {
      float m = 0;
      for (int64_t i = 0; i < cin * kh * kw; ++i) m = std::max(m, std::fabs(w[static_cast<size_t>(o * cin * kh * kw + i)]));
      const float ws = m > 0 ? m / 127.0f : 1.0f;
      for (int64_t i = 0; i < cin; ++i)
        for (int64_t y = 0; y < kh; ++y)
          for (int64_t x = 0; x < kw; ++x) {
            const float v = w[static_cast<size_t>(((o * cin + i) * kh + y) * kw + x)] / ws;
            q[static_cast<size_t>(((o * kh + y) * kw + x) * cin4 + i)] =
                static_cast<int8_t>(std::clamp(std::nearbyint(v), -127.0f, 127.0f));
          }
      const float dst_scale = !graph::is_int8(dst.dtype)       ? 1.0f
                              : spec.dst_channel_scales.empty() ? dst.scale
                                                                : spec.dst_channel_scales[static_cast<size_t>(o)];
      scale[static_cast<size_t>(o)] = in_scale * ws / dst_scale;
      if (a.bias) bias.push_back(spec.weights->bias[static_cast<size_t>(o)] / (in_scale * ws));
    }
    relu6_max_ = graph::is_int8(dst.dtype) ? kRelu6Max / dst.scale : kRelu6Max;
    weights_ = std::make_shared<CudaBuffer>(q.size());
    STAGECRAFT_CUDA_CHECK(cudaMemcpy(weights_->data(), q.data(), q.size(), cudaMemcpyHostToDevice));
    scale_ = DeviceFloats(scale);
    bias_ = DeviceFloats(bias);
    (void)setup;

    algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    STAGECRAFT_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(setup.cudnn(), x_.get(), w_, conv_,
                                                                   y_.get(), algo_, &conv_workspace_));
    acc_bytes_ = static_cast<size_t>(acc_dims_.n * acc_dims_.h * acc_dims_.w * acc_dims_.c) * sizeof(float);
    padded_bytes_ = pad_input_ ? static_cast<size_t>(padded_dims_.n * padded_dims_.h * padded_dims_.w * cin4) : 0;
    workspace_ = align_bytes(conv_workspace_) + align_bytes(acc_bytes_) + align_bytes(padded_bytes_);
  }
  ~Int8ConvKernel() override {
    cudnnDestroyConvolutionDescriptor(conv_);
    cudnnDestroyFilterDescriptor(w_);
  }
  Int8ConvKernel(const Int8ConvKernel&) = delete;
  Int8ConvKernel& operator=(const Int8ConvKernel&) = delete;

 protected:
  void run(CudaStream& s) override {
    char* base = static_cast<char*>(workspace_ptr_);
    void* conv_ws = base;
    auto* acc = reinterpret_cast<float*>(base + align_bytes(conv_workspace_));
    void* padded = base + align_bytes(conv_workspace_) + align_bytes(acc_bytes_);
    const void* x = srcs_[0].data;
    if (pad_input_) {
      if (padded_dims_.c != src_dims_.c) {
        STAGECRAFT_CUDA_CHECK(cudaMemsetAsync(padded, 0, padded_bytes_, s.get()));
      }
      cuda::launch_convert(src_elem_, x, src_dims_, Elem::kI8, padded, padded_dims_,
                           halve_input_ ? 0.5f : 1.0f, s.get());
      STAGECRAFT_CUDA_LAUNCHED();
      x = padded;
    }
    const float one = 1.0f, zero = 0.0f;
    STAGECRAFT_CUDNN_CHECK(cudnnConvolutionForward(s.cudnn(), &one, x_.get(), x, w_, weights_->data(),
                                                   conv_, algo_, conv_ws, conv_workspace_, &zero,
                                                   y_.get(), acc));
    cuda::launch_requantize(acc, acc_dims_, bias_.get(), scale_.get(), activation_, relu6_max_,
                            dst_elem_, dsts_[0].data, dst_dims_, s.get());
    STAGECRAFT_CUDA_LAUNCHED();
  }

 private:
  Elem src_elem_ = Elem::kU8, dst_elem_ = Elem::kU8;
  Dims4 src_dims_, dst_dims_, padded_dims_, acc_dims_;
  Act activation_ = Act::kNone;
  float relu6_max_ = kRelu6Max;
  bool pad_input_ = false;
  bool halve_input_ = false;
  TensorDescriptor x_, y_;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  size_t conv_workspace_ = 0, acc_bytes_ = 0, padded_bytes_ = 0;
  std::shared_ptr<CudaBuffer> weights_;
  DeviceFloats scale_, bias_;
};

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(const BackendConfig& config) : config_(config) {
    STAGECRAFT_CUDA_CHECK(cudaSetDevice(0));
    STAGECRAFT_CUDA_CHECK(cudaGetDeviceProperties(&prop_, 0));
    setup_ = std::make_unique<CudaStream>();
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    int cublas_version = 0;
    cublasGetVersion(setup_->cublas(), &cublas_version);
    fingerprint_ = cat("cuda:", prop_.name, ":sm", prop_.major, prop_.minor, ":driver", driver,
                       ":runtime", runtime, ":cudnn", cudnnGetVersion(), ":cublas", cublas_version,
                       config.tf32 ? ":tf32" : ":fp32strict");
    try {
      algos_ = std::make_unique<ValueCache>(
          config.cache_dir.empty() ? ValueCache::default_dir() : config.cache_dir, fingerprint_,
          std::function<void(const std::string&)>{}, "cudnn-algos");
    } catch (const IoError&) {
      algos_.reset();  // no persistent algorithm cache; algorithms are timed every time
    }
  }

  std::string name() const override { return "cuda"; }
  std::string device_fingerprint() const override { return fingerprint_; }
  int parallelism() const override { return prop_.multiProcessorCount; }
  Layout preferred_layout(DataType compute) const override {
    return graph::is_int8(compute) ? Layout::kNHWC : Layout::kNCHW;
  }

  std::unique_ptr<Buffer> allocate(size_t bytes) override { return std::make_unique<CudaBuffer>(bytes); }
  void upload(void* dst, const void* src, size_t bytes) override {
    STAGECRAFT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }
  void download(void* dst, const void* src, size_t bytes) override {
    STAGECRAFT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }
  std::unique_ptr<Stream> create_stream() override { return std::make_unique<CudaStream>(); }
  std::unique_ptr<Event> create_event() override { return std::make_unique<CudaEvent>(); }

  std::string description() const override {
    return cat("cuda: ", prop_.name, " (sm_", prop_.major, prop_.minor, ", ", prop_.multiProcessorCount,
               " SMs), cuDNN ", cudnnGetVersion(), config_.tf32 ? ", TF32 allowed" : ", f32 strict",
               ", default layout ", graph::to_string(preferred_layout(DataType::kF32)));
  }

  const Capabilities& capabilities() const override { return caps_; }

  Support supports(const KernelSpec& spec) const override {
    const auto no = [](SupportReason reason, std::string message) {
      return Support::unsupported(reason, std::move(message));
    };
    for (const auto* list : {&spec.srcs, &spec.dsts}) {
      for (const TensorDesc& d : *list) {
        if (d.dtype != DataType::kF32 && d.dtype != DataType::kF16 && !graph::is_int8(d.dtype)) {
          return no(SupportReason::kDataType,
                    cat("the CUDA backend runs f32, f16 and quantised u8/i8 tensors (got ",
                        graph::to_string(d.dtype), ")"));
        }
        if (d.shape.rank() == 4 && d.layout != Layout::kNCHW && d.layout != Layout::kNHWC) {
          return no(SupportReason::kLayout, cat("layout ", graph::to_string(d.layout),
                                                " is not available on CUDA (use nchw or nhwc)"));
        }
      }
    }
    if (has_int8(spec)) {
      if (Support s = quantised_support(spec); !s.runnable()) return s;
      if (const std::string why = int8_reason(spec); !why.empty()) {
        return no(SupportReason::kQuantisation, why);
      }
    }
    // Own kernels index every tensor with one geometry: element-wise ops, pooling and batch norm
    // read and write one layout.
    const bool one_layout = spec.kind != OpKind::kConcat && spec.kind != OpKind::kSplit &&
                            spec.kind != OpKind::kSlice && spec.kind != OpKind::kIdentity &&
                            spec.kind != OpKind::kFlatten && spec.kind != OpKind::kLinear &&
                            spec.kind != OpKind::kPad;
    if (one_layout && !spec.dsts.empty()) {
      for (const auto& src : spec.srcs) {
        if (src.shape.rank() == 4 && src.layout != spec.dsts[0].layout) {
          return no(SupportReason::kLayout, "sources and destination must have the same layout");
        }
      }
    }
    if (spec.kind == OpKind::kConv2d) {
      const auto& a = std::get<graph::Conv2dAttrs>(spec.attrs);
      if (a.padding.top != a.padding.bottom || a.padding.left != a.padding.right) {
        return no(SupportReason::kAttributes,
                  "asymmetric convolution padding is not supported by cuDNN's convolution API");
      }
      if (spec.srcs[0].layout != spec.dsts[0].layout) {
        return no(SupportReason::kLayout, "source and destination must have the same layout");
      }
    }
    return weights_support(spec);
  }

  // What this backend adds to the shared int8 contract.
  static std::string int8_reason(const KernelSpec& spec) {
    if (spec.kind == OpKind::kConv2d) {
      const auto& a = std::get<graph::Conv2dAttrs>(spec.attrs);
      if (a.groups != 1) return "grouped int8 convolutions are not supported on CUDA (run them in f32)";
      if (spec.srcs[0].layout != Layout::kNHWC) {
        return "cuDNN's int8 convolutions read nhwc: use --layout nhwc (the default for int8)";
      }
    }
    if (spec.kind == OpKind::kAdd && spec.srcs.size() > static_cast<size_t>(kMaxAddPerLaunch)) {
      return cat("a quantised add of more than ", kMaxAddPerLaunch, " inputs is not supported");
    }
    if (spec.kind == OpKind::kPad && std::get<graph::PadAttrs>(spec.attrs).value != 0) {
      return "quantised padding with a value other than 0 is not supported";
    }
    return "";
  }

  std::unique_ptr<Kernel> create_kernel(const KernelSpec& spec) override {
    if (Support why = supports(spec); !why.runnable()) throw unsupported("cuda", spec, why);
    std::lock_guard<std::mutex> lock(mutex_);
    return build(spec);
  }

  std::unique_ptr<Kernel> create_copy(const TensorDesc& src, const TensorDesc& dst) override {
    const Elem e = elem_of(src.dtype);
    const Dims4 sd = dims_of(src), dd = dims_of(dst);
    if (src.dtype != dst.dtype || real_scale(src) != real_scale(dst)) {
      return converter(src, dst);
    }
    return std::make_unique<FnKernel>(
        "copy", [e, sd, dd](CudaStream& s, const auto& in, const auto& out, void*) {
          cuda::launch_copy_channels(e, in[0].data, sd, 0, out[0].data, dd, 0, sd.c, s.get());
        });
  }

  std::unique_ptr<CapturedWork> capture(Stream& origin, const std::vector<Stream*>& others,
                                        const std::function<void()>& enqueue) override {
    auto& o = static_cast<CudaStream&>(origin);
    STAGECRAFT_CUDA_CHECK(cudaStreamBeginCapture(o.get(), cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    try {
      // Fork: the other streams join the capture through an event of the origin.
      CudaEvent fork;
      origin.record(fork);
      for (Stream* s : others) s->wait(fork);
      enqueue();
      std::vector<std::unique_ptr<CudaEvent>> joins;
      for (Stream* s : others) {
        joins.push_back(std::make_unique<CudaEvent>());
        s->record(*joins.back());
        origin.wait(*joins.back());
      }
      STAGECRAFT_CUDA_CHECK(cudaStreamEndCapture(o.get(), &graph));
    } catch (...) {
      cudaStreamEndCapture(o.get(), &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    STAGECRAFT_CUDA_CHECK(status);
    return std::make_unique<CudaGraphWork>(exec);
  }

  ~CudaBackend() override {
    if (algos_) {
      try {
        algos_->save();
      } catch (...) {
      }
    }
  }

 private:
  // A copy that changes element type or scale (quantise, dequantise, requantise) and maybe layout.
  static std::unique_ptr<Kernel> converter(const TensorDesc& src, const TensorDesc& dst) {
    const Elem se = elem_of(src.dtype), de = elem_of(dst.dtype);
    const Dims4 sd = dims_of(src), dd = dims_of(dst);
    const float factor = real_scale(src) / real_scale(dst);
    return std::make_unique<FnKernel>(
        "convert", [=](CudaStream& s, const auto& in, const auto& out, void*) {
          cuda::launch_convert(se, in[0].data, sd, de, out[0].data, dd, factor, s.get());
        });
  }

  // A quantised linear layer: computed in f32 (dequantised input, f32 weights, cuBLAS), then
  // quantised into an 8-bit output. Linear layers are a sliver of a CNN's work.
  std::unique_ptr<Kernel> int8_linear(const KernelSpec& spec) {
    KernelSpec f32 = spec;
    f32.srcs[0].dtype = DataType::kF32;
    f32.srcs[0].scale = 1.0f;
    f32.dsts[0].dtype = DataType::kF32;
    f32.dsts[0].scale = 1.0f;
    std::shared_ptr<Kernel> gemm(build(f32).release());
    const TensorDesc src = spec.srcs[0], dst = spec.dsts[0];
    const size_t in_bytes = align_bytes(static_cast<size_t>(f32.srcs[0].bytes()));
    const bool quantised_out = graph::is_int8(dst.dtype);
    const size_t out_bytes = quantised_out ? align_bytes(static_cast<size_t>(f32.dsts[0].bytes())) : 0;
    const size_t gemm_ws = gemm->workspace_bytes();
    auto dequantise = converter(src, f32.srcs[0]);
    auto quantise = converter(f32.dsts[0], dst);
    std::shared_ptr<Kernel> deq(dequantise.release()), req(quantise.release());
    return std::make_unique<FnKernel>(
        "dequantise + cublas f32 + quantise",
        [=](CudaStream& s, const std::vector<TensorRef>& srcs, const std::vector<TensorRef>& dsts,
            void* ws) {
          char* base = static_cast<char*>(ws);
          TensorRef x{base, f32.srcs[0]};
          TensorRef y{quantised_out ? base + in_bytes : dsts[0].data, f32.dsts[0]};
          void* gemm_space = base + in_bytes + out_bytes;
          deq->bind({srcs[0]}, {x}, nullptr);
          deq->launch(s);
          gemm->bind({x}, {y}, gemm_space);
          gemm->launch(s);
          if (quantised_out) {
            req->bind({y}, {dsts[0]}, nullptr);
            req->launch(s);
          }
        },
        in_bytes + out_bytes + gemm_ws);
  }

  std::unique_ptr<Kernel> build(const KernelSpec& spec) {
    const Elem e = elem_of(spec.srcs[0].dtype);
    const Dims4 in = dims_of(spec.srcs[0]);
    const Dims4 out = dims_of(spec.dsts[0]);
    using Refs = const std::vector<TensorRef>&;
    switch (spec.kind) {
      case OpKind::kConv2d:
        if (graph::is_int8(spec.srcs[0].dtype)) return std::make_unique<Int8ConvKernel>(spec, *setup_);
        return std::make_unique<ConvKernel>(spec, *setup_, algos_.get(), config_);
      case OpKind::kLinear: {
        if (graph::is_int8(spec.srcs[0].dtype)) return int8_linear(spec);
        const auto& a = std::get<graph::LinearAttrs>(spec.attrs);
        const bool half = e == Elem::kF16;
        DeviceFloats staged(spec.weights->weight);
        auto weights = std::make_shared<CudaBuffer>(spec.weights->weight.size() * (half ? 2 : 4));
        if (half) {
          cuda::launch_float_to_half(staged.get(), weights->data(),
                                     static_cast<int64_t>(spec.weights->weight.size()), setup_->get());
        } else {
          STAGECRAFT_CUDA_CHECK(cudaMemcpyAsync(weights->data(), staged.get(), spec.weights->weight.size() * 4,
                                                cudaMemcpyDeviceToDevice, setup_->get()));
        }
        setup_->synchronize();
        DeviceFloats bias(a.bias ? spec.weights->bias : std::vector<float>{});
        const int m = static_cast<int>(a.out_features), k = static_cast<int>(a.in_features),
                  n = static_cast<int>(spec.srcs[0].shape[0]);
        const Act act = act_of(a.activation);
        const bool tf32 = config_.tf32;
        return std::make_unique<FnKernel>(
            "cublas", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
              const float one = 1.0f, zero = 0.0f;
              // Column-major: Y^T (out × N) = W (out × in, stored row-major = (in × out)^T) · X^T.
              const cudaDataType_t t = half ? CUDA_R_16F : CUDA_R_32F;
              const cublasComputeType_t compute =
                  half || !tf32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
              STAGECRAFT_CUBLAS_CHECK(cublasGemmEx(s.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one,
                                                   weights->data(), t, k, srcs[0].data, t, k, &zero,
                                                   dsts[0].data, t, m, compute, CUBLAS_GEMM_DEFAULT));
              if (bias.get() || act != Act::kNone) {
                Dims4 d;
                d.n = n;
                d.c = m;
                cuda::launch_bias_act(e, dsts[0].data, bias.get(), d, act, s.get());
              }
            });
      }
      case OpKind::kBatchNorm: {
        const auto& w = *spec.weights;
        const double eps = std::get<graph::BatchNormAttrs>(spec.attrs).eps;
        std::vector<float> scale(w.gamma.size()), shift(w.gamma.size());
        for (size_t c = 0; c < scale.size(); ++c) {
          scale[c] = static_cast<float>(w.gamma[c] / std::sqrt(static_cast<double>(w.var[c]) + eps));
          shift[c] = static_cast<float>(w.beta[c] - w.mean[c] * scale[c]);
        }
        DeviceFloats sc(scale), sh(shift);
        return std::make_unique<FnKernel>("own", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
          cuda::launch_scale_shift(e, srcs[0].data, dsts[0].data, sc.get(), sh.get(), in, s.get());
        });
      }
      case OpKind::kRelu:
      case OpKind::kRelu6:
      case OpKind::kSigmoid: {
        const Act act = act_of(graph::activation_of_kind(spec.kind));
        const int64_t n = spec.srcs[0].shape.numel();
        return std::make_unique<FnKernel>("own", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
          cuda::launch_act(e, srcs[0].data, dsts[0].data, n, act, s.get());
        });
      }
      case OpKind::kScale: {
        const float factor = static_cast<float>(std::get<graph::ScaleAttrs>(spec.attrs).factor);
        const int64_t n = spec.srcs[0].shape.numel();
        return std::make_unique<FnKernel>("own", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
          cuda::launch_scale(e, srcs[0].data, dsts[0].data, n, factor, s.get());
        });
      }
      case OpKind::kMaxPool:
      case OpKind::kAvgPool: {
        graph::Hw k, st;
        graph::Pads p;
        cuda::PoolMode mode = cuda::PoolMode::kMax;
        if (spec.kind == OpKind::kMaxPool) {
          const auto& a = std::get<graph::MaxPoolAttrs>(spec.attrs);
          k = a.kernel, st = a.stride, p = a.padding;
        } else {
          const auto& a = std::get<graph::AvgPoolAttrs>(spec.attrs);
          k = a.kernel, st = a.stride, p = a.padding;
          mode = a.count_include_pad ? cuda::PoolMode::kAvgIncludePad : cuda::PoolMode::kAvgExcludePad;
        }
        return std::make_unique<FnKernel>("own", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
          cuda::launch_pool(e, srcs[0].data, dsts[0].data, in, out.h, out.w, static_cast<int>(k.h),
                            static_cast<int>(k.w), static_cast<int>(st.h), static_cast<int>(st.w),
                            static_cast<int>(p.top), static_cast<int>(p.left),
                            static_cast<int>(p.bottom), static_cast<int>(p.right), mode, s.get());
        });
      }
      case OpKind::kGlobalAvgPool:
        return std::make_unique<FnKernel>("own", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
          cuda::launch_global_avg(e, srcs[0].data, dsts[0].data, in, s.get());
        });
      case OpKind::kAdd: {
        const Act act = act_of(std::get<graph::AddAttrs>(spec.attrs).activation);
        const int64_t n = spec.dsts[0].shape.numel();
        if (graph::is_int8(spec.srcs[0].dtype)) {
          // dst = act(sum (src scale / dst scale) · src), in the destination's units.
          std::vector<Elem> elems;
          std::vector<float> factors;
          for (const auto& d : spec.srcs) {
            elems.push_back(elem_of(d.dtype));
            factors.push_back(real_scale(d) / real_scale(spec.dsts[0]));
          }
          const Elem de = elem_of(spec.dsts[0].dtype);
          const float relu6_max = kRelu6Max / real_scale(spec.dsts[0]);
          return std::make_unique<FnKernel>("own int8", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
            std::vector<const void*> ptrs;
            for (const auto& r : srcs) ptrs.push_back(r.data);
            cuda::launch_add_scaled(ptrs.data(), elems.data(), factors.data(),
                                    static_cast<int>(ptrs.size()), de, dsts[0].data, n, act,
                                    relu6_max, s.get());
          });
        }
        return std::make_unique<FnKernel>("own", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
          // Up to 8 inputs per launch; longer sums accumulate into the output.
          std::vector<const void*> ptrs;
          for (const auto& r : srcs) ptrs.push_back(r.data);
          size_t done = 0;
          while (done < ptrs.size()) {
            std::vector<const void*> chunk;
            if (done > 0) chunk.push_back(dsts[0].data);
            while (done < ptrs.size() && static_cast<int>(chunk.size()) < kMaxAddPerLaunch) {
              chunk.push_back(ptrs[done++]);
            }
            cuda::launch_add(e, chunk.data(), static_cast<int>(chunk.size()), dsts[0].data, n,
                             done == ptrs.size() ? act : Act::kNone, s.get());
          }
        });
      }
      case OpKind::kConcat: {
        std::vector<Dims4> parts;
        for (const auto& d : spec.srcs) parts.push_back(dims_of(d));
        return std::make_unique<FnKernel>("own", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
          int64_t c0 = 0;
          for (size_t i = 0; i < parts.size(); ++i) {
            cuda::launch_copy_channels(e, srcs[i].data, parts[i], 0, dsts[0].data, out, c0,
                                       parts[i].c, s.get());
            c0 += parts[i].c;
          }
        });
      }
      case OpKind::kIdentity:
        if (spec.srcs[0].dtype != spec.dsts[0].dtype ||
            real_scale(spec.srcs[0]) != real_scale(spec.dsts[0])) {
          return converter(spec.srcs[0], spec.dsts[0]);
        }
        [[fallthrough]];
      case OpKind::kSplit:
      case OpKind::kSlice: {
        std::vector<Dims4> parts;
        for (const auto& d : spec.dsts) parts.push_back(dims_of(d));
        const int64_t begin =
            spec.kind == OpKind::kSlice ? std::get<graph::SliceAttrs>(spec.attrs).begin : 0;
        return std::make_unique<FnKernel>("own", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
          int64_t c0 = begin;
          for (size_t i = 0; i < parts.size(); ++i) {
            Dims4 view = in;  // read with the source's channel count
            cuda::launch_copy_channels(e, srcs[0].data, view, c0, dsts[i].data, parts[i], 0,
                                       parts[i].c, s.get());
            c0 += parts[i].c;
          }
        });
      }
      case OpKind::kPad: {
        const auto& a = std::get<graph::PadAttrs>(spec.attrs);
        const int top = static_cast<int>(a.pads.top), left = static_cast<int>(a.pads.left);
        const float value = static_cast<float>(a.value);
        return std::make_unique<FnKernel>("own", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
          cuda::launch_pad(e, srcs[0].data, in, dsts[0].data, out, top, left, value, s.get());
        });
      }
      case OpKind::kFlatten: {
        Dims4 plain = in;
        plain.nhwc = false;  // the N×(C·H·W) matrix is the nchw order
        return std::make_unique<FnKernel>("own", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
          cuda::launch_copy_channels(e, srcs[0].data, in, 0, dsts[0].data, plain, 0, in.c, s.get());
        });
      }
      case OpKind::kSoftmax: {
        const int64_t rows = spec.srcs[0].shape[0], cols = spec.srcs[0].shape[1];
        return std::make_unique<FnKernel>("own", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
          cuda::launch_softmax(e, srcs[0].data, dsts[0].data, rows, cols, s.get());
        });
      }
    }
    throw BackendError(cat("cuda cannot run op '", spec.name, "': unhandled kind"));
  }

  BackendConfig config_;
  Capabilities caps_{{DataType::kF32, DataType::kF16, DataType::kU8, DataType::kI8},
                     {Layout::kNCHW, Layout::kNHWC},
                     /*capture=*/true,
                     /*streams_share_cores=*/false};
  cudaDeviceProp prop_{};
  std::unique_ptr<CudaStream> setup_;  // weight uploads and algorithm timing
  std::unique_ptr<ValueCache> algos_;
  std::string fingerprint_;
  std::mutex mutex_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const BackendConfig& config) {
  return std::make_unique<CudaBackend>(config);
}

}  // namespace stagecraft::executor
