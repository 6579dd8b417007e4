// config.pbtxt (as Triton's JSON) -> ServeOptions; declared inputs/outputs checked against the
// model; auto-complete. Every bad field gives one line naming the model and the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "serve/triton/model_config.h"

namespace stagecraft::serve::triton {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json config_with(json parameters) {
  json c = {{"name", "net"}, {"max_batch_size", 8}, {"parameters", json::object()}};
  for (const auto& [k, v] : parameters.items()) c["parameters"][k] = {{"string_value", v}};
  return c;
}

std::string error_of(const json& config, const std::string& dir = "/nonexistent") {
  try {
    options_from_config(config, dir, 1);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ModelConfig, ParametersBecomeOptions) {
  const ServeOptions o = options_from_config(config_with({{"model", "squeezenet1_1"},
                                                          {"schedule", "greedy"},
                                                          {"cores", "1"},
                                                          {"reserve_cores", "1"},
                                                          {"input_size", "64"},
                                                          {"layout", "nhwc"},
                                                          {"warmup_batch_sizes", "1, 4"},
                                                          {"search_budget", "2.5"}}),
                                             "/models/net", 1);
  EXPECT_EQ(o.source.spec, "squeezenet1_1");
  EXPECT_EQ(o.schedule.describe(), "greedy");
  EXPECT_FALSE(o.schedule.is_file());
  EXPECT_EQ(o.cores, 1);
  EXPECT_EQ(o.reserve_cores, 1);
  EXPECT_EQ(o.source.input_size, 64);
  EXPECT_EQ(o.session.layout, "nhwc");
  EXPECT_EQ(o.session.backend, "cpu");
  EXPECT_EQ(o.max_batch_size, 8);
  EXPECT_EQ(o.warmup_batch_sizes, (std::vector<int64_t>{1, 4}));
  EXPECT_TRUE(o.batch_sizes.empty());
  EXPECT_EQ(options_from_config(config_with({{"model", "x"}, {"batch_sizes", "8,2,4,2"}}), "/m", 1)
                .batch_sizes,
            (std::vector<int64_t>{2, 4, 8}));
  EXPECT_DOUBLE_EQ(o.search.budget.seconds, 2.5);
  const ServeOptions defaults =
      options_from_config(config_with({{"model", "inception_v3"}}), "/m", 1);
  EXPECT_EQ(defaults.schedule.describe(), "dp");
  EXPECT_DOUBLE_EQ(defaults.search.budget.seconds, scheduler::SearchBudget{}.seconds);  // the CLI's
  EXPECT_EQ(defaults.cores, 0);
}

TEST(ModelConfig, ModelFileDefaultsToTheVersionFolder) {
  const fs::path dir = fs::temp_directory_path() / "stagecraft_test_model_config";
  fs::create_directories(dir / "3");
  std::ofstream(dir / "3" / "model.onnx") << "x";
  json c = config_with(json::object());
  EXPECT_EQ(options_from_config(c, dir.string(), 3).source.spec,
            (dir / "3" / "model.onnx").string());
  // Missing: says where it looked and what to do.
  const std::string e = error_of(c, dir.string() + "/nothing");
  EXPECT_NE(e.find("model 'net': no model"), std::string::npos) << e;
  EXPECT_NE(e.find("string_value: \"inception_v3\""), std::string::npos) << e;
  fs::remove_all(dir);
}

TEST(ModelConfig, BadParametersAreOneLineErrors) {
  std::string e = error_of(config_with({{"model", "x"}, {"shedule", "dp"}}));
  EXPECT_NE(e.find("unknown parameter 'shedule'"), std::string::npos) << e;
  EXPECT_NE(e.find("schedule"), std::string::npos) << e;
  e = error_of(config_with({{"model", "x"}, {"cores", "two"}}));
  EXPECT_NE(e.find("parameter 'cores': 'two' is not a number >= 0"), std::string::npos) << e;
  e = error_of(config_with({{"model", "x"}, {"schedule", "fastest"}}));
  EXPECT_NE(e.find("parameter 'schedule'"), std::string::npos) << e;
  e = error_of(config_with({{"model", "x"}, {"warmup_batch_sizes", "1,16"}}));
  EXPECT_NE(e.find("'16' is not a batch size from 1 to 8"), std::string::npos) << e;
  e = error_of(config_with({{"model", "x"}, {"batch_sizes", "1,4"}}));
  EXPECT_NE(e.find("parameter 'batch_sizes': the largest must be max_batch_size (8)"),
            std::string::npos)
      << e;
  e = error_of(config_with({{"model", "x"}, {"dtype", "f16"}}));
  EXPECT_NE(e.find("parameter 'dtype'"), std::string::npos) << e;
  EXPECT_NE(e.find("f32, bf16 (a CPU with AVX512_BF16 or AMX) or int8"), std::string::npos) << e;
  EXPECT_EQ(error_of(config_with({{"model", "x"}, {"dtype", "bf16"}})), "");
  EXPECT_EQ(options_from_config(config_with({{"model", "x"}, {"dtype", "bf16"}}), "/nonexistent", 1).source.dtype,
            "bf16");
  e = error_of(config_with({{"model", "missing.onnx"}}));
  EXPECT_NE(e.find("/nonexistent/1/missing.onnx does not exist"), std::string::npos) << e;
  for (const char* bad : {"cores", "seed", "streams"}) {
    EXPECT_NE(error_of(config_with({{"model", "x"}, {bad, "-1"}})), "") << bad;
  }
  EXPECT_EQ(error_of(config_with({{"model", "x"}})), "");
}

ModelIo io() { return {{{"input", {3, 64, 64}}}, {{"probs", {1000}}}}; }

TEST(ModelConfig, DeclaredTensorsMustMatchTheModel) {
  json c = config_with({{"model", "x"}});
  EXPECT_NO_THROW(check_io(c, io()));  // nothing declared
  c["input"] =
      json::array({{{"name", "input"}, {"data_type", "TYPE_FP32"}, {"dims", {3, 64, 64}}}});
  c["output"] = json::array({{{"name", "probs"}, {"data_type", "TYPE_FP32"}, {"dims", {"1000"}}}});
  EXPECT_NO_THROW(check_io(c, io()));
  const auto error = [&](json bad) -> std::string {
    try {
      check_io(bad, io());
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  };
  json wrong_name = c;
  wrong_name["input"][0]["name"] = "image";
  EXPECT_NE(error(wrong_name).find("input 'image' is not one of the model's: input [3, 64, 64]"),
            std::string::npos)
      << error(wrong_name);
  json wrong_type = c;
  wrong_type["output"][0]["data_type"] = "TYPE_INT32";
  EXPECT_NE(error(wrong_type).find("data_type TYPE_INT32"), std::string::npos);
  json wrong_dims = c;
  wrong_dims["input"][0]["dims"] = {1, 3, 64, 64};
  EXPECT_NE(error(wrong_dims).find("dims [1, 3, 64, 64], the model's are [3, 64, 64] (per sample"),
            std::string::npos)
      << error(wrong_dims);
}

TEST(ModelConfig, CompletesOnlyWhatIsMissing) {
  json c = config_with({{"model", "x"}});
  EXPECT_TRUE(complete_io(c, io()));
  ASSERT_EQ(c["input"].size(), 1u);
  EXPECT_EQ(c["input"][0]["name"], "input");
  EXPECT_EQ(c["input"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(c["input"][0]["dims"], json({3, 64, 64}));
  EXPECT_EQ(c["output"][0]["dims"], json({1000}));
  EXPECT_NO_THROW(check_io(c, io()));
  EXPECT_FALSE(complete_io(c, io()));  // already complete
}

}  // namespace
}  // namespace stagecraft::serve::triton
