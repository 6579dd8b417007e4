// The CUDA backend's device state: ordered setup transfers, stream handles, captured graphs and
// their release in a defined order (see device_context.h).
#include "executor/cuda/device_context.h"

#include <link.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "common/strings.h"
#include "executor/cuda/cuda_check.h"

namespace stagecraft::executor::cuda {

namespace {

// cuBLAS's recommended workspace per handle (cuBLAS documentation, cublasSetWorkspace): 32 MiB
// on Hopper (sm_90) and newer, 4 MiB before. A fixed workspace keeps cuBLAS from allocating
// while a CUDA Graph is being captured.
constexpr size_t kCublasWorkspaceHopper = size_t{32} << 20;
constexpr size_t kCublasWorkspaceOlder = size_t{4} << 20;
constexpr int kHopperMajor = 9;
// Host transfers go through a pinned staging buffer of at most this size (larger ones in parts).
constexpr size_t kStagingBytes = size_t{32} << 20;

// Contexts alive in this process, for the exit hook. Never destroyed: it must outlive every
// static object that could still hold a backend at exit.
struct Registry {
  std::mutex mutex;
  std::vector<std::weak_ptr<DeviceContext>> live;
  int armed_objects = -1;  // loaded shared objects when the hook was last registered
};
Registry& registry() {
  static auto* r = new Registry;
  return *r;
}
std::atomic<bool> g_exiting{false};

void shutdown_all() {
  g_exiting = true;
  std::vector<std::shared_ptr<DeviceContext>> live;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    for (auto& weak : registry().live)
      if (auto ctx = weak.lock()) live.push_back(std::move(ctx));
  }
  for (auto& ctx : live) ctx->shutdown();
}

int loaded_objects() {
  int count = 0;
  dl_iterate_phdr(
      [](dl_phdr_info*, size_t, void* data) {
        ++*static_cast<int*>(data);
        return 0;
      },
      &count);
  return count;
}

}  // namespace

void DeviceContext::arm_exit_hook() {
  const int objects = loaded_objects();
  std::lock_guard<std::mutex> lock(registry().mutex);
  if (objects == registry().armed_objects) return;
  // Exit handlers run in reverse order of registration: this one runs before the teardown that
  // libraries loaded so far registered.
  if (std::atexit(shutdown_all) == 0) registry().armed_objects = objects;
}

bool DeviceContext::exiting() { return g_exiting; }

std::shared_ptr<DeviceContext> DeviceContext::create(int device) {
  std::shared_ptr<DeviceContext> ctx(new DeviceContext(device));
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    auto& live = registry().live;
    live.erase(std::remove_if(live.begin(), live.end(), [](const auto& w) { return w.expired(); }),
               live.end());
    live.push_back(ctx);
  }
  arm_exit_hook();
  return ctx;
}

DeviceContext::DeviceContext(int device) : device_(device) {
  STAGECRAFT_CUDA_CHECK(cudaSetDevice(device));
  STAGECRAFT_CUDA_CHECK(cudaGetDeviceProperties(&prop_, device));
  cublas_workspace_bytes_ = prop_.major >= kHopperMajor ? kCublasWorkspaceHopper : kCublasWorkspaceOlder;
  StreamHandles* setup = create_stream();
  setup_ = *setup;
  // The setup stream's handles stay in streams_ (destroyed with the others by shutdown()).
}

DeviceContext::~DeviceContext() { shutdown(); }

bool DeviceContext::alive() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return alive_;
}

StreamHandles* DeviceContext::create_stream() {
  auto h = std::make_unique<StreamHandles>();
  try {
    STAGECRAFT_CUDA_CHECK(cudaStreamCreateWithFlags(&h->stream, cudaStreamNonBlocking));
    STAGECRAFT_CUDNN_CHECK(cudnnCreate(&h->cudnn));
    STAGECRAFT_CUDNN_CHECK(cudnnSetStream(h->cudnn, h->stream));
    STAGECRAFT_CUBLAS_CHECK(cublasCreate(&h->cublas));
    // cublasSetStream resets the workspace to cuBLAS's own pool: set the stream first.
    STAGECRAFT_CUBLAS_CHECK(cublasSetStream(h->cublas, h->stream));
    if (cudaMalloc(&h->cublas_workspace, cublas_workspace_bytes_) != cudaSuccess) {
      cudaGetLastError();
      h->cublas_workspace = nullptr;
      throw BackendError(cat("cuda: cannot allocate the ", byte_size(static_cast<double>(cublas_workspace_bytes_)),
                             " cuBLAS workspace of a stream"));
    }
    h->cublas_workspace_bytes = cublas_workspace_bytes_;
    STAGECRAFT_CUBLAS_CHECK(cublasSetWorkspace(h->cublas, h->cublas_workspace, h->cublas_workspace_bytes));
  } catch (...) {
    destroy(*h);
    throw;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!alive_) {
    destroy(*h);
    throw BackendError("cuda: the backend is shut down");
  }
  streams_.push_back(std::move(h));
  return streams_.back().get();
}

