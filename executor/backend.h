#pragma once
/// The backend contract. A backend (CPU on oneDNN, CUDA on cuDNN/cuBLAS) offers memory, streams,
/// events and kernels; the execution plan and the profiler use nothing else, so a backend plugs in
/// by implementing these interfaces. Headers here are free of oneDNN and CUDA types.
///
/// Life cycle of a kernel (after XNNPACK/oneDNN): describe (KernelSpec) → ask `supports` (native,
/// reference-only, or unsupported with a reason) → `create_kernel` once (weights packed,
/// algorithm chosen, workspace sized) → `bind` tensors and workspace → `launch` on a stream any
/// number of times (asynchronous).
///
/// Example:
///   auto backend = make_backend("cpu");
///   auto stream = backend->create_stream();
///   KernelSpec spec{.kind = OpKind::kRelu, .srcs = {desc}, .dsts = {desc}, .name = "relu"};
///   if (Support s = backend->supports(spec); !s.runnable()) throw unsupported("cpu", spec, s);
///   auto kernel = backend->create_kernel(spec);
///   kernel->bind({src}, {dst}, workspace);
///   kernel->launch(*stream);
///   stream->synchronize();

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "graph/op.h"
#include "graph/weights.h"

namespace stagecraft::executor {

/// A backend cannot do what was asked: not built, no device, an unsupported op, out of memory.
class BackendError : public Error {
 public:
  using Error::Error;
};

/// How well a backend runs a kernel.
enum class SupportLevel {
  kNative,       ///< an optimised kernel
  kReference,    ///< only a slow reference implementation (correct, often 10-1000x slower)
  kUnsupported,  ///< cannot run it
};

/// Why a kernel is not native, for callers that act on it without parsing the message.
enum class SupportReason {
  kNone,           ///< native
  kReferenceOnly,  ///< the library has only its reference implementation for these descriptors
  kDataType,       ///< an element type the backend does not compute in
  kLayout,         ///< a layout (or mix of layouts) the kernel cannot read or write
  kAttributes,     ///< an attribute value the kernel does not implement
  kWeights,        ///< parameters missing
  kQuantisation,   ///< breaks the int8 contract (graph/quantize.h)
  kLibrary,        ///< the library refused the descriptors
};

/// The answer of Backend::supports(): a level, a reason code and a message for people ("" when
/// native). Like oneDNN's primitive descriptors, "cannot" is an answer, not an error.
struct Support {
  SupportLevel level = SupportLevel::kNative;
  SupportReason reason = SupportReason::kNone;
  std::string message;  ///< what is missing and, where there is one, what to do

