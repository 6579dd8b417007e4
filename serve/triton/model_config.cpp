#include "serve/triton/model_config.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "common/error.h"
#include "common/strings.h"
#include "session/pipeline.h"
#include "session/source.h"

namespace stagecraft::serve::triton {

namespace {

namespace fs = std::filesystem;

const std::set<std::string>& known_parameters() {
  static const std::set<std::string> names = {"model",
                                              "schedule",
                                              "layout",
                                              "dtype",
                                              "calibration",
                                              "cache_dir",
                                              "input_size",
                                              "seed",
                                              "streams",
                                              "search_budget",
                                              "cores",
                                              "reserve_cores",
                                              "warmup_batch_sizes",
                                              "batch_sizes",
                                              "max_shapes"};
  return names;
}

// Reads one parameter's string_value, naming the model and key in errors.
class Parameters {
 public:
  Parameters(const nlohmann::json& config, std::string model) : model_(std::move(model)) {
    if (!config.contains("parameters")) return;
    const nlohmann::json& params = config["parameters"];
    if (!params.is_object()) throw error("parameters", "is not a map of key/value pairs");
    for (const auto& [key, value] : params.items()) {
      if (!known_parameters().count(key)) {
        throw UsageError(cat("model '", model_, "': config.pbtxt: unknown parameter '", key,
                             "' (known: ", join(known_parameters(), ", "), ")"));
      }
      if (!value.is_object() || !value.contains("string_value") ||
          !value["string_value"].is_string()) {
        throw error(key, "has no string_value (write value: { string_value: \"...\" })");
      }
      values_[key] = value["string_value"].get<std::string>();
    }
  }

  bool has(const std::string& key) const { return values_.count(key) > 0; }
  std::string text(const std::string& key, const std::string& fallback) const {
    auto it = values_.find(key);
    return it == values_.end() ? fallback : it->second;
  }
  template <typename T>
  T number(const std::string& key, T fallback, T min) const {
    auto it = values_.find(key);
    if (it == values_.end()) return fallback;
    const std::string s = trim(it->second);
    T value{};
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty() || value < min) {
      throw error(key, cat("'", it->second, "' is not a number >= ", min));
    }
    return value;
  }

  UsageError error(const std::string& key, const std::string& what) const {
    return UsageError(cat("model '", model_, "': config.pbtxt parameter '", key, "': ", what));
  }

 private:
  static std::string trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t") - b + 1);
  }
  std::string model_;
  std::map<std::string, std::string> values_;
};

std::string model_name(const nlohmann::json& config) {
  return config.contains("name") && config["name"].is_string() ? config["name"].get<std::string>()
                                                               : std::string("?");
}

// A relative path is taken from the version folder.
std::string in_version_dir(const std::string& path, const fs::path& version_dir) {
  const fs::path p(path);
  return p.is_absolute() ? path : (version_dir / p).string();
}

int64_t json_int(const nlohmann::json& v) {
  // Triton writes int64 fields as numbers; protobuf's own JSON writes them as strings.
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) return std::stoll(v.get<std::string>());
  throw std::invalid_argument("not an integer");
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::string item;
  for (char c : s) {
    if (c == ',') {
      out.push_back(item);
      item.clear();
    } else if (c != ' ') {
      item += c;
    }
  }
  out.push_back(item);
  return out;
}

std::string dims_text(const std::vector<int64_t>& dims) { return cat("[", join(dims, ", "), "]"); }

}  // namespace

