// The CUDA backend: the device (memory and transfers through the device context,
// device_context.h; its properties), streams, events, CUDA Graph capture, the generic support
// checks and the dispatch to op families (ops.h).
#include "executor/cuda/cuda_backend.h"

#include <algorithm>
#include <iterator>
#include <mutex>

#include "common/strings.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/ops.h"
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

using cuda::CudaEvent;
using cuda::CudaStream;
using cuda::DeviceContext;
using graph::DataType;
using graph::Layout;
using graph::OpKind;
using graph::TensorDesc;

// The GPU: its memory (device memory, and page-locked host memory through allocate_buffer with
// MemoryKind::kPinnedHost) and transfers through the device context, its properties.
class CudaDevice : public Device {
 public:
  explicit CudaDevice(const BackendConfig& config) : context_(DeviceContext::create(0)), tf32_(config.tf32) {
    const cudaDeviceProp& prop = context_->properties();
    int driver = 0, runtime = 0, cublas_version = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    cublasGetVersion(context_->setup().cublas, &cublas_version);
    fingerprint_ = cat("cuda:", prop.name, ":sm", prop.major, prop.minor, ":driver", driver, ":runtime",
                       runtime, ":cudnn", cudnnGetVersion(), ":cublas", cublas_version,
                       config.tf32 ? ":tf32" : ":fp32strict");
  }

  std::string name() const override { return "cuda"; }
  std::string device_fingerprint() const override { return fingerprint_; }
  int parallelism() const override { return context_->properties().multiProcessorCount; }
  // Tensor cores read NHWC: f16 and int8 default to it; f32 (FMA, or TF32 when allowed) to NCHW.
  Layout preferred_layout(DataType compute) const override {
    return compute == DataType::kF32 ? Layout::kNCHW : Layout::kNHWC;
  }
  const Capabilities& capabilities() const override { return caps_; }
  std::string description() const override {
    const cudaDeviceProp& prop = context_->properties();
    return cat("cuda: ", prop.name, " (sm_", prop.major, prop.minor, ", ", prop.multiProcessorCount,
               " SMs), cuDNN ", cudnnGetVersion(), tf32_ ? ", TF32 allowed" : ", f32 strict",
               ", default layout ", graph::to_string(preferred_layout(DataType::kF32)), " (f16, int8: ",
               graph::to_string(preferred_layout(DataType::kF16)), ")");
  }