  /// An optimised kernel exists.
  static Support native() { return {}; }
  /// Only a reference implementation (`message` names it).
  static Support reference(std::string message) {
    return {SupportLevel::kReference, SupportReason::kReferenceOnly, std::move(message)};
  }
  /// Cannot run, for `reason`.
  static Support unsupported(SupportReason reason, std::string message) {
    return {SupportLevel::kUnsupported, reason, std::move(message)};
  }
  /// Whether an optimised kernel exists.
  bool is_native() const { return level == SupportLevel::kNative; }
  /// Whether the backend can run it at all (natively or by reference).
  bool runnable() const { return level != SupportLevel::kUnsupported; }
};

/// Where a buffer's memory lives.
enum class MemoryKind : uint8_t {
  kDevice,      ///< the backend's own memory (host memory for the CPU backend)
  kPinnedHost,  ///< host memory the device reads and writes directly (CUDA: page-locked)
};

/// What a caller asks of a buffer.
struct BufferRequest {
  size_t bytes = 0;                        ///< size (at least 1 byte is allocated)
  size_t alignment = 64;                   ///< of the start address; a power of two
  MemoryKind kind = MemoryKind::kDevice;   ///< where
};

/// Memory a backend allocated: device memory, or host memory the device can reach.
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

/// The base of a backend's buffers: memory the buffer owns. The backend's constructor allocates it
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

/// A point in a stream's work that other streams can wait for.
class Event {
 public:
  virtual ~Event() = default;
};

/// An in-order queue of work. Launches and event operations return at once — except on a
/// caller stream (runs_on_caller()), which does the work on the enqueuing thread before returning.
class Stream {
 public:
  virtual ~Stream() = default;
  /// Whether work runs on the thread that enqueues it (see Backend::create_caller_stream). Work
  /// for the other streams should then be enqueued before this stream's own.
  virtual bool runs_on_caller() const { return false; }
  /// Marks the point after everything enqueued so far.
  virtual void record(Event& event) = 0;
  /// Makes later work wait for the event's last recorded point (the host does not block).
  virtual void wait(Event& event) = 0;
  /// Blocks the host until everything enqueued so far has finished; rethrows a failure of the
  /// enqueued work as an exception.
  virtual void synchronize() = 0;
  /// Enqueues a host function that runs when the stream reaches it (for tracing; it must be
  /// short and must not enqueue work itself).
  virtual void host_callback(std::function<void()> fn) = 0;
};

/// A dense tensor at an address: a descriptor and where its first element is.
struct TensorRef {
  void* data = nullptr;    ///< first element (device address for device backends)
  graph::TensorDesc desc;  ///< shape, type, layout
};

/// What a kernel computes.
struct KernelSpec {
  graph::OpKind kind = graph::OpKind::kIdentity;  ///< op kind
  graph::OpAttrs attrs;                           ///< attributes of that kind
  std::vector<graph::TensorDesc> srcs;            ///< input descriptors, in slot order
  std::vector<graph::TensorDesc> dsts;            ///< output descriptors
  const graph::OpWeights* weights = nullptr;      ///< parameters (conv, linear, batch norm)
  int threads = 1;                                ///< intra-op threads (CPU); ignored elsewhere
  /// Quantised merged convolutions: the scale of each output channel (the parts keep their own
  /// scales); empty: every channel has dsts[0].scale.
  std::vector<float> dst_channel_scales;
  std::string name;                               ///< for messages and traces
};

/// Work recorded once and replayed as a unit (a CUDA Graph).
class CapturedWork {
 public:
  virtual ~CapturedWork() = default;
  /// Enqueues one replay on `origin` (the stream the capture started on).
  virtual void launch(Stream& origin) = 0;
};

/// One created kernel.
class Kernel {
 public:
  virtual ~Kernel() = default;
  /// Scratch memory the kernel needs while it runs (bytes).
  virtual size_t workspace_bytes() const = 0;
  /// Sets the tensors and the workspace used by later launches.
  virtual void bind(const std::vector<TensorRef>& srcs, const std::vector<TensorRef>& dsts,
                    void* workspace) = 0;
  /// Enqueues one execution on `stream`.
  virtual void launch(Stream& stream) = 0;
  /// The implementation chosen (e.g. "jit:avx512_core").
  virtual std::string implementation() const = 0;
};

/// What a backend can do.
struct Capabilities {
  /// Element types its kernels compute in (kF32 always; kF16; kU8/kI8 for quantised graphs).
  std::vector<graph::DataType> compute_types = {graph::DataType::kF32};
  /// Rank-4 activation layouts its kernels run natively in, fastest first (for f32). The layout
  /// search tries these; the plan falls back to them when a kernel is reference-only.
  std::vector<graph::Layout> layouts;
  /// Whether work can be captured and replayed (CUDA Graphs).
  bool capture = false;
  /// Whether concurrent streams divide one pool of cores (the CPU): a kernel then gets fewer
  /// threads beside other streams, and concurrent stages pay for it.
  bool streams_share_cores = false;

