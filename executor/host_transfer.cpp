#include "executor/host_transfer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "common/half.h"
#include "common/strings.h"

namespace stagecraft::executor {

namespace {

// Host tensors are f32; f16 and bf16 tensors are converted on the host on the way in and out, 8-bit
// tensors quantised (round to nearest, saturate) and dequantised with their scale.
template <class T>
std::vector<T> quantise_host(std::span<const float> data, float scale) {
  std::vector<T> q(data.size());
  const float lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  for (size_t i = 0; i < q.size(); ++i) {
    q[i] = static_cast<T>(std::clamp(std::nearbyint(data[i] / scale), lo, hi));
  }
  return q;
}

template <class T>
void dequantise_host(Backend& backend, const TensorRef& ref, std::span<float> out) {
  std::vector<T> q(out.size());
  backend.download(q.data(), ref.data, q.size());
  for (size_t i = 0; i < q.size(); ++i) out[i] = static_cast<float>(q[i]) * ref.desc.scale;
}

}  // namespace

void upload_tensor(Backend& backend, const TensorRef& ref, const HostTensor& t) {
  upload_tensor(backend, ref, std::span<const float>(t.data));
}

void upload_tensor(Backend& backend, const TensorRef& ref, std::span<const float> values) {
  if (values.size() != static_cast<size_t>(ref.desc.shape.numel())) {
    throw BackendError(cat("cannot upload ", values.size(), " values into a tensor of shape ",
                           ref.desc.shape.to_string()));
  }
  switch (ref.desc.dtype) {
    case graph::DataType::kU8: {
      const auto q = quantise_host<uint8_t>(values, ref.desc.scale);
      backend.upload(ref.data, q.data(), q.size());
      return;
    }
    case graph::DataType::kI8: {
      const auto q = quantise_host<int8_t>(values, ref.desc.scale);
      backend.upload(ref.data, q.data(), q.size());
      return;
    }
    case graph::DataType::kF32:
      backend.upload(ref.data, values.data(), values.size() * sizeof(float));
      return;
    case graph::DataType::kF16: {
      std::vector<uint16_t> half(values.size());
      for (size_t i = 0; i < half.size(); ++i) half[i] = float_to_half(values[i]);
      backend.upload(ref.data, half.data(), half.size() * sizeof(uint16_t));
      return;
    }
    case graph::DataType::kBF16: {
      std::vector<uint16_t> bf16(values.size());
      for (size_t i = 0; i < bf16.size(); ++i) bf16[i] = float_to_bf16(values[i]);
      backend.upload(ref.data, bf16.data(), bf16.size() * sizeof(uint16_t));
      return;
    }
    default:
      throw BackendError(cat("cannot upload a host tensor into a ",
                             graph::to_string(ref.desc.dtype), " tensor"));
  }
}

void download_tensor(Backend& backend, const TensorRef& ref, std::span<float> out) {
  if (out.size() != static_cast<size_t>(ref.desc.shape.numel())) {
    throw BackendError(cat("cannot download a tensor of shape ", ref.desc.shape.to_string(),
                           " into ", out.size(), " values"));
  }
  switch (ref.desc.dtype) {
    case graph::DataType::kF32:
      backend.download(out.data(), ref.data, out.size() * sizeof(float));
      break;
    case graph::DataType::kF16: {
      std::vector<uint16_t> half(out.size());
      backend.download(half.data(), ref.data, half.size() * sizeof(uint16_t));
      for (size_t i = 0; i < half.size(); ++i) out[i] = half_to_float(half[i]);
      break;
    }
    case graph::DataType::kBF16: {
      std::vector<uint16_t> bf16(out.size());
      backend.download(bf16.data(), ref.data, bf16.size() * sizeof(uint16_t));
      for (size_t i = 0; i < bf16.size(); ++i) out[i] = bf16_to_float(bf16[i]);
      break;
    }
    case graph::DataType::kU8:
      dequantise_host<uint8_t>(backend, ref, out);
      break;
    case graph::DataType::kI8:
      dequantise_host<int8_t>(backend, ref, out);
      break;
    default:
      throw BackendError(cat("cannot download a ", graph::to_string(ref.desc.dtype),
                             " tensor into a host tensor"));
  }
}

HostTensor download_tensor(Backend& backend, const TensorRef& ref) {
  HostTensor t{ref.desc.shape, std::vector<float>(static_cast<size_t>(ref.desc.shape.numel()))};
  download_tensor(backend, ref, std::span<float>(t.data));
  return t;
}

}  // namespace stagecraft::executor
