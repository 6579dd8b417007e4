#pragma once
/// Tensor descriptors of the graph IR: element type, memory layout and logical shape, kept
/// separate from any storage. Shapes are always logical NCHW (or NC for rank 2; tensors of
/// other ranks, a transformer's [N, T, C] tokens, are row-major: layout kRowMajor); the layout says
/// how the elements are arranged in memory, so shape inference never depends on layout.
///
/// Example:
///   TensorDesc x{Shape{1, 3, 299, 299}, DataType::kF32, Layout::kNCHW};
///   x.bytes();  // 1072812

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stagecraft::graph {

/// The one list of element types: enum value, name in files, size in bytes.
#define STAGECRAFT_DATA_TYPES(X) \
  X(kF32, "f32", 4)              \
  X(kF16, "f16", 2)              \
  X(kBF16, "bf16", 2)            \
  X(kI8, "i8", 1)                \
  X(kU8, "u8", 1)                \
  X(kI32, "i32", 4)

/// Element type of a tensor.
enum class DataType : uint8_t {
#define STAGECRAFT_X(value, name, size) value,
  STAGECRAFT_DATA_TYPES(STAGECRAFT_X)
#undef STAGECRAFT_X
};

/// Name used in files and on the command line ("f32").
std::string_view to_string(DataType type);
/// Size of one element in bytes.
int64_t size_of(DataType type);
/// Parses a name; nullopt when unknown.
std::optional<DataType> parse_data_type(std::string_view name);
/// Whether the type is a quantised 8-bit integer (u8 or i8).
inline bool is_int8(DataType type) { return type == DataType::kI8 || type == DataType::kU8; }
/// Every data type name, in list order (for error messages).
std::vector<std::string> data_type_names();

/// The one list of memory layouts: enum value, name in files, tensor rank it applies to, and the
/// channel block (0 when channels are not blocked).
#define STAGECRAFT_LAYOUTS(X)             \
  X(kNCHW, "nchw", 4, 0)                  \
  X(kNHWC, "nhwc", 4, 0)                  \
  X(kNChw8c, "nChw8c", 4, 8)              \
  X(kNChw16c, "nChw16c", 4, 16)           \
  X(kNCHWVectC, "nchw_vect_c", 4, 4)      \
  X(kNC, "nc", 2, 0)                      \
  X(kRowMajor, "row_major", -1, 0)

/// Physical arrangement of a tensor's elements.
enum class Layout : uint8_t {
#define STAGECRAFT_X(value, name, rank, block) value,
  STAGECRAFT_LAYOUTS(STAGECRAFT_X)
#undef STAGECRAFT_X
};

/// Name used in files ("nchw").
std::string_view to_string(Layout layout);
/// Rank of the tensors this layout applies to; -1 for kRowMajor (any rank but 2).
int layout_rank(Layout layout);
/// Whether `layout` applies to tensors of `rank` dimensions.
bool layout_fits(Layout layout, size_t rank);
/// Channel block size of a blocked layout, 0 otherwise.
int64_t channel_block(Layout layout);
/// Parses a name ("plain", the name of kRowMajor in older files, too); nullopt when unknown.
std::optional<Layout> parse_layout(std::string_view name);
/// Every layout name, in list order.
std::vector<std::string> layout_names();
/// The plain layout for a rank: NCHW for 4, NC for 2, kRowMajor for the others.
std::optional<Layout> default_layout(size_t rank);
/// The layout of a row-major tensor outside the convolutions' layouts (a transformer's): NC for
/// rank 2, kRowMajor otherwise (rank 4 included: the layout choice leaves such tensors alone, and
/// ops that read features, layer_norm and linear, read the last axis).
Layout row_major_layout(size_t rank);

/// Logical dimensions of a tensor (NCHW order for rank 4, NC for rank 2).
class Shape {
 public:
  Shape() = default;
  /// Shape{1, 3, 224, 224}.
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  /// From a vector of dimensions.
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  /// Number of dimensions.
  size_t rank() const { return dims_.size(); }
  /// Dimension `i` (no bounds check beyond assert).
  int64_t operator[](size_t i) const;
  /// Mutable dimension `i`.
  int64_t& operator[](size_t i);
  /// All dimensions.
  const std::vector<int64_t>& dims() const { return dims_; }
  /// Product of the dimensions (1 for rank 0).
  int64_t numel() const;
  /// "1x3x224x224".
  std::string to_string() const;

  bool operator==(const Shape&) const = default;

 private:
  std::vector<int64_t> dims_;
};

/// Element type, layout and shape of a tensor value; no storage.
struct TensorDesc {
  /// Logical dimensions.
  Shape shape;
  /// Element type.
  DataType dtype = DataType::kF32;
  /// Memory layout; must apply to `shape.rank()`.
  Layout layout = Layout::kNCHW;
  /// Quantisation step of 8-bit integer tensors: the real value of an element q is scale * q
  /// (symmetric, zero point 0). 1 for floating-point tensors.
  float scale = 1.0f;

  /// Bytes of a dense tensor in this layout (blocked layouts pad channels to the block).
  int64_t bytes() const;
  /// "1x64x56x56 f32 nchw" (the scale is not part of it: see describe()).
  std::string to_string() const;
  /// to_string() plus the scale of 8-bit integer tensors: "1x64x56x56 u8 nhwc scale 0.0123".
  std::string describe() const;

  bool operator==(const TensorDesc&) const = default;
};

/// Whether the layout choice applies to a tensor: rank 4 in a convolution layout (not a
/// kRowMajor one).
inline bool takes_layouts(const TensorDesc& d) {
  return d.shape.rank() == 4 && d.layout != Layout::kRowMajor;
}

/// A descriptor with the plain layout for its rank.
TensorDesc make_desc(Shape shape, DataType dtype = DataType::kF32);

}  // namespace stagecraft::graph