  /// Whether `type` is among compute_types (kU8 and kI8 count as each other).
  bool computes(graph::DataType type) const;
};

/// A backend: memory, streams, events and kernels of one device.
class Backend {
 public:
  virtual ~Backend() = default;
  /// "cpu" or "cuda".
  virtual std::string name() const = 0;
  /// Identifies the device and library versions (part of every profile-cache key).
  virtual std::string device_fingerprint() const = 0;
  /// Hardware threads (CPU) or SMs (GPU) the backend divides among concurrent streams.
  virtual int parallelism() const = 0;
  /// The rank-4 layout kernels computing in `compute` run fastest in (for the plan's
  /// activations); quantised graphs ask with kU8.
  virtual graph::Layout preferred_layout(graph::DataType compute = graph::DataType::kF32) const = 0;
  /// Allocates memory as asked; throws BackendError when it cannot (no room, an alignment or a
  /// kind it cannot give).
  virtual std::unique_ptr<Buffer> allocate_buffer(const BufferRequest& request) = 0;
  /// `bytes` of device memory, 64-byte aligned.
  std::unique_ptr<Buffer> allocate(size_t bytes) { return allocate_buffer(BufferRequest{.bytes = bytes}); }
  /// Copies host memory into the backend's memory (blocking).
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;
  /// Copies the backend's memory to host memory (blocking).
  virtual void download(void* dst, const void* src, size_t bytes) = 0;
  /// A new stream.
  virtual std::unique_ptr<Stream> create_stream() = 0;
  /// A stream whose work runs on the thread that enqueues it, where the backend gains from that
  /// (CPU: no hand-off to a worker thread, and the caller's OpenMP team is the one that runs the
  /// kernels, so that the process holds no more OpenMP workers than cores); others return an
  /// ordinary stream. A plan's stream 0.
  virtual std::unique_ptr<Stream> create_caller_stream() { return create_stream(); }
  /// A new event.
  virtual std::unique_ptr<Event> create_event() = 0;
  /// Whether and how well the backend runs `spec` (see Support).
  virtual Support supports(const KernelSpec& spec) const = 0;
  /// Creates a kernel (a reference one too); throws BackendError (with the reason) when
  /// unsupported.
  virtual std::unique_ptr<Kernel> create_kernel(const KernelSpec& spec) = 0;
  /// Copies a dense tensor between layouts (`src` and `dst` may differ only in layout), enqueued
  /// on `stream`; used for graph inputs/outputs and layout conversions.
  virtual std::unique_ptr<Kernel> create_copy(const graph::TensorDesc& src,
                                              const graph::TensorDesc& dst) = 0;
  /// What the backend can do (asked instead of guessing from its name).
  virtual const Capabilities& capabilities() const = 0;
  /// One line for people: the device, its instruction set or compute capability, the libraries
  /// and the default layout.
  virtual std::string description() const = 0;
  /// Whether capture() can record work (false: it returns nullptr).
  bool can_capture() const { return capabilities().capture; }
  /// Records everything `enqueue` launches on `origin` and `others` (which join the capture
  /// from `origin`) into a replayable unit. Returns nullptr when the backend cannot capture; the
  /// caller then launches directly.
  virtual std::unique_ptr<CapturedWork> capture(Stream& origin, const std::vector<Stream*>& others,
                                                const std::function<void()>& enqueue) {
    (void)origin;
    (void)others;
    (void)enqueue;
    return nullptr;
  }
};

/// Settings of a backend.
/// The CPU backend rejects `tf32` and says once that it ignores `workspace_limit`.
struct BackendConfig {
  std::string cache_dir;                 ///< CUDA: where the algorithm cache goes ("" = the default)
  bool tf32 = false;                     ///< CUDA: allow TF32 tensor-core math for f32
  size_t workspace_limit = 256u << 20;   ///< CUDA: largest convolution workspace considered
  /// CPU: f32 stride-1 3x3, 1xK and Kx1 convolutions by Winograd's algorithm (our AVX2 kernels)
  /// where oneDNN has only direct AVX2 kernels for them and the transformed weights fit the cache;
  /// false: every convolution on oneDNN.
  bool winograd = true;
};

/// The error `create_kernel()` throws for a spec the backend cannot run:
/// "<backend> cannot run op 'name' (kind): reason".
BackendError unsupported(const std::string& backend, const KernelSpec& spec, const Support& why);

/// A row of the backend registry.
struct BackendEntry {
  const char* name;         ///< "cpu", "cuda"
  const char* description;  ///< what it runs on and with
  bool built;               ///< whether this build has it
  /// Opens it; throws BackendError for settings it cannot honour or when it has no device.
  std::unique_ptr<Backend> (*make)(const BackendConfig& config);
};

/// Every backend the code knows, built or not (executor/backends.cpp).
std::span<const BackendEntry> backend_registry();

/// Names of the backends this build has ("cpu", and "cuda" when built with CUDA).
std::vector<std::string> backend_names();

/// The backend `name`; throws BackendError for an unknown name, a backend this build lacks, or a
/// backend without a usable device (with the reason).
std::unique_ptr<Backend> make_backend(const std::string& name, const BackendConfig& config = {});

}  // namespace stagecraft::executor
