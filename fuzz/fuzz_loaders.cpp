// libFuzzer target for the two loaders users feed files to: graph YAML and ONNX models. Any input
// must end in a model or in a stagecraft::Error (a clear message); anything else — a crash, a
// sanitizer report, another exception escaping — is a bug. Build and run: scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "frontend/onnx/onnx_io.h"
#include "graph/yaml_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    stagecraft::graph::graph_from_yaml(bytes, "fuzz.yaml");
  } catch (const stagecraft::Error&) {
  }
  try {
    stagecraft::graph::OnnxImportOptions options;
    options.batch = 1;
    stagecraft::graph::import_onnx_bytes(bytes, "fuzz.onnx", options);
  } catch (const stagecraft::Error&) {
  }
  return 0;
}
