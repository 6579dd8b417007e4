#include "support/kernels.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

namespace stagecraft::testing {

executor::KernelSpec kernel_spec(graph::OpKind kind, graph::OpAttrs attrs,
                                 std::vector<graph::TensorDesc> srcs,
                                 std::vector<graph::TensorDesc> dsts,
                                 const graph::OpWeights* weights) {
  executor::KernelSpec spec;
  spec.kind = kind;
  spec.attrs = std::move(attrs);
  spec.srcs = std::move(srcs);
  spec.dsts = std::move(dsts);
  spec.weights = weights;
  spec.name = std::string(graph::to_string(kind));
  return spec;
}

std::vector<Bytes> run_kernel(executor::Backend& backend, executor::Kernel& kernel,
                              const executor::KernelSpec& spec, const std::vector<Bytes>& srcs) {
  std::vector<std::unique_ptr<executor::Buffer>> buffers;
  std::vector<executor::TensorRef> in, out;
  for (size_t i = 0; i < srcs.size(); ++i) {
    buffers.push_back(backend.allocate(srcs[i].size()));
    backend.upload(buffers.back()->data(), srcs[i].data(), srcs[i].size());
    in.push_back({buffers.back()->data(), spec.srcs[i]});
  }
  for (const graph::TensorDesc& d : spec.dsts) {
    buffers.push_back(backend.allocate(static_cast<size_t>(d.bytes())));
    out.push_back({buffers.back()->data(), d});
  }
  auto workspace = backend.allocate(std::max<size_t>(1, kernel.workspace_bytes()));
  kernel.bind(in, out, workspace->data());
  auto stream = backend.create_stream();
  kernel.launch(*stream);
  stream->synchronize();
  std::vector<Bytes> result;
  for (const executor::TensorRef& r : out) {
    Bytes b(static_cast<size_t>(r.desc.bytes()));
    backend.download(b.data(), r.data, b.size());
    result.push_back(std::move(b));
  }
  return result;
}

std::vector<float> run_f32_kernel(executor::Backend& backend, const executor::KernelSpec& spec,
                                  const std::vector<std::vector<float>>& srcs) {
  std::vector<Bytes> in;
  for (const std::vector<float>& s : srcs) {
    in.emplace_back(s.size() * sizeof(float));
    std::memcpy(in.back().data(), s.data(), in.back().size());
  }
  const auto kernel = backend.create_kernel(spec);
  const Bytes out = run_kernel(backend, *kernel, spec, in)[0];
  std::vector<float> y(out.size() / sizeof(float));
  std::memcpy(y.data(), out.data(), y.size() * sizeof(float));
  return y;
}

}  // namespace stagecraft::testing
