#pragma once
// The device-wide state of the CUDA backend and the RAII objects built on it. Internal to
// executor/cuda/.
//
// Ordering (issue 16, item 1): the executor's streams are non-blocking, so they do not wait for
// the legacy default stream that plain cudaMemset/cudaMemcpy use, and a pageable cudaMemcpy to
// the device may return before its DMA lands (CUDA Runtime API, "API synchronization behavior").
// Every setup transfer therefore goes through the context: zeroing new buffers, weights, per-run
// inputs and outputs are enqueued on the context's setup stream (inputs and outputs through a
// pinned staging buffer) and the setup stream is synchronised before the call returns, so that
// the data is in place before any later launch on any stream.
//
// Lifetime (item 7): the context owns every stream's library handles (cuDNN, cuBLAS and its
// workspace), the streams and the captured graphs, and shutdown() destroys them in a defined
// order — wait for the device, graphs, cuBLAS handles, cuDNN handles, cuBLAS workspaces, streams,
// pinned memory. The backend calls it from its destructor; an exit hook calls it for a context
// still alive when the process exits, armed again whenever new shared libraries were loaded (cuDNN
// and cuBLAS load parts of themselves lazily and register their own teardown then), so that it
// runs before their teardown. Objects outliving shutdown() (streams, graphs, descriptors held by
// kernels) skip their library calls.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <memory>
#include <mutex>
#include <vector>

#include "executor/backend.h"

namespace stagecraft::executor::cuda {

/// One stream and its library handles.
struct StreamHandles {
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  void* cublas_workspace = nullptr;  ///< fixed workspace (cublasSetWorkspace): capturable GEMMs
  size_t cublas_workspace_bytes = 0;
};

/// Device state shared by a backend and everything it creates.
class DeviceContext {
 public:
  /// A context on `device` (made current), with its setup stream; registers it for the exit hook.
  static std::shared_ptr<DeviceContext> create(int device);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  /// The device's properties.
  const cudaDeviceProp& properties() const { return prop_; }
  /// The setup stream (weight uploads, algorithm searches, transfers).
  StreamHandles& setup() { return setup_; }

  /// A new non-blocking stream with its own cuDNN and cuBLAS handles (cuBLAS with a fixed
  /// workspace); owned by the context until release().
  StreamHandles* create_stream();
  /// Destroys the handles of a stream now (nothing after shutdown()).
  void release(StreamHandles* handles);
  /// Takes a captured graph into the context's care until release_graph().
  void register_graph(cudaGraphExec_t exec);
  /// Destroys a captured graph now (nothing after shutdown()).
  void release_graph(cudaGraphExec_t exec);

  /// Copies host memory to the device; the data is on the device when it returns.
  void upload(void* dst, const void* src, size_t bytes);
  /// Copies device memory to the host after the setup stream's earlier work.
  void download(void* dst, const void* src, size_t bytes);
  /// Zeroes device memory; done when it returns.
  void zero(void* dst, size_t bytes);

  /// Whether shutdown() has not run yet.
  bool alive() const;
  /// Waits for the device, then destroys captured graphs, cuBLAS handles, cuDNN handles, cuBLAS
  /// workspaces, streams and the pinned staging buffer, in that order. Idempotent; errors are
  /// ignored (the runtime may be shutting down).
  void shutdown();

  /// Registers the exit hook again when shared libraries were loaded since it was last registered
  /// (see the file comment). Cheap; called after kernel creation and capture.
  static void arm_exit_hook();
  /// Whether the process is exiting (the exit hook ran): library objects must not be touched.
  static bool exiting();

 private:
  explicit DeviceContext(int device);
  void destroy(StreamHandles& h);
  void transfer(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);

  int device_ = 0;
  cudaDeviceProp prop_{};
  size_t cublas_workspace_bytes_ = 0;
  StreamHandles setup_;
  mutable std::mutex mutex_;  // streams_, graphs_, pinned_, alive_
  std::vector<std::unique_ptr<StreamHandles>> streams_;
  std::vector<cudaGraphExec_t> graphs_;
  void* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
  bool alive_ = true;
};

/// Device memory, zeroed (in order, on the setup stream) when allocated.
class CudaBuffer : public OwningBuffer {
 public:
  /// Allocates request.bytes of device memory (cudaMalloc: 256-byte aligned) or of page-locked
  /// host memory (cudaHostAlloc); throws BackendError when there is no room or the alignment
  /// asked exceeds 256.
  CudaBuffer(DeviceContext& ctx, const BufferRequest& request);
};

/// An event without timing, for cross-stream dependencies.
class CudaEvent : public Event {
 public:
  CudaEvent();
  ~CudaEvent() override;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

/// A non-blocking stream with its cuDNN and cuBLAS handles.
class CudaStream : public Stream {
 public:
  explicit CudaStream(std::shared_ptr<DeviceContext> ctx);
  ~CudaStream() override;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  void record(Event& event) override;
  void wait(Event& event) override;
  void synchronize() override;
  void host_callback(std::function<void()> fn) override;

  cudaStream_t get() const { return handles_->stream; }
  cudnnHandle_t cudnn() const { return handles_->cudnn; }
  cublasHandle_t cublas() const { return handles_->cublas; }

 private:
  std::shared_ptr<DeviceContext> ctx_;
  StreamHandles* handles_;
};

/// A captured run (CUDA Graph), replayed on the stream the capture started on.
class CudaGraphWork : public CapturedWork {
 public:
  CudaGraphWork(std::shared_ptr<DeviceContext> ctx, cudaGraphExec_t exec);
  ~CudaGraphWork() override;
  CudaGraphWork(const CudaGraphWork&) = delete;
  CudaGraphWork& operator=(const CudaGraphWork&) = delete;
  void launch(Stream& origin) override;

 private:
  std::shared_ptr<DeviceContext> ctx_;
  cudaGraphExec_t exec_;
};

/// A device copy of a small float array (bias, scales), uploaded through the context.
class DeviceFloats {
 public:
  DeviceFloats() = default;
  DeviceFloats(DeviceContext& ctx, const std::vector<float>& host);
  const float* get() const { return buffer_ ? static_cast<const float*>(buffer_->data()) : nullptr; }

 private:
  std::shared_ptr<CudaBuffer> buffer_;
};

/// A device copy of host bytes (weights), uploaded through the context.
std::shared_ptr<CudaBuffer> upload_bytes(DeviceContext& ctx, const void* host, size_t bytes);

}  // namespace stagecraft::executor::cuda