void DeviceContext::destroy(StreamHandles& h) {
  if (h.cublas) cublasDestroy(h.cublas);
  if (h.cudnn) cudnnDestroy(h.cudnn);
  if (h.cublas_workspace) cudaFree(h.cublas_workspace);
  if (h.stream) cudaStreamDestroy(h.stream);
  h = StreamHandles{};
}

void DeviceContext::release(StreamHandles* handles) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!alive_) return;
  auto it = std::find_if(streams_.begin(), streams_.end(),
                         [handles](const auto& p) { return p.get() == handles; });
  if (it == streams_.end()) return;
  cudaStreamSynchronize((*it)->stream);
  destroy(**it);
  streams_.erase(it);
}

void DeviceContext::register_graph(cudaGraphExec_t exec) {
  std::lock_guard<std::mutex> lock(mutex_);
  graphs_.push_back(exec);
}

void DeviceContext::release_graph(cudaGraphExec_t exec) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!alive_) return;
  auto it = std::find(graphs_.begin(), graphs_.end(), exec);
  if (it == graphs_.end()) return;
  cudaGraphExecDestroy(exec);
  graphs_.erase(it);
}

void DeviceContext::shutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!alive_) return;
  alive_ = false;
  cudaDeviceSynchronize();
  for (cudaGraphExec_t exec : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
  // Each stream's handles are bound to that stream only, so one stream after another (as
  // release() does while the others live on).
  for (auto& h : streams_) destroy(*h);
  setup_ = StreamHandles{};
  if (pinned_) cudaFreeHost(pinned_);
  pinned_ = nullptr;
  pinned_bytes_ = 0;
  cudaGetLastError();  // errors of a runtime that is itself shutting down are not ours
}

void DeviceContext::upload(void* dst, const void* src, size_t bytes) {
  transfer(dst, src, bytes, cudaMemcpyHostToDevice);
}

void DeviceContext::download(void* dst, const void* src, size_t bytes) {
  transfer(dst, src, bytes, cudaMemcpyDeviceToHost);
}

// Through the pinned staging buffer in parts, each synchronised before the buffer is reused (or,
// without pinned memory, one pageable copy the driver stages; the synchronisation still orders it).
void DeviceContext::transfer(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!alive_) throw BackendError("cuda: the backend is shut down");
  if (!pinned_ && cudaHostAlloc(&pinned_, kStagingBytes, cudaHostAllocDefault) == cudaSuccess) {
    pinned_bytes_ = kStagingBytes;
  }
  cudaGetLastError();
  const auto* from = static_cast<const char*>(src);
  auto* to = static_cast<char*>(dst);
  if (!pinned_) {
    STAGECRAFT_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, kind, setup_.stream));
    STAGECRAFT_CUDA_CHECK(cudaStreamSynchronize(setup_.stream));
    return;
  }
  const bool up = kind == cudaMemcpyHostToDevice;
  for (size_t done = 0; done < bytes; done += pinned_bytes_) {
    const size_t part = std::min(pinned_bytes_, bytes - done);
    if (up) std::memcpy(pinned_, from + done, part);
    STAGECRAFT_CUDA_CHECK(cudaMemcpyAsync(up ? to + done : pinned_, up ? pinned_ : from + done, part,
                                          kind, setup_.stream));
    STAGECRAFT_CUDA_CHECK(cudaStreamSynchronize(setup_.stream));
    if (!up) std::memcpy(to + done, pinned_, part);
  }
}

void DeviceContext::zero(void* dst, size_t bytes) {
  if (!alive()) throw BackendError("cuda: the backend is shut down");
  STAGECRAFT_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, setup_.stream));
  STAGECRAFT_CUDA_CHECK(cudaStreamSynchronize(setup_.stream));
}

// ---- RAII objects -------------------------------------------------------------------------------

