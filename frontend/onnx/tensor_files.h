#pragma once
/// Tensor files for exchanging inputs and outputs with other tools: ONNX TensorProto (.pb) and
/// NumPy (.npy, little-endian float32 or float64, C order). Data is float32 in logical order.

#include <string>
#include <vector>

#include "graph/types.h"

namespace stagecraft::graph {

/// A dense float tensor read from or written to a file.
struct TensorFile {
  Shape shape;              ///< dimensions
  std::vector<float> data;  ///< shape.numel() values, C order
};

/// Reads a .pb (TensorProto) or .npy file, by extension; throws IoError/FormatError naming the file.
TensorFile read_tensor_file(const std::string& path);

/// Writes a .pb or .npy file, by extension; throws IoError/FormatError.
void write_tensor_file(const std::string& path, const TensorFile& tensor);

}  // namespace stagecraft::graph
