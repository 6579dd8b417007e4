#pragma once
// Internal to frontend/onnx/: which version of an ONNX op a model uses, and which versions the
// importer translates. An op's version is the newest opset <= the model's that changed it (its
// schema's since_version: Conv's are 1, 11 and 22), from a table generated from the onnx package's
// schemas (onnx_op_versions.inc, scripts/gen_onnx_op_versions.py), so the importer knows every
// opset that package emits whatever libonnx it links. A translator states the newest version whose
// semantics it implements; a node of a newer version is refused by name instead of being
// translated by the rules of an older one (SpaceToDepth-28 added the CRD order).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace stagecraft::graph::onnx_import {

/// The oldest model opset the importer reads. Below kBaseOpset, a node is read only where its op's
/// version is the one opset kBaseOpset selects (the same schema) or one its translator also
/// implements (Scan-9, Upsample-7 and -9); any other is refused by name.
inline constexpr int64_t kOldestOpset = 7;
inline constexpr int64_t kBaseOpset = 11;
/// The newest opset of the generated table.
int64_t newest_opset();
/// The version of op `type` (default domain) in a model of `opset`: the newest since_version
/// <= opset; nullopt when ONNX has no such op at that opset.
std::optional<int64_t> op_version(std::string_view type, int64_t opset);
/// The newest version of `type` the importer translates (its semantics checked against ONNX's
/// changelog); nullopt for op types it does not translate at all.
std::optional<int64_t> translated_version(std::string_view type);
/// "" when the importer may read a node of `type` in a model of `opset`; otherwise the one-line
/// reason (an op ONNX did not have at that opset, a version newer than its translation, or an
/// older one it does not implement).
std::string version_problem(std::string_view type, int64_t opset);

}  // namespace stagecraft::graph::onnx_import
