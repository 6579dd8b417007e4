#include "graph/types.h"

#include <cassert>

#include "common/enum_table.h"
#include "common/strings.h"

namespace stagecraft::graph {

namespace {

struct DataTypeInfo {
  DataType value;
  std::string_view name;
  int64_t size;
};

constexpr DataTypeInfo kDataTypes[] = {
#define STAGECRAFT_X(value, name, size) {DataType::value, name, size},
    STAGECRAFT_DATA_TYPES(STAGECRAFT_X)
#undef STAGECRAFT_X
};

struct LayoutInfo {
  Layout value;
  std::string_view name;
  int rank;
  int64_t block;
};

constexpr LayoutInfo kLayouts[] = {
#define STAGECRAFT_X(value, name, rank, block) {Layout::value, name, rank, block},
    STAGECRAFT_LAYOUTS(STAGECRAFT_X)
#undef STAGECRAFT_X
};

}  // namespace

std::string_view to_string(DataType type) { return kDataTypes[static_cast<int>(type)].name; }
int64_t size_of(DataType type) { return kDataTypes[static_cast<int>(type)].size; }

std::optional<DataType> parse_data_type(std::string_view name) {
  return value_named(kDataTypes, name);
}

std::vector<std::string> data_type_names() { return names_of(kDataTypes); }

std::string_view to_string(Layout layout) { return kLayouts[static_cast<int>(layout)].name; }
int layout_rank(Layout layout) { return kLayouts[static_cast<int>(layout)].rank; }
bool layout_fits(Layout layout, size_t rank) {
  const int r = layout_rank(layout);
  return r >= 0 ? r == static_cast<int>(rank) : rank >= 1 && rank != 2;
}
Layout row_major_layout(size_t rank) { return rank == 2 ? Layout::kNC : Layout::kRowMajor; }

int64_t channel_block(Layout layout) { return kLayouts[static_cast<int>(layout)].block; }

std::optional<Layout> parse_layout(std::string_view name) {
  if (name == "plain") return Layout::kRowMajor;  // the name before "row_major"
  return value_named(kLayouts, name);
}

std::vector<std::string> layout_names() { return names_of(kLayouts); }

std::optional<Layout> default_layout(size_t rank) {
  if (rank == 4) return Layout::kNCHW;
  if (rank == 2) return Layout::kNC;
  if (rank >= 1) return Layout::kRowMajor;
  return std::nullopt;
}

int64_t Shape::operator[](size_t i) const {
  assert(i < dims_.size());
  return dims_[i];
}

int64_t& Shape::operator[](size_t i) {
  assert(i < dims_.size());
  return dims_[i];
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

std::string Shape::to_string() const { return dims_.empty() ? "scalar" : join(dims_, "x"); }

int64_t TensorDesc::bytes() const {
  const int64_t block = channel_block(layout);
  if (block == 0 || shape.rank() < 2) return shape.numel() * size_of(dtype);
  const int64_t channels = shape[1];
  const int64_t padded = (channels + block - 1) / block * block;
  return shape.numel() / channels * padded * size_of(dtype);
}

std::string TensorDesc::to_string() const {
  return cat(shape.to_string(), " ", graph::to_string(dtype), " ", graph::to_string(layout));
}

std::string TensorDesc::describe() const {
  return is_int8(dtype) ? cat(to_string(), " scale ", scale) : to_string();
}

TensorDesc make_desc(Shape shape, DataType dtype) {
  const Layout layout = default_layout(shape.rank()).value_or(Layout::kNCHW);
  return TensorDesc{std::move(shape), dtype, layout};
}

}  // namespace stagecraft::graph
