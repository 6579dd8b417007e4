#include "frontend/onnx/onnx_constants.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>
#include <type_traits>

#include "common/enum_table.h"
#include "common/files.h"
#include "common/half.h"
#include "common/strings.h"

namespace stagecraft::graph::onnx_import {

namespace {

using onnx::TensorProto;

// FLOAT tensors with more elements than this are kept as floats (ConstTensor::f32).
constexpr int64_t kDecodedFloats = 64;


template <class T>
void read_raw(const std::string& raw, std::vector<double>& out) {
  const size_t n = raw.size() / sizeof(T);
  out.resize(n);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
    out[i] = static_cast<double>(v);
  }
}

// The typed field that holds the elements whose raw bytes are T: ONNX keeps the 8- to 32-bit
// integers (and FLOAT16's bits) in int32_data, UINT32 and UINT64 in uint64_data.
template <class T>
const auto& typed_field(const TensorProto& p) {
  if constexpr (std::is_same_v<T, float>) {
    return p.float_data();
  } else if constexpr (std::is_same_v<T, double>) {
    return p.double_data();
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return p.int64_data();
  } else if constexpr (std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t>) {
    return p.uint64_data();
  } else {
    return p.int32_data();
  }
}

// The values of `p`, an element type whose raw bytes are T: from the raw bytes where it has them,
// else from the typed field.
template <class T>
std::vector<double> stored_values(const TensorProto& p) {
  std::vector<double> out;
  if (p.has_raw_data()) {
    read_raw<T>(p.raw_data(), out);
  } else {
    const auto& field = typed_field<T>(p);
    out.assign(field.begin(), field.end());
  }
  return out;
}

std::vector<double> half_values(const TensorProto& p) {
  std::vector<double> out;
  for (double b : stored_values<uint16_t>(p))
    out.push_back(half_to_float(static_cast<uint16_t>(b)));
  return out;
}

// The reader of each supported element type.
constexpr Mapped<int32_t, std::vector<double> (*)(const TensorProto&)> kValueReaders[] = {
    {TensorProto::FLOAT, stored_values<float>},
    {TensorProto::DOUBLE, stored_values<double>},
    {TensorProto::FLOAT16, half_values},
    {TensorProto::INT64, stored_values<int64_t>},
    {TensorProto::INT32, stored_values<int32_t>},
    {TensorProto::INT16, stored_values<int16_t>},
    {TensorProto::UINT16, stored_values<uint16_t>},
    {TensorProto::INT8, stored_values<int8_t>},
    {TensorProto::UINT8, stored_values<uint8_t>},
    {TensorProto::BOOL, stored_values<uint8_t>},
    {TensorProto::UINT32, stored_values<uint32_t>},
    {TensorProto::UINT64, stored_values<uint64_t>},
};

}  // namespace

ElemKind kind_of(int32_t onnx_type) {
  using onnx::TensorProto;
  switch (onnx_type) {
    case TensorProto::FLOAT:
    case TensorProto::DOUBLE:
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
      return ElemKind::kFloat;
    case TensorProto::BOOL:
      return ElemKind::kBool;
    default:
      return ElemKind::kInt;
  }
}

int64_t product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

int64_t ConstTensor::numel() const { return product(dims); }

void ConstTensor::decode() {
  if (values.empty() && !f32.empty()) values.assign(f32.begin(), f32.end());
}

std::vector<int64_t> ConstTensor::ints() const {
  // INT64_MAX ("to the end" in Slice) is not exact in a double: saturate instead of overflowing.
  constexpr double kLimit = 9.2e18;
  if (values.empty() && !f32.empty()) {
    ConstTensor decoded = *this;
    decoded.decode();
    return decoded.ints();
  }
  std::vector<int64_t> out;
  out.reserve(values.size());
  for (double v : values) {
    out.push_back(v >= kLimit    ? std::numeric_limits<int64_t>::max()
                  : v <= -kLimit ? std::numeric_limits<int64_t>::min()
                                 : static_cast<int64_t>(v));
  }
  return out;
}

std::vector<float> ConstTensor::floats() const {
  if (values.empty() && !f32.empty()) return f32;
  return std::vector<float>(values.begin(), values.end());
}

ConstTensor ConstTensor::of_ints(std::vector<int64_t> v, std::vector<int64_t> dims) {
  ConstTensor t;
  t.kind = ElemKind::kInt;
  t.onnx_type = TensorProto::INT64;
  t.dims = std::move(dims);
  t.values.assign(v.begin(), v.end());
  return t;
}

ConstTensor ConstTensor::of_floats(std::vector<float> v, std::vector<int64_t> dims) {
  ConstTensor t;
  t.dims = std::move(dims);
  t.values.assign(v.begin(), v.end());
  return t;
}