// An error freeing (runtime unloading at exit) is not actionable.
namespace {
constexpr size_t kCudaAlignment = 256;  // of cudaMalloc and cudaHostAlloc
}  // namespace

CudaBuffer::CudaBuffer(DeviceContext& ctx, const BufferRequest& request)
    : OwningBuffer(request, kCudaAlignment,
                   request.kind == MemoryKind::kPinnedHost ? +[](void* p) { cudaFreeHost(p); }
                                                           : +[](void* p) { cudaFree(p); }) {
  if (request.alignment == 0 || (request.alignment & (request.alignment - 1)) != 0 ||
      request.alignment > kCudaAlignment) {
    throw BackendError(cat("cuda: cannot align a buffer to ", request.alignment,
                           " bytes (a power of two up to ", kCudaAlignment, ")"));
  }
  const size_t size = std::max<size_t>(request.bytes, 1);
  const bool pinned = request.kind == MemoryKind::kPinnedHost;
  const cudaError_t status =
      pinned ? cudaHostAlloc(&data_, size, cudaHostAllocDefault) : cudaMalloc(&data_, size);
  if (status != cudaSuccess) {
    cudaGetLastError();
    data_ = nullptr;
    throw BackendError(cat("cuda: cannot allocate ", byte_size(static_cast<double>(request.bytes)),
                           pinned ? " of page-locked host memory" : " of GPU memory"));
  }
  if (pinned) {
    std::memset(data_, 0, size);
  } else {
    ctx.zero(data_, size);  // on failure the base's destructor frees the memory
  }
}

CudaEvent::CudaEvent() {
  STAGECRAFT_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
}

CudaEvent::~CudaEvent() {
  if (event_) cudaEventDestroy(event_);
}

CudaStream::CudaStream(std::shared_ptr<DeviceContext> ctx)
    : ctx_(std::move(ctx)), handles_(ctx_->create_stream()) {
  DeviceContext::arm_exit_hook();
}

CudaStream::~CudaStream() { ctx_->release(handles_); }

namespace {
void require_alive(const DeviceContext& ctx) {
  if (!ctx.alive()) throw BackendError("cuda: the backend is shut down");
}
}  // namespace

void CudaStream::record(Event& event) {
  require_alive(*ctx_);
  STAGECRAFT_CUDA_CHECK(cudaEventRecord(static_cast<CudaEvent&>(event).get(), handles_->stream));
}

void CudaStream::wait(Event& event) {
  require_alive(*ctx_);
  STAGECRAFT_CUDA_CHECK(cudaStreamWaitEvent(handles_->stream, static_cast<CudaEvent&>(event).get(), 0));
}

void CudaStream::synchronize() {
  if (!ctx_->alive()) return;  // shut down: nothing runs any more
  STAGECRAFT_CUDA_CHECK(cudaStreamSynchronize(handles_->stream));
}

void CudaStream::host_callback(std::function<void()> fn) {
  require_alive(*ctx_);
  auto* heap = new std::function<void()>(std::move(fn));
  const cudaError_t status = cudaLaunchHostFunc(
      handles_->stream,
      [](void* data) {
        std::unique_ptr<std::function<void()>> f(static_cast<std::function<void()>*>(data));
        (*f)();
      },
      heap);
  if (status != cudaSuccess) delete heap;
  STAGECRAFT_CUDA_CHECK(status);
}

CudaGraphWork::CudaGraphWork(std::shared_ptr<DeviceContext> ctx, cudaGraphExec_t exec)
    : ctx_(std::move(ctx)), exec_(exec) {
  ctx_->register_graph(exec_);
}

CudaGraphWork::~CudaGraphWork() { ctx_->release_graph(exec_); }

void CudaGraphWork::launch(Stream& origin) {
  require_alive(*ctx_);
  STAGECRAFT_CUDA_CHECK(cudaGraphLaunch(exec_, static_cast<CudaStream&>(origin).get()));
}

std::shared_ptr<CudaBuffer> upload_bytes(DeviceContext& ctx, const void* host, size_t bytes) {
  auto buffer = std::make_shared<CudaBuffer>(ctx, BufferRequest{.bytes = bytes});
  if (bytes > 0) ctx.upload(buffer->data(), host, bytes);
  return buffer;
}

DeviceFloats::DeviceFloats(DeviceContext& ctx, const std::vector<float>& host) {
  if (!host.empty()) buffer_ = upload_bytes(ctx, host.data(), host.size() * sizeof(float));
}

}  // namespace stagecraft::executor::cuda
