#pragma once
/// The backend contract. A Device (device.h) is what the hardware is and its memory; a Backend
/// works on one device: streams, events, kernels and capture. The execution plan and the profiler
/// use nothing else, so a backend plugs in by implementing these interfaces. Headers here are
/// free of oneDNN and CUDA types.
///
/// Life cycle of a kernel (after oneDNN's primitive descriptor and primitive): describe the op
/// (KernelSpec) → `supports(spec)` answers with a KernelDesc (native, reference-only, or
/// unsupported with a reason; the implementation, workspace and layouts where known; what the
/// backend worked out deciding that) → `create_kernel(spec, desc)` once (weights packed, from the
/// desc's choices without redoing them) → `bind` tensors and workspace → `launch` on a stream any
/// number of times (asynchronous).
///
/// Example:
///   auto backend = make_backend("cpu");
///   auto stream = backend->create_stream();
///   KernelSpec spec{.kind = OpKind::kRelu, .srcs = {desc}, .dsts = {desc}, .name = "relu"};
///   KernelDesc d = backend->supports(spec);
///   if (!d.runnable()) return;                      // d.support.message says why
///   auto kernel = backend->create_kernel(spec, d);  // d.implementation == kernel->implementation()
///   kernel->bind({src}, {dst}, workspace);
///   kernel->launch(*stream);
///   stream->synchronize();

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "executor/device.h"
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

/// How well a backend runs a kernel (KernelDesc::support, the core of what supports() answers):
/// a level, a reason code and a message for people ("" when native). Like oneDNN's primitive
/// descriptors, "cannot" is an answer, not an error.
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

/// The answer of Backend::supports(), after oneDNN's primitive descriptor: whether and how the
/// backend runs a KernelSpec, what it can tell before building (the implementation, the workspace,
/// the layouts), and what it worked out deciding that (`state`), which create_kernel(spec, desc)
/// builds from instead of working it out again. Cheap to copy (the state is shared and never
/// changes). Made by one backend for one spec: give it back to that backend with that spec.
struct KernelDesc {
  /// What a backend worked out for its kernel (a library's descriptors, the algorithm or the
  /// attributes chosen); private to the backend that made it, which reads it back with state_as.
  class State {
   public:
    virtual ~State() = default;
  };
  /// workspace_bytes when the backend knows it only once the kernel is created.
  static constexpr size_t kUnknownWorkspace = SIZE_MAX;

  KernelDesc() = default;
  /// A description that says only how well (an unsupported spec's, or one the backend works out
  /// when it creates the kernel); implicit, so that a check can answer `return Support::...`.
  KernelDesc(Support s) : support(std::move(s)) {}  // NOLINT(google-explicit-constructor)

  Support support;  ///< native, reference-only, or unsupported with the reason
  /// The implementation the kernel will have (Kernel::implementation(), e.g. "jit:avx512_core",
  /// "winograd F(4x4,3x3) (ours)"); "" when unsupported or decided only at creation (see the
  /// backend's README).
  std::string implementation;
  /// Scratch bytes the kernel will need (Kernel::workspace_bytes()), or kUnknownWorkspace.
  size_t workspace_bytes = kUnknownWorkspace;
  /// The layouts of the tensors the kernel reads and writes: the sources, then the destinations.
  std::vector<graph::Layout> layouts;
  /// Multiply-adds per output element the kernel does beyond the op's own: 0, or more where it
  /// computes zeros too (a grouped convolution run as fewer, larger groups with block-diagonal
  /// weights, so that its groups fill whole channel blocks). The layout pass moves such an op to a
  /// layout where it is 0 when that saves more than the conversions cost.
  double extra_macs_per_output = 0.0;
  /// What the backend worked out (null: nothing to carry).
  std::shared_ptr<const State> state;

  /// Whether an optimised kernel exists.
  bool is_native() const { return support.is_native(); }
  /// Whether the backend can run it at all (natively or by reference).
  bool runnable() const { return support.runnable(); }
  /// Whether workspace_bytes is known.
  bool knows_workspace() const { return workspace_bytes != kUnknownWorkspace; }
  /// The state as the backend's type `T`; nullptr when there is none or it is of another type.
  template <class T>
  const T* state_as() const {
    return dynamic_cast<const T*>(state.get());
  }
};

/// `desc` with its layouts set to those of `spec`'s sources, then its destinations (what a
/// backend's supports() answers).
KernelDesc with_layouts(KernelDesc desc, const KernelSpec& spec);

