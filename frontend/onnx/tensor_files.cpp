#include "frontend/onnx/tensor_files.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <sstream>

#include "common/error.h"
#include "common/files.h"
#include "common/strings.h"
#include "graph/errors.h"

namespace stagecraft::graph {

namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicSize = 6;
constexpr size_t kNpyAlignment = 64;

std::string extension(const std::string& path) {
  return std::filesystem::path(path).extension().string();
}

TensorFile read_npy(const std::string& path, const std::string& bytes) {
  auto fail = [&](const std::string& why) -> TensorFile {
    throw FormatError(cat(path, ": not a supported .npy file: ", why));
  };
  if (bytes.size() < 10 || bytes.compare(0, kNpyMagicSize, kNpyMagic, kNpyMagicSize) != 0) {
    return fail("bad magic");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return fail("truncated header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    offset = 12;
  } else {
    return fail(cat("version ", major));
  }
  if (bytes.size() < offset + header_len) return fail("truncated header");
  const std::string header = bytes.substr(offset, header_len);
  const bool f4 = header.find("'descr': '<f4'") != std::string::npos;
  const bool f8 = header.find("'descr': '<f8'") != std::string::npos;
  if (!f4 && !f8) return fail("only little-endian float32/float64 arrays ('<f4', '<f8') are supported");
  if (header.find("'fortran_order': False") == std::string::npos) return fail("Fortran order");
  const auto open = header.find("'shape': (");
  const auto close = header.find(')', open);
  if (open == std::string::npos || close == std::string::npos) return fail("no shape");
  std::vector<int64_t> dims;
  std::stringstream shape(header.substr(open + 10, close - open - 10));
  std::string item;
  while (std::getline(shape, item, ',')) {
    if (item.find_first_not_of(" ") == std::string::npos) continue;
    try {
      dims.push_back(std::stoll(item));
    } catch (...) {
      return fail("bad shape");
    }
  }
  TensorFile t{Shape(dims), {}};
  const size_t count = static_cast<size_t>(t.shape.numel());
  const size_t element = f4 ? 4 : 8;
  const size_t data_offset = offset + header_len;
  if (bytes.size() - data_offset != count * element) {
    return fail(cat("expected ", count * element, " bytes of data, found ", bytes.size() - data_offset));
  }
  t.data.resize(count);
  if (f4) {
    std::memcpy(t.data.data(), bytes.data() + data_offset, count * 4);
  } else {
    for (size_t i = 0; i < count; ++i) {
      double v;
      std::memcpy(&v, bytes.data() + data_offset + i * 8, 8);
      t.data[i] = static_cast<float>(v);
    }
  }
  return t;
}

std::string npy_bytes(const TensorFile& t) {
  std::string shape;
  for (size_t i = 0; i < t.shape.rank(); ++i) shape += cat(t.shape[i], ",", i + 1 < t.shape.rank() ? " " : "");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + shape + "), }";
  const size_t total = kNpyMagicSize + 4 + header.size() + 1;
  header.append((kNpyAlignment - total % kNpyAlignment) % kNpyAlignment, ' ');
  header += '\n';
  std::string out(kNpyMagic, kNpyMagicSize);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * sizeof(float));
  return out;
}

}  // namespace

TensorFile read_tensor_file(const std::string& path) {
  const std::string bytes = read_text_file(path);
  const std::string ext = extension(path);
  if (ext == ".npy") return read_npy(path, bytes);
  if (ext != ".pb") {
    throw FormatError(cat(path, ": unknown tensor file type '", ext, "' (use .pb or .npy)"));
  }
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) throw FormatError(cat(path, ": not an ONNX TensorProto"));
  if (proto.data_type() != onnx::TensorProto::FLOAT) {
    throw FormatError(cat(path, ": only float32 tensors are supported (data_type ", proto.data_type(), ")"));
  }
  TensorFile t{Shape(std::vector<int64_t>(proto.dims().begin(), proto.dims().end())), {}};
  const size_t count = static_cast<size_t>(t.shape.numel());
  if (proto.has_raw_data()) {
    if (proto.raw_data().size() != count * 4) throw FormatError(cat(path, ": data size does not match the shape"));
    t.data.resize(count);
    std::memcpy(t.data.data(), proto.raw_data().data(), count * 4);
  } else {
    t.data.assign(proto.float_data().begin(), proto.float_data().end());
    if (t.data.size() != count) throw FormatError(cat(path, ": data size does not match the shape"));
  }
  return t;
}

void write_tensor_file(const std::string& path, const TensorFile& tensor) {
  const std::string ext = extension(path);
  if (ext == ".npy") {
    write_text_file(path, npy_bytes(tensor));
    return;
  }
  if (ext != ".pb") throw FormatError(cat(path, ": unknown tensor file type '", ext, "' (use .pb or .npy)"));
  onnx::TensorProto proto;
  proto.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : tensor.shape.dims()) proto.add_dims(d);
  proto.set_raw_data(std::string(reinterpret_cast<const char*>(tensor.data.data()), tensor.data.size() * 4));
  std::string bytes;
  proto.SerializeToString(&bytes);
  write_text_file(path, bytes);
}

}  // namespace stagecraft::graph