ServeOptions options_from_config(const nlohmann::json& config, const std::string& model_dir,
                                 uint64_t version) {
  const std::string name = model_name(config);
  const Parameters params(config, name);
  const fs::path version_dir = fs::path(model_dir) / std::to_string(version);
  ServeOptions o;
  o.session.backend = "cpu";
  if (params.has("model")) {
    const std::string spec = params.text("model", "");
    o.source.spec = session::is_graph_file(spec) ? in_version_dir(spec, version_dir) : spec;
  } else {
    std::string file = "model.onnx";
    if (config.contains("default_model_filename") && config["default_model_filename"].is_string() &&
        !config["default_model_filename"].get<std::string>().empty()) {
      file = config["default_model_filename"].get<std::string>();
    }
    o.source.spec = (version_dir / file).string();
    if (!fs::exists(o.source.spec)) {
      throw UsageError(cat("model '", name, "': no model: ", o.source.spec,
                           " does not exist; put "
                           "the model there or name a built-in network with parameters { key: "
                           "\"model\" value: { string_value: \"inception_v3\" } }"));
    }
  }
  if (session::is_graph_file(o.source.spec) && !fs::exists(o.source.spec)) {
    throw params.error("model", cat(o.source.spec, " does not exist"));
  }
  const std::string schedule = params.text("schedule", "dp");
  if (auto strategy = session::ScheduleSource::strategy_named(schedule)) {
    o.schedule = *strategy;
  } else {
    const std::string path = in_version_dir(schedule, version_dir);
    if (!fs::exists(path)) {
      throw params.error("schedule", cat("'", schedule, "' is neither sequential, greedy, dp nor "
                                         "an existing schedule file (", path, ")"));
    }
    o.schedule = session::ScheduleSource::file(path);
  }
  o.session.layout = params.text("layout", "");
  o.source.dtype = params.text("dtype", "f32");
  if (o.source.dtype != "f32" && o.source.dtype != "bf16" && o.source.dtype != "int8") {
    throw params.error("dtype", cat("'", o.source.dtype, "': the CPU backend serves f32, bf16 (a CPU "
                                    "with AVX512_BF16 or AMX) or int8"));
  }
  o.source.calibration = params.text("calibration", "");
  if (!o.source.calibration.empty())
    o.source.calibration = in_version_dir(o.source.calibration, version_dir);
  o.session.cache_dir = params.text("cache_dir", "");
  o.source.input_size = params.number<int64_t>("input_size", 0, 0);
  o.source.seed = params.number<uint64_t>("seed", 1, 0);
  o.session.max_streams = params.number<int>("streams", o.session.max_streams, 1);
  o.search.budget.seconds = params.number<double>("search_budget", o.search.budget.seconds, 0.0);
  o.cores = params.number<int>("cores", 0, 0);
  o.reserve_cores = params.number<int>("reserve_cores", 0, 0);
  o.max_shapes = params.number<size_t>("max_shapes", o.max_shapes, 1);
  if (config.contains("max_batch_size")) {
    try {
      o.max_batch_size = json_int(config["max_batch_size"]);
    } catch (const std::exception&) {
      throw UsageError(
          cat("model '", name, "': config.pbtxt: max_batch_size is not a whole number"));
    }
  }
  const int64_t max_batch = std::max<int64_t>(1, o.max_batch_size);
  const auto batch_list = [&](const std::string& key) {
    std::vector<int64_t> sizes;
    for (const std::string& item : split_commas(params.text(key, ""))) {
      if (item.empty()) continue;
      int64_t b = 0;
      auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), b);
      if (ec != std::errc() || end != item.data() + item.size() || b < 1 || b > max_batch) {
        throw params.error(key, cat("'", item, "' is not a batch size from 1 to ", max_batch,
                                    " (max_batch_size)"));
      }
      sizes.push_back(b);
    }
    return sizes;
  };
  o.warmup_batch_sizes = batch_list("warmup_batch_sizes");
  o.batch_sizes = batch_list("batch_sizes");
  std::sort(o.batch_sizes.begin(), o.batch_sizes.end());
  o.batch_sizes.erase(std::unique(o.batch_sizes.begin(), o.batch_sizes.end()), o.batch_sizes.end());
  if (!o.batch_sizes.empty() && o.batch_sizes.back() != max_batch) {
    throw params.error("batch_sizes", cat("the largest must be max_batch_size (", max_batch,
                                          "), so that every batch has a plan"));
  }
  return o;
}

void check_io(const nlohmann::json& config, const ModelIo& io) {
  const std::string name = model_name(config);
  const auto check = [&](const char* field, const std::vector<TensorSpec>& tensors) {
    if (!config.contains(field)) return;
    std::vector<std::string> names;
    for (const TensorSpec& t : tensors) names.push_back(cat(t.name, " ", dims_text(t.dims)));
    for (const nlohmann::json& declared : config[field]) {
      const std::string tensor = declared.value("name", "");
      auto it = std::find_if(tensors.begin(), tensors.end(),
                             [&](const TensorSpec& t) { return t.name == tensor; });
      if (it == tensors.end()) {
        throw UsageError(cat("model '", name, "': config.pbtxt ", field, " '", tensor,
                             "' is not one of the model's: ", join(names, ", ")));
      }
      const std::string type = declared.value("data_type", "");
      if (type != kTensorType) {
        throw UsageError(cat("model '", name, "': config.pbtxt ", field, " '", tensor,
                             "': data_type ", type, ", the model takes and gives ", kTensorType));
      }
      std::vector<int64_t> dims;
      try {
        for (const auto& d : declared.at("dims")) dims.push_back(json_int(d));
      } catch (const std::exception&) {
        throw UsageError(cat("model '", name, "': config.pbtxt ", field, " '", tensor,
                             "': dims is not a list of whole numbers"));
      }
      if (dims != it->dims) {
        throw UsageError(
            cat("model '", name, "': config.pbtxt ", field, " '", tensor, "': dims ",
                dims_text(dims), ", the model's are ", dims_text(it->dims),
                config.value("max_batch_size", 0) > 0 ? " (per sample, without the batch)" : ""));
      }
    }
  };
  check("input", io.inputs);
  check("output", io.outputs);
}

bool complete_io(nlohmann::json& config, const ModelIo& io) {
  bool changed = false;
  const auto complete = [&](const char* field, const std::vector<TensorSpec>& tensors) {
    if (config.contains(field) && config[field].is_array() && !config[field].empty()) return;
    nlohmann::json list = nlohmann::json::array();
    for (const TensorSpec& t : tensors) {
      list.push_back({{"name", t.name}, {"data_type", kTensorType}, {"dims", t.dims}});
    }
    config[field] = std::move(list);
    changed = true;
  };
  complete("input", io.inputs);
  complete("output", io.outputs);
  return changed;
}

}  // namespace stagecraft::serve::triton