/// A backend: streams, events, kernels and capture on one device (device.h). The properties and
/// the memory are the device's; the most used are forwarded here.
class Backend {
 public:
  virtual ~Backend() = default;
  /// The device the backend works on.
  virtual Device& device() = 0;
  /// The device the backend works on.
  virtual const Device& device() const = 0;

  /// "cpu" or "cuda" (the device's name).
  std::string name() const { return device().name(); }
  /// What the device can do.
  const Capabilities& capabilities() const { return device().capabilities(); }
  /// The device's layout for kernels computing in `compute` (Device::preferred_layout).
  graph::Layout preferred_layout(graph::DataType compute = graph::DataType::kF32) const {
    return device().preferred_layout(compute);
  }
  /// Device memory as asked (Device::allocate_buffer).
  std::unique_ptr<Buffer> allocate_buffer(const BufferRequest& request) {
    return device().allocate_buffer(request);
  }
  /// `bytes` of device memory, 64-byte aligned.
  std::unique_ptr<Buffer> allocate(size_t bytes) { return device().allocate(bytes); }
  /// Copies host memory into the device's memory (blocking).
  void upload(void* dst, const void* src, size_t bytes) { device().upload(dst, src, bytes); }
  /// Copies the device's memory to host memory (blocking).
  void download(void* dst, const void* src, size_t bytes) { device().download(dst, src, bytes); }

  /// A new stream.
  virtual std::unique_ptr<Stream> create_stream() = 0;
  /// A stream whose work runs on the thread that enqueues it, where the backend gains from that
  /// (CPU: no hand-off to a worker thread, and the caller's OpenMP team is the one that runs the
  /// kernels, so that the process holds no more OpenMP workers than cores); others return an
  /// ordinary stream. A plan's stream 0.
  virtual std::unique_ptr<Stream> create_caller_stream() { return create_stream(); }
  /// A new event.
  virtual std::unique_ptr<Event> create_event() = 0;
  /// Whether and how well the backend runs `spec`, and what it worked out deciding that (see
  /// KernelDesc): the backend's describe(spec), with the spec's layouts. "Cannot" is an answer,
  /// not an error.
  KernelDesc supports(const KernelSpec& spec) const { return with_layouts(describe(spec), spec); }
  /// Creates the kernel `desc` describes (a reference one too), `desc` coming from supports(spec)
  /// of this backend: what the desc holds is not worked out again (the backend's build_kernel).
  /// Throws BackendError (with the reason) when the desc is unsupported.
  std::unique_ptr<Kernel> create_kernel(const KernelSpec& spec, const KernelDesc& desc);
  /// create_kernel(spec, supports(spec)); throws BackendError (with the reason) when unsupported.
  std::unique_ptr<Kernel> create_kernel(const KernelSpec& spec);
  /// Copies a dense tensor between layouts (`src` and `dst` may differ only in layout), enqueued
  /// on `stream`; used for graph inputs/outputs and layout conversions.
  virtual std::unique_ptr<Kernel> create_copy(const graph::TensorDesc& src,
                                              const graph::TensorDesc& dst) = 0;
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

 protected:
  /// The backend's answer for `spec` (supports() adds the layouts).
  virtual KernelDesc describe(const KernelSpec& spec) const = 0;
  /// Builds the kernel of `desc`, which create_kernel found runnable.
  virtual std::unique_ptr<Kernel> build_kernel(const KernelSpec& spec, const KernelDesc& desc) = 0;
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
  /// CPU: Winograd's larger tiles, F(4x4,3x3) and F(m,K) up to 10 points: up to 1.2x faster than
  /// the default tiles on 3x3-heavy networks, but each such layer rounds 5-20x more than a direct
  /// kernel (timm inception_v4: 2.4e-3 relative to ONNX Runtime instead of 8e-4). Default (false):
  /// F(2x2,3x3) and F(2,K), whose error stays near a direct kernel's.
  bool fast_winograd = false;
  /// CPU: Winograd or direct, and on AMX oneDNN's AMX kernel or its next candidate, timed once
  /// per convolution signature on this machine, the verdict kept in the cache directory
  /// (executor/cpu/kernel_choices.h); false: Winograd by the FMA-width rule (ours against AVX2
  /// kernels and where 512-bit FMAs do no more than 256-bit ones) and oneDNN's own first choice,
  /// the same on every run.
  bool measure_kernels = true;
};

/// The error `create_kernel()` throws for a spec (or a desc) the backend cannot run:
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