  std::unique_ptr<Buffer> allocate_buffer(const BufferRequest& request) override {
    return std::make_unique<cuda::CudaBuffer>(*context_, request);
  }
  void upload(void* dst, const void* src, size_t bytes) override { context_->upload(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { context_->download(dst, src, bytes); }

  /// The device-wide state the backend's streams, kernels and captures share.
  const std::shared_ptr<DeviceContext>& context() const { return context_; }

 private:
  std::shared_ptr<DeviceContext> context_;
  bool tf32_;
  std::string fingerprint_;
  Capabilities caps_{{DataType::kF32, DataType::kF16, DataType::kU8, DataType::kI8},
                     {Layout::kNCHW, Layout::kNHWC},
                     /*capture=*/true,
                     /*streams_share_cores=*/false};
};

// The kinds whose CUDA kernels read and write row-major (kRowMajor) tensors of any rank: the
// transformer ops, the activations and the other flat element-wise ones, layer norm and softmax
// over an axis, linear layers over the last axis, broadcasting binary ops, copies, reshapes,
// concatenations and slices along dimension 1, reductions of rank-4 ones. The others
// (convolutions, pooling, batch norm, pad, resize, shuffles) index rank-4 tensors in a CUDA layout.
bool reads_row_major(OpKind kind) {
  static constexpr OpKind kRowMajor[] = {
      OpKind::kMatMul,     OpKind::kTranspose, OpKind::kNarrow,    OpKind::kConcatConstant,
      OpKind::kScale,      OpKind::kAdd,       OpKind::kLayerNorm, OpKind::kSoftmax,
      OpKind::kLinear,     OpKind::kBinary,    OpKind::kIdentity,  OpKind::kFlatten,
      OpKind::kReshape,    OpKind::kConcat,    OpKind::kSplit,     OpKind::kSlice,
      OpKind::kReduceMean, OpKind::kReduceMax, OpKind::kReduceSum,
  };
  return graph::is_activation_kind(kind) ||
         std::ranges::find(kRowMajor, kind) != std::end(kRowMajor);
}

// CUDA descriptions carry no state: the families decide when they build (convolutions time their
// algorithms then), so a desc names neither the implementation nor the workspace.
class CudaBackend : public Backend {
 public:
  explicit CudaBackend(const BackendConfig& config) : device_(config), context_(device_.context()) {
    algos_ = std::make_unique<cuda::AlgorithmCache>(config.cache_dir.empty() ? ValueCache::default_dir()
                                                                             : config.cache_dir);
    build_ = cuda::BuildContext{context_, algos_.get(), device_.device_fingerprint(), config};
  }

  ~CudaBackend() override {
    algos_->save();
    context_->shutdown();
  }

  Device& device() override { return device_; }
  const Device& device() const override { return device_; }

  std::unique_ptr<Stream> create_stream() override { return std::make_unique<CudaStream>(context_); }
  std::unique_ptr<Event> create_event() override { return std::make_unique<CudaEvent>(); }

  KernelDesc describe(const KernelSpec& spec) const override { return check(spec); }

  std::unique_ptr<Kernel> build_kernel(const KernelSpec& spec, const KernelDesc&) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto kernel = cuda::family_of(spec.kind).build(spec, build_);
    DeviceContext::arm_exit_hook();  // libraries may have loaded parts of themselves
    return kernel;
  }

  std::unique_ptr<Kernel> create_copy(const TensorDesc& src, const TensorDesc& dst) override {
    if (src.shape != dst.shape) {
      throw BackendError(cat("cuda: a copy needs equal shapes (", src.describe(), " -> ", dst.describe(), ")"));
    }
    return cuda::make_copy(src, dst);
  }

  std::unique_ptr<CapturedWork> capture(Stream& origin, const std::vector<Stream*>& others,
                                        const std::function<void()>& enqueue) override;

 private:
  // The generic checks (element types, layouts, the int8 contract, weights), then the family's.
  static Support check(const KernelSpec& spec) {
    for (const auto* list : {&spec.srcs, &spec.dsts}) {
      for (const TensorDesc& d : *list) {
        if (d.dtype != DataType::kF32 && d.dtype != DataType::kF16 && !graph::is_int8(d.dtype)) {
          return Support::unsupported(SupportReason::kDataType,
                                      cat("the CUDA backend runs f32, f16 and quantised u8/i8 tensors (got ",
                                          graph::to_string(d.dtype), ")"));
        }
        if (d.layout == Layout::kRowMajor && !reads_row_major(spec.kind)) {
          return Support::unsupported(SupportReason::kLayout,
                                      cat("the CUDA backend has no kernel for ", graph::to_string(spec.kind),
                                          " on row-major tensors (", d.shape.to_string(),
                                          ") yet; the CPU backend runs it"));
        }
        if (graph::takes_layouts(d) && d.layout != Layout::kNCHW && d.layout != Layout::kNHWC) {
          return Support::unsupported(SupportReason::kLayout, cat("layout ", graph::to_string(d.layout),
                                                                  " is not available on CUDA (use nchw or nhwc)"));
        }
      }
    }
    if (has_int8(spec)) {
      if (Support s = quantised_support(spec); !s.runnable()) return s;
    }
    if (Support s = weights_support(spec); !s.runnable()) return s;
    const cuda::OpFamily* family = cuda::find_family(spec.kind);
    if (!family) {
      return Support::unsupported(SupportReason::kAttributes,
                                  cat("the CUDA backend has no kernel for ", graph::to_string(spec.kind),
                                      " yet (the CPU backend runs it)"));
    }
    return family->check(spec);
  }

  CudaDevice device_;
  std::shared_ptr<DeviceContext> context_;  // the device's
  std::unique_ptr<cuda::AlgorithmCache> algos_;
  cuda::BuildContext build_;
  std::mutex mutex_;
};

// Records `enqueue` into a CUDA Graph: the other streams join the capture through an event of the
// origin and are joined back before it ends. Events are made before the capture begins (nothing
// but stream work inside it). Any failure (an op or library call that cannot be captured, an
// invalidated capture, a graph that cannot be instantiated) ends the capture, leaves every stream
// out of capture mode and throws BackendError: the executor then runs the plan in stream mode.
std::unique_ptr<CapturedWork> CudaBackend::capture(Stream& origin, const std::vector<Stream*>& others,
                                                   const std::function<void()>& enqueue) {
  auto& o = static_cast<CudaStream&>(origin);
  CudaEvent fork;
  std::vector<std::unique_ptr<CudaEvent>> joins;
  for (size_t i = 0; i < others.size(); ++i) joins.push_back(std::make_unique<CudaEvent>());
  for (Stream* s : others) s->synchronize();
  origin.synchronize();
  STAGECRAFT_CUDA_CHECK(cudaStreamBeginCapture(o.get(), cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    origin.record(fork);
    for (Stream* s : others) s->wait(fork);
    enqueue();
    for (size_t i = 0; i < others.size(); ++i) {
      others[i]->record(*joins[i]);
      origin.wait(*joins[i]);
    }
    STAGECRAFT_CUDA_CHECK(cudaStreamEndCapture(o.get(), &graph));
  } catch (...) {
    // Join what can still be joined, end the capture, forget the (non-sticky) capture error.
    for (size_t i = 0; i < others.size(); ++i) {
      cudaEventRecord(joins[i]->get(), static_cast<CudaStream*>(others[i])->get());
      cudaStreamWaitEvent(o.get(), joins[i]->get(), 0);
    }
    cudaStreamEndCapture(o.get(), &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    for (Stream* s : others) {
      if (cudaStreamIsCapturing(static_cast<CudaStream*>(s)->get(), &status) != cudaSuccess ||
          status != cudaStreamCaptureStatusNone) {
        cudaGetLastError();
        throw BackendError("cuda: a failed CUDA Graph capture left a stream in capture mode");
      }
    }
    throw;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  STAGECRAFT_CUDA_CHECK(status);
  DeviceContext::arm_exit_hook();
  return std::make_unique<cuda::CudaGraphWork>(context_, exec);
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const BackendConfig& config) {
  return std::make_unique<CudaBackend>(config);
}

}  // namespace stagecraft::executor