std::optional<std::string> ExternalData::read(const TensorProto& t, std::string* why) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& entry : t.external_data()) {
    if (entry.key() == "location") location = entry.value();
    if (entry.key() == "offset") offset = std::stoll(entry.value());
    if (entry.key() == "length") length = std::stoll(entry.value());
  }
  if (location.empty()) {
    *why = "its external data has no location";
    return std::nullopt;
  }
  if (dir_.empty()) {
    *why = cat("its data is in the external file '", location, "', and the model was not read from a file");
    return std::nullopt;
  }
  if (location.find("..") != std::string::npos || (!location.empty() && location[0] == '/')) {
    *why = cat("its external data location '", location, "' is outside the model's folder");
    return std::nullopt;
  }
  auto it = files_.find(location);
  if (it == files_.end()) {
    const std::string path = dir_ + "/" + location;
    try {
      it = files_.emplace(location, read_text_file(path)).first;
    } catch (const std::exception& e) {
      *why = cat("its external data cannot be read: ", e.what());
      return std::nullopt;
    }
  }
  const std::string& data = it->second;
  if (offset < 0 || offset > static_cast<int64_t>(data.size())) {
    *why = cat("its external data offset ", offset, " is past the end of '", location, "'");
    return std::nullopt;
  }
  if (length < 0) length = static_cast<int64_t>(data.size()) - offset;
  if (offset + length > static_cast<int64_t>(data.size())) {
    *why = cat("its external data [", offset, ", +", length, ") is past the end of '", location, "'");
    return std::nullopt;
  }
  return data.substr(static_cast<size_t>(offset), static_cast<size_t>(length));
}

std::optional<ConstTensor> from_proto(const TensorProto& proto, std::string* why, ExternalData* external) {
  const TensorProto* source = &proto;
  TensorProto loaded;
  if (proto.data_location() == TensorProto::EXTERNAL) {
    if (!external) {
      *why = "its data is stored in an external file";
      return std::nullopt;
    }
    const auto bytes = external->read(proto, why);
    if (!bytes) return std::nullopt;
    loaded = proto;
    loaded.clear_external_data();
    loaded.set_data_location(TensorProto::DEFAULT);
    loaded.set_raw_data(*bytes);
    source = &loaded;
  }
  const TensorProto& p = *source;
  ConstTensor t;
  t.onnx_type = p.data_type();
  t.kind = kind_of(p.data_type());
  t.dims.assign(p.dims().begin(), p.dims().end());
  const int64_t n = t.numel();
  if (p.data_type() == TensorProto::FLOAT && n > kDecodedFloats) {
    if (p.has_raw_data()) {
      const std::string& raw = p.raw_data();
      t.f32.resize(raw.size() / sizeof(float));
      std::memcpy(t.f32.data(), raw.data(), t.f32.size() * sizeof(float));
    } else {
      t.f32.assign(p.float_data().begin(), p.float_data().end());
    }
    if (static_cast<int64_t>(t.f32.size()) != n) {
      *why = cat("it holds ", t.f32.size(), " values for shape [", join(t.dims, ", "), "]");
      return std::nullopt;
    }
    return t;
  }
  const auto* reader = entry_for(kValueReaders, p.data_type());
  if (reader == nullptr) {
    *why = cat("element type ", p.data_type(), " is not supported");
    return std::nullopt;
  }
  t.values = reader->mapped(p);
  if (static_cast<int64_t>(t.values.size()) != n) {
    *why = cat("it holds ", t.values.size(), " values for shape [", join(t.dims, ", "), "]");
    return std::nullopt;
  }
  return t;
}

std::optional<std::vector<int64_t>> broadcast(const std::vector<int64_t>& a,
                                              const std::vector<int64_t>& b) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

const onnx::AttributeProto* attribute(const onnx::NodeProto& node, const char* name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t attr_int(const onnx::NodeProto& node, const char* name, int64_t fallback) {
  const auto* a = attribute(node, name);
  return a ? a->i() : fallback;
}

float attr_float(const onnx::NodeProto& node, const char* name, float fallback) {
  const auto* a = attribute(node, name);
  return a ? a->f() : fallback;
}

std::vector<int64_t> attr_ints(const onnx::NodeProto& node, const char* name) {
  const auto* a = attribute(node, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
}

std::string attr_string(const onnx::NodeProto& node, const char* name) {
  const auto* a = attribute(node, name);
  return a ? a->s() : std::string();
}

std::vector<float> attr_floats(const onnx::NodeProto& node, const char* name) {
  const auto* a = attribute(node, name);
  return a ? std::vector<float>(a->floats().begin(), a->floats().end()) : std::vector<float>{};
}

std::vector<std::string> attr_strings(const onnx::NodeProto& node, const char* name) {
  const auto* a = attribute(node, name);
  return a ? std::vector<std::string>(a->strings().begin(), a->strings().end()) : std::vector<std::string>{};
}

}  // namespace stagecraft::graph::onnx_import
