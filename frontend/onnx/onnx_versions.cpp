// The ONNX op version table and the versions the importer translates (see onnx_versions.h).
#include "frontend/onnx/onnx_versions.h"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <vector>

#include "common/strings.h"

namespace stagecraft::graph::onnx_import {

namespace {

struct OpVersions {
  std::string_view type;
  std::initializer_list<int64_t> since;  // ascending
};

#define STAGECRAFT_ONNX_NEWEST_OPSET(n) constexpr int64_t kNewestOpset = n;
#define STAGECRAFT_ONNX_OP(name, ...)
#include "frontend/onnx/onnx_op_versions.inc"
#undef STAGECRAFT_ONNX_OP
#undef STAGECRAFT_ONNX_NEWEST_OPSET

#define STAGECRAFT_ONNX_NEWEST_OPSET(n)
#define STAGECRAFT_ONNX_OP(name, ...) OpVersions{name, __VA_ARGS__},
const OpVersions kOpVersions[] = {
#include "frontend/onnx/onnx_op_versions.inc"
};
#undef STAGECRAFT_ONNX_OP
#undef STAGECRAFT_ONNX_NEWEST_OPSET

// The newest version of each op type the importer reads (by translation, constant folding or
// patterns), checked against ONNX's changelog: a later version that only added element types
// (bfloat16, float8, int4: opsets 19 to 25) keeps the semantics; where a version changed them the
// translator handles the new attributes or inputs (Reduce* axes as an input from 18, Split's
// num_outputs from 18, Pad's axes from 18 and wrap mode from 19 (refused), Resize's antialias,
// axes and aspect-ratio policy from 18 (checked), ScatterND's max / min from 18, Shape's start /
// end from 15, Reshape's allowzero from 14, AveragePool's dilations from 19 (refused unless 1),
// SpaceToDepth's mode from 28).
const std::map<std::string_view, int64_t, std::less<>> kTranslated = {
    {"Abs", 13}, {"Add", 14}, {"And", 7}, {"AveragePool", 22}, {"BatchNormalization", 15},
    {"Cast", 28}, {"CastLike", 25}, {"Ceil", 13}, {"Clip", 13}, {"Concat", 13}, {"Constant", 25},
    {"ConstantOfShape", 25}, {"Conv", 22}, {"ConvTranspose", 22}, {"Cos", 22}, {"CumSum", 14}, {"DepthToSpace", 28},
    {"Div", 14}, {"Dropout", 22}, {"Einsum", 28}, {"Equal", 19}, {"Erf", 13}, {"Exp", 13},
    {"Expand", 13}, {"Flatten", 25}, {"Floor", 13}, {"Gather", 13}, {"GatherND", 13},
    {"Gelu", 20}, {"Gemm", 13}, {"GlobalAveragePool", 22}, {"GlobalMaxPool", 22},
    {"Greater", 13}, {"GreaterOrEqual", 16}, {"HardSigmoid", 22}, {"HardSwish", 22},
    {"Identity", 25}, {"InstanceNormalization", 22}, {"LayerNormalization", 17},
    {"LeakyRelu", 16}, {"Less", 13}, {"LessOrEqual", 16}, {"Log", 13}, {"MatMul", 13},
    {"Max", 13}, {"MaxPool", 22}, {"Min", 13}, {"Mod", 28}, {"Mul", 14}, {"Neg", 13}, {"Not", 1},
    {"Or", 7}, {"Pad", 25}, {"Pow", 15}, {"Range", 27}, {"Reciprocal", 13}, {"ReduceL2", 18},
    {"ReduceMax", 20}, {"ReduceMean", 18}, {"ReduceMin", 20}, {"ReduceProd", 18},
    {"ReduceSum", 13}, {"ReduceSumSquare", 18}, {"Relu", 14}, {"Reshape", 25}, {"Resize", 19},
    {"Round", 22}, {"ScatterND", 18}, {"Shape", 25}, {"Sigmoid", 13}, {"Sign", 13}, {"Sin", 22},
    {"Size", 25}, {"Slice", 13}, {"Softmax", 13}, {"SpaceToDepth", 28}, {"Split", 18},
    {"Sqrt", 13}, {"Squeeze", 25}, {"Sub", 14}, {"Sum", 13}, {"Tanh", 13}, {"Tile", 13},
    {"Transpose", 25}, {"Unsqueeze", 25}, {"Where", 16},
    // The expansions (onnx_import_expansions.cpp).
    {"Attention", 25}, {"GatherElements", 13}, {"GroupNormalization", 21}, {"ScatterElements", 18}, {"IsInf", 20}, {"IsNaN", 20}, {"Xor", 7}, {"LpNormalization", 22}, {"LpPool", 22},
    {"Trilu", 14}, {"MeanVarianceNormalization", 13}, {"PRelu", 16}, {"SwiGLU", 28}, {"RotaryEmbedding", 23}, {"CausalConvWithState", 27}, {"RMSNormalization", 23},
    // The recurrent layers (onnx_import_recurrent.cpp), Scan and LinearAttention (onnx_import_scan.cpp),
    // Upsample (a Resize), the index ops (onnx_import_indices.cpp) and Hardmax (a softmax op kind's mode).
    {"RNN", 22}, {"GRU", 22}, {"LSTM", 22}, {"Scan", 25}, {"Upsample", 10}, {"Col2Im", 18}, {"DeformConv", 22}, {"Det", 22}, {"DFT", 20}, {"LinearAttention", 27},
    {"TopK", 24}, {"ArgMax", 13}, {"ArgMin", 13}, {"Hardmax", 13}, {"GridSample", 22},
    // The ops of a data-dependent tail, evaluated on the host after the plan (onnx_import_tail.cpp).
    {"NonZero", 13}, {"NonMaxSuppression", 11},
    // The unary functions (UnaryFn).
    {"Acos", 22}, {"Acosh", 22}, {"Asin", 22}, {"Asinh", 22}, {"Atan", 22}, {"Atanh", 22},
    {"Celu", 28}, {"Cosh", 22}, {"Elu", 22}, {"Mish", 22}, {"Selu", 22}, {"Shrink", 9},
    {"Sinh", 22}, {"Softplus", 22}, {"Softsign", 22}, {"Swish", 24}, {"Tan", 22},
    {"ThresholdedRelu", 22},
    {"LogSoftmax", 13}, {"LRN", 13}, {"Mean", 13}, {"ReduceL1", 18}, {"ReduceLogSum", 18}, {"ReduceLogSumExp", 18},
};

// The oldest version of the op types whose translators also implement versions older than the one
// opset kBaseOpset selects (Scan-9: positive axes only; Upsample-7 and -9: Resize's asymmetric
// coordinates, scales as an attribute and as an input).
const std::map<std::string_view, int64_t, std::less<>> kOldestTranslated = {
    {"Scan", 8}, {"Upsample", 7},
};

const OpVersions* find(std::string_view type) {
  for (const OpVersions& op : kOpVersions) {
    if (op.type == type) return &op;
  }
  return nullptr;
}

}  // namespace

int64_t newest_opset() { return kNewestOpset; }

std::optional<int64_t> op_version(std::string_view type, int64_t opset) {
  const OpVersions* op = find(type);
  if (!op) return std::nullopt;
  std::optional<int64_t> version;
  for (int64_t since : op->since) {
    if (since <= opset) version = since;
  }
  return version;
}

std::optional<int64_t> translated_version(std::string_view type) {
  auto it = kTranslated.find(type);
  if (it == kTranslated.end()) return std::nullopt;
  return it->second;
}

std::string version_problem(std::string_view type, int64_t opset) {
  const auto translated = translated_version(type);
  if (!translated) return "";  // refused by the walk with the op's own line
  const auto version = op_version(type, opset);
  if (!version) return cat("ONNX has no ", type, " at opset ", opset);
  if (*version > *translated) {
    return cat("version ", *version, " of ", type, " (opset ", opset, ") is not supported: this build "
               "translates ", type, " up to version ", *translated);
  }
  if (opset < kBaseOpset && version != op_version(type, kBaseOpset)) {
    const auto oldest = kOldestTranslated.find(type);
    if (oldest == kOldestTranslated.end() || *version < oldest->second) {
      return cat("version ", *version, " of ", type, " (opset ", opset, ") is not supported: this build "
                 "translates ", type, " from version ",
                 oldest == kOldestTranslated.end() ? op_version(type, kBaseOpset).value_or(0) : oldest->second);
    }
  }
  return "";
}

}  // namespace stagecraft::graph::onnx_import
