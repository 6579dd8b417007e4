#include "profiler/device_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "common/files.h"
#include "common/strings.h"

namespace stagecraft::profiler {

std::string default_config_dir() {
  if (const char* env = std::getenv("STAGECRAFT_CONFIG_DIR"); env && *env) return env;
  return STAGECRAFT_SOURCE_CONFIG_DIR;
}

namespace {

template <class T>
T read_field(const YAML::Node& root, const std::string& path, const char* key, T min_value) {
  const YAML::Node node = root[key];
  if (!node) throw DeviceSpecError(cat(path, ": missing field '", key, "'"));
  T value{};
  try {
    value = node.as<T>();
  } catch (const YAML::Exception&) {
    throw DeviceSpecError(cat(path, ":", node.Mark().line + 1, ": field '", key,
                              "' must be a number, got '", node.Scalar(), "'"));
  }
  if (!(value >= min_value)) {
    throw DeviceSpecError(cat(path, ":", node.Mark().line + 1, ": field '", key, "' must be >= ",
                              min_value, ", got ", value));
  }
  return value;
}

}  // namespace

DeviceSpec load_device_spec(const std::string& path) {
  const std::string text = read_text_file(path);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw DeviceSpecError(cat(path, ":", e.mark.line + 1, ": not valid YAML: ", e.msg));
  }
  if (!root.IsMap()) throw DeviceSpecError(cat(path, ": a device file must be a YAML map"));
  DeviceSpec spec;
  spec.id = std::filesystem::path(path).stem().string();
  spec.name = root["name"] ? root["name"].as<std::string>() : spec.id;
  spec.sm_count = read_field<int>(root, path, "sm_count", 1);
  spec.fp32_tflops = read_field<double>(root, path, "fp32_tflops", 1e-3);
  spec.fp16_tflops = read_field<double>(root, path, "fp16_tflops", 1e-3);
  spec.int8_tops = read_field<double>(root, path, "int8_tops", 1e-3);
  spec.memory_gbps = read_field<double>(root, path, "memory_gbps", 1e-3);
  spec.kernel_launch_us = read_field<double>(root, path, "kernel_launch_us", 0.0);
  spec.cross_stream_sync_us = read_field<double>(root, path, "cross_stream_sync_us", 0.0);
  spec.min_kernel_us = read_field<double>(root, path, "min_kernel_us", 0.0);
  spec.blocks_per_sm = read_field<int>(root, path, "blocks_per_sm", 1);
  spec.gemm_tile = read_field<int>(root, path, "gemm_tile", 1);
  spec.compute_efficiency = read_field<double>(root, path, "compute_efficiency", 1e-3);
  spec.memory_efficiency = read_field<double>(root, path, "memory_efficiency", 1e-3);
  if (spec.compute_efficiency > 1 || spec.memory_efficiency > 1) {
    throw DeviceSpecError(cat(path, ": efficiencies must be at most 1"));
  }
  return spec;
}

std::vector<std::string> list_device_specs(const std::string& config_dir) {
  const std::filesystem::path dir =
      std::filesystem::path(config_dir.empty() ? default_config_dir() : config_dir) / "devices";
  std::vector<std::string> ids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".yaml") ids.push_back(entry.path().stem().string());
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

DeviceSpec find_device_spec(const std::string& id, const std::string& config_dir) {
  const std::string dir = config_dir.empty() ? default_config_dir() : config_dir;
  const std::filesystem::path path = std::filesystem::path(dir) / "devices" / (id + ".yaml");
  if (!std::filesystem::exists(path)) {
    const auto known = list_device_specs(dir);
    throw DeviceSpecError(cat("unknown device '", id, "': no file ", path.string(),
                              known.empty() ? std::string(" (no device files found; set "
                                                          "STAGECRAFT_CONFIG_DIR)")
                                            : cat(" (known: ", join(known, ", "), ")")));
  }
  return load_device_spec(path.string());
}

}  // namespace stagecraft::profiler
