#pragma once
/// A Triton model configuration (config.pbtxt, as the server hands it over in JSON) turned into
/// ServeOptions, checked against the model's inputs and outputs, and completed with them. No
/// Triton types here: the backend (backend.cpp) passes the JSON text in, so this is unit-tested
/// without a server.
///
/// Parameters (config.pbtxt `parameters { key: "schedule" value: { string_value: "dp" } }`):
///   model               built-in network name, or a .onnx/.yaml file (relative: to the version
///                       folder); default: the version folder's default_model_filename or
///                       model.onnx
///   schedule            sequential | greedy | dp (default) | a schedule file (relative: as model)
///   layout, dtype, calibration, cache_dir, input_size, seed, streams, search_budget
///                       as the CLI's --layout, --dtype, ... (search_budget in seconds)
///   cores               threads (cores granted) per run; 0 (default): all of the model's pool
///   reserve_cores       cores reserved for this model alone (its instances share them)
///   warmup_batch_sizes  comma-separated batch sizes planned when an instance starts
///   batch_sizes         the only batch sizes planned (e.g. "1,2,4,8", the last max_batch_size):
///                       a batch runs on the smallest not below it, zero-padded
///   max_shapes          a model with dynamic axes (its dims -1 in the config): the input shapes
///                       whose plans are kept, most recently used (default 4)

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/model_runner.h"

namespace stagecraft::serve::triton {

/// The options of the model configured by `config` (Triton's JSON of config.pbtxt), whose
/// repository folder is `model_dir` and served version `version`. Throws UsageError naming the
/// model, the field and the rule for an unknown parameter, a bad value or a missing model file.
ServeOptions options_from_config(const nlohmann::json& config, const std::string& model_dir,
                                 uint64_t version);

/// Checks the inputs and outputs `config` declares (when it declares any) against `io`: every
/// declared one must be a tensor of the model, TYPE_FP32, with its dims (per sample when batching).
/// Throws UsageError naming the tensor and what the model has.
void check_io(const nlohmann::json& config, const ModelIo& io);

/// Adds the model's inputs and outputs to `config` where it declares none (Triton's
/// auto-complete); returns whether it changed anything.
bool complete_io(nlohmann::json& config, const ModelIo& io);

/// Triton's name of the element type of every tensor here ("TYPE_FP32").
inline constexpr const char* kTensorType = "TYPE_FP32";

}  // namespace stagecraft::serve::triton
