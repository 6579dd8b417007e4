#pragma once
// A small ONNX model that ends in a data-dependent tail (frontend/onnx/onnx_tail.h), written to a
// file for the serving tests: x [1, 4, 6] -> z = Relu(x) [1, 4, 6], and
// y = Unsqueeze(NonZero(Gather(z, 0) > 0.5), 0): the coordinates of the elements of the sample
// above 0.5, int64 [1, 2, count] (the count is the data's). With `batch_first` false, y is
// NonZero's own [2, count] (its first dimension is not the batch).
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

namespace stagecraft::testing {

inline void add_tail_node(onnx::GraphProto* g, const std::string& type, std::initializer_list<const char*> inputs,
                          const std::string& output) {
  auto* n = g->add_node();
  n->set_op_type(type);
  n->set_name(output);
  for (const char* in : inputs) n->add_input(in);
  n->add_output(output);
}

inline void add_tail_constant(onnx::GraphProto* g, const std::string& name, int32_t type,
                              const std::vector<int64_t>& dims, float value) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  if (type == onnx::TensorProto::FLOAT) {
    t->add_float_data(value);
  } else {
    t->add_int64_data(static_cast<int64_t>(value));
  }
}

inline void declare_tail_value(onnx::ValueInfoProto* v, const std::string& name, int32_t type,
                               const std::vector<int64_t>& dims) {
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(type);
  auto* shape = v->mutable_type()->mutable_tensor_type()->mutable_shape();
  for (int64_t d : dims) {
    if (d < 0) {
      shape->add_dim()->set_dim_param("count");
    } else {
      shape->add_dim()->set_dim_value(d);
    }
  }
}

/// Writes the model of the file comment to `path`.
inline void write_tail_model(const std::string& path, bool batch_first = true) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  auto* g = model.mutable_graph();
  g->set_name("tail");
  declare_tail_value(g->add_input(), "x", onnx::TensorProto::FLOAT, {1, 4, 6});
  add_tail_constant(g, "first", onnx::TensorProto::INT64, {}, 0);
  add_tail_constant(g, "half", onnx::TensorProto::FLOAT, {}, 0.5f);
  add_tail_constant(g, "axis0", onnx::TensorProto::INT64, {1}, 0);
  add_tail_node(g, "Relu", {"x"}, "z");
  add_tail_node(g, "Gather", {"z", "first"}, "sample");
  add_tail_node(g, "Greater", {"sample", "half"}, "mask");
  add_tail_node(g, "NonZero", {"mask"}, batch_first ? "nz" : "y");
  if (batch_first) add_tail_node(g, "Unsqueeze", {"nz", "axis0"}, "y");
  declare_tail_value(g->add_output(), "y", onnx::TensorProto::INT64,
                     batch_first ? std::vector<int64_t>{1, 2, -1} : std::vector<int64_t>{2, -1});
  declare_tail_value(g->add_output(), "z", onnx::TensorProto::FLOAT, {1, 4, 6});
  std::ofstream(path, std::ios::binary) << model.SerializeAsString();
}

/// The coordinates (row-major, as NonZero gives them: all rows, then all columns) of the elements
/// of one sample x [4, 6] whose Relu is above 0.5.
inline std::vector<float> tail_coordinates(const float* x) {
  std::vector<float> rows, cols;
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 6; ++c) {
      if (x[r * 6 + c] > 0.5f) {
        rows.push_back(static_cast<float>(r));
        cols.push_back(static_cast<float>(c));
      }
    }
  }
  rows.insert(rows.end(), cols.begin(), cols.end());
  return rows;
}

}  // namespace stagecraft::testing
