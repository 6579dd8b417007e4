#pragma once
/// The device half of the backend contract (after ggml's ggml_backend_dev beside ggml_backend): what
/// a device is (its name, fingerprint, description, parallelism, capabilities, preferred layouts)
/// and its memory (buffers, blocking uploads and downloads). The work on it — streams, events,
/// kernels, capture — is the Backend's (backend.h), which owns its Device and hands it out with
/// `device()`. Headers here are free of oneDNN and CUDA types.
///
/// Example:
///   auto backend = make_backend("cpu");
///   Device& device = backend->device();
///   std::cout << device.description() << "\n";
///   auto buffer = device.allocate(1024);
///   device.upload(buffer->data(), host.data(), 1024);

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/types.h"

namespace stagecraft::executor {

/// Where a buffer's memory lives.
enum class MemoryKind : uint8_t {
  kDevice,      ///< the device's own memory (host memory for the CPU)
  kPinnedHost,  ///< host memory the device reads and writes directly (CUDA: page-locked)
};

/// What a caller asks of a buffer.
struct BufferRequest {
  size_t bytes = 0;                        ///< size (at least 1 byte is allocated)
  size_t alignment = 64;                   ///< of the start address; a power of two
  MemoryKind kind = MemoryKind::kDevice;   ///< where
};

/// Memory a device allocated: device memory, or host memory the device can reach.
class Buffer {
 public:
  virtual ~Buffer() = default;
  /// Start of the memory (device address for device memory).
  virtual void* data() = 0;
  /// Size in bytes.
  virtual size_t bytes() const = 0;
  /// Alignment of data() (at least what was asked).
  virtual size_t alignment() const = 0;
  /// Where it lives.
  virtual MemoryKind kind() const = 0;
};

/// The base of a device's buffers: memory the buffer owns. The device's constructor allocates it
/// into `data_`; the destructor hands it back with `release` (when it was allocated), also when
/// that constructor throws after allocating.
class OwningBuffer : public Buffer {
 public:
  ~OwningBuffer() override {
    if (data_ != nullptr) release_(data_);
  }
  OwningBuffer(const OwningBuffer&) = delete;
  OwningBuffer& operator=(const OwningBuffer&) = delete;
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }
  size_t alignment() const override { return alignment_; }
  MemoryKind kind() const override { return kind_; }

 protected:
  OwningBuffer(const BufferRequest& request, size_t alignment, void (*release)(void*))
      : bytes_(request.bytes), alignment_(alignment), kind_(request.kind), release_(release) {}

  void* data_ = nullptr;

 private:
  size_t bytes_;
  size_t alignment_;
  MemoryKind kind_;
  void (*release_)(void*);
};

/// What a device (and the backend working on it) can do.
struct Capabilities {
  /// Element types its kernels compute in (kF32 always; kF16; kBF16; kU8/kI8 for quantised graphs).
  std::vector<graph::DataType> compute_types = {graph::DataType::kF32};
  /// Rank-4 activation layouts its kernels run natively in, fastest first (for f32). The layout
  /// search tries these; the plan falls back to them when a kernel is reference-only.
  std::vector<graph::Layout> layouts;
  /// Whether work can be captured and replayed (CUDA Graphs).
  bool capture = false;
  /// Whether concurrent streams divide one pool of cores (the CPU): a kernel then gets fewer
  /// threads beside other streams, and concurrent stages pay for it.
  bool streams_share_cores = false;
  /// Whether an 8-bit convolution takes an 8-bit residual (graph::fuse_residual_adds with
  /// `quantised`): the pipeline fuses quantised additions into convolutions for such a backend.
  bool quantised_residuals = false;

  /// Whether `type` is among compute_types (kU8 and kI8 count as each other).
  bool computes(graph::DataType type) const;
};

/// One device: its properties and its memory.
class Device {
 public:
  virtual ~Device() = default;
  /// "cpu" or "cuda" (the name of the backend that works on it).
  virtual std::string name() const = 0;
  /// Identifies the device and library versions (part of every profile-cache key).
  virtual std::string device_fingerprint() const = 0;
  /// One line for people: the device, its instruction set or compute capability, the libraries
  /// and the default layout.
  virtual std::string description() const = 0;
  /// Hardware threads (CPU) or SMs (GPU) divided among concurrent streams.
  virtual int parallelism() const = 0;
  /// What the device can do (asked instead of guessing from its name).
  virtual const Capabilities& capabilities() const = 0;
  /// The rank-4 layout kernels computing in `compute` run fastest in (for the plan's
  /// activations); quantised graphs ask with kU8.
  virtual graph::Layout preferred_layout(graph::DataType compute = graph::DataType::kF32) const = 0;
  /// Allocates memory as asked (device memory, or pinned host memory the device reaches
  /// directly); throws BackendError when it cannot (no room, an alignment or a kind it cannot
  /// give).
  virtual std::unique_ptr<Buffer> allocate_buffer(const BufferRequest& request) = 0;
  /// Copies host memory into the device's memory (blocking).
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;
  /// Copies the device's memory to host memory (blocking).
  virtual void download(void* dst, const void* src, size_t bytes) = 0;

  /// `bytes` of device memory, 64-byte aligned.
  std::unique_ptr<Buffer> allocate(size_t bytes) { return allocate_buffer(BufferRequest{.bytes = bytes}); }
};

}  // namespace stagecraft::executor
