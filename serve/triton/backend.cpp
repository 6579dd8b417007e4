// libtriton_stagecraft.so: a Triton Inference Server backend that runs models with stagecraft's
// pipeline (serve/model_runner.h) on the CPU.
//
// Life cycle (the TRITONBACKEND API): Initialize makes the process-wide core pool (its size from
// --backend-config=stagecraft,cores=N, default: the process's cores); ModelInitialize reads
// config.pbtxt (serve/triton/model_config.h), loads the model at batch 1 to learn its inputs and
// outputs, completes or checks the config against them and reserves cores when asked;
// ModelInstanceInitialize opens a ModelRunner (plans for the warm-up batch sizes);
// ModelInstanceExecute checks each request, joins the good ones into runs of at most
// max_batch_size samples, runs them and answers every request, each bad one with an error of one
// line, so that the server keeps serving.
//
// Errors thrown by stagecraft (one line) become TRITONSERVER_Errors; nothing is thrown across the
// C API.
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/strings.h"
#include "serve/core_pool.h"
#include "serve/model_runner.h"
#include "serve/triton/model_config.h"
#include "serve/triton/triton_api.h"

namespace stagecraft::serve::triton {
namespace {

// A failed call of the server's API (its message), thrown inside this file only.
class TritonFailure : public std::exception {
 public:
  TritonFailure(TRITONSERVER_Error_Code code, std::string message)
      : code_(code), message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }
  TRITONSERVER_Error_Code code() const { return code_; }

 private:
  TRITONSERVER_Error_Code code_;
  std::string message_;
};

// Throws TritonFailure (and frees `err`) when a server call failed.
void check(TRITONSERVER_Error* err, const char* call) {
  if (!err) return;
  TritonFailure failure(TRITONSERVER_ErrorCode(err),
                        cat(call, ": ", TRITONSERVER_ErrorMessage(err)));
  TRITONSERVER_ErrorDelete(err);
  throw failure;
}

void log(TRITONSERVER_LogLevel level, const std::string& message) {
  if (!TRITONSERVER_LogIsEnabled(level)) return;
  TRITONSERVER_Error* err = TRITONSERVER_LogMessage(level, __FILE__, __LINE__, message.c_str());
  if (err) TRITONSERVER_ErrorDelete(err);
}

// Runs `body`, turning what it throws into a Triton error (user errors: INVALID_ARG).
template <class Body>
TRITONSERVER_Error* guarded(const std::string& what, Body&& body) {
  try {
    body();
    return nullptr;
  } catch (const TritonFailure& e) {
    return TRITONSERVER_ErrorNew(e.code(), cat(what, ": ", e.what()).c_str());
  } catch (const Error& e) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, cat(what, ": ", e.what()).c_str());
  } catch (const std::exception& e) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, cat(what, ": ", e.what()).c_str());
  }
}

// Deletes the State that an *Initialize set as `object`'s state (get_state:
// TRITONBACKEND_ModelState or TRITONBACKEND_ModelInstanceState); the server's error, if any.
template <class State, class Object>
TRITONSERVER_Error* delete_state(Object* object,
                                 TRITONSERVER_Error* (*get_state)(Object*, void**)) {
  void* state = nullptr;
  TRITONSERVER_Error* err = get_state(object, &state);
  delete static_cast<State*>(state);
  return err;
}

// The JSON of `message`; `owned`: the caller owns it (deleted here), else the server does.
nlohmann::json message_json(TRITONSERVER_Message* message, bool owned) {
  const char* base = nullptr;
  size_t size = 0;
  TRITONSERVER_Error* err = TRITONSERVER_MessageSerializeToJson(message, &base, &size);
  nlohmann::json json;
  if (!err) json = nlohmann::json::parse(std::string(base, size), nullptr, false);
  if (owned) TRITONSERVER_MessageDelete(message);
  check(err, "TRITONSERVER_MessageSerializeToJson");
  if (json.is_discarded())
    throw TritonFailure(TRITONSERVER_ERROR_INTERNAL, "the server's JSON does not parse");
  return json;
}

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

const char* type_name(TRITONSERVER_DataType t) {
  static const char* names[] = {"INVALID", "BOOL", "UINT8", "UINT16", "UINT32",
                                "UINT64",  "INT8", "INT16", "INT32",  "INT64",
                                "FP16",    "FP32", "FP64",  "BYTES",  "BF16"};
  const auto i = static_cast<size_t>(t);
  return i < std::size(names) ? names[i] : "unknown";
}

// ---- State -------------------------------------------------------------------------------------

struct BackendState {
  std::unique_ptr<CorePool> pool;
};
BackendState* g_backend = nullptr;  // between TRITONBACKEND_Initialize and Finalize

struct ModelState {
  std::string name;
  ServeOptions options;
  ModelIo io;
  std::shared_ptr<CorePool::Reservation> reservation;
};

struct InstanceState {
  std::string name;
  ModelState* model = nullptr;
  std::unique_ptr<ModelRunner> runner;
};

// ---- Requests ----------------------------------------------------------------------------------

// A request checked against the model: its batch and where its inputs lie.
struct Checked {
  TRITONBACKEND_Request* request = nullptr;
  TRITONBACKEND_Response* response = nullptr;
  int64_t batch = 1;
  // Per model input: the dimensions of one sample (a dynamic model's request chooses some).
  SampleShapes shapes;
  // Per model input: the request's buffers (CPU memory) in order.
  std::vector<std::vector<std::pair<const char*, uint64_t>>> buffers;
  std::string error;  // "" when good
};

std::string dims_text(const int64_t* dims, uint32_t n) {
  return cat("[", join(std::span<const int64_t>(dims, n), ", "), "]");
}

// Fills `c.batch` and `c.buffers`, or `c.error` with one line.
void check_request(const ModelState& model, Checked& c) {
  const ModelIo& io = model.io;
  const bool batching = model.options.max_batch_size > 0;
  uint32_t count = 0;
  check(TRITONBACKEND_RequestInputCount(c.request, &count), "TRITONBACKEND_RequestInputCount");
  c.buffers.assign(io.inputs.size(), {});
  c.shapes.assign(io.inputs.size(), {});
  std::vector<bool> seen(io.inputs.size(), false);
  int64_t batch = -1;
  for (uint32_t k = 0; k < count; ++k) {
    TRITONBACKEND_Input* input = nullptr;
    check(TRITONBACKEND_RequestInputByIndex(c.request, k, &input),
          "TRITONBACKEND_RequestInputByIndex");
    const char* name = nullptr;
    TRITONSERVER_DataType type = TRITONSERVER_TYPE_INVALID;
    const int64_t* shape = nullptr;
    uint32_t dims = 0, buffers = 0;
    uint64_t bytes = 0;
    check(TRITONBACKEND_InputProperties(input, &name, &type, &shape, &dims, &bytes, &buffers),
          "TRITONBACKEND_InputProperties");
    size_t i = 0;
    while (i < io.inputs.size() && io.inputs[i].name != name) ++i;
    if (i == io.inputs.size()) {
      std::vector<std::string> names;
      for (const TensorSpec& t : io.inputs) names.push_back(t.name);
      c.error = cat("unknown input '", name, "' (the model takes: ", join(names, ", "), ")");
      return;
    }
    const TensorSpec& spec = io.inputs[i];
    if (type != TRITONSERVER_TYPE_FP32) {
      c.error = cat("input '", name, "': data type ", type_name(type), ", the model takes FP32");
      return;
    }
    std::vector<int64_t> want = spec.dims;
    if (batching) {
      if (dims < 1 || shape[0] < 1 || shape[0] > model.options.max_batch_size ||
          (batch >= 0 && shape[0] != batch)) {
        c.error =
            cat("input '", name, "': shape ", dims_text(shape, dims), ": the first dimension ",
                "is the batch, 1 to ", model.options.max_batch_size, " (max_batch_size)",
                batch >= 0 ? cat(", the same in every input (", batch, ")") : "");
        return;
      }
      batch = shape[0];
      want.insert(want.begin(), batch);
    }
    // -1: a dimension of a dynamic model the request chooses (any size the model takes).
    const bool fits = dims == want.size() && std::equal(want.begin(), want.end(), shape, [](int64_t w, int64_t d) {
      return w == d || (w == -1 && d >= 1);
    });
    if (!fits) {
      c.error = cat("input '", name, "': shape ", dims_text(shape, dims), ", the model takes ",
                    dims_text(want.data(), static_cast<uint32_t>(want.size())));
      return;
    }
    c.shapes[i].assign(shape + (batching ? 1 : 0), shape + dims);
    int64_t sample = 1;
    for (int64_t d : c.shapes[i]) sample *= d;
    const uint64_t expected = static_cast<uint64_t>(std::max<int64_t>(1, batch) * sample) * sizeof(float);
    if (bytes != expected) {
      c.error = cat("input '", name, "': ", bytes, " bytes of data, its shape needs ", expected);
      return;
    }
    uint64_t total = 0;
    for (uint32_t b = 0; b < buffers; ++b) {
      const void* data = nullptr;
      uint64_t size = 0;
      TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;  // preferred (in), actual (out)
      int64_t memory_id = 0;
      check(TRITONBACKEND_InputBuffer(input, b, &data, &size, &memory, &memory_id),
            "TRITONBACKEND_InputBuffer");
      if (memory == TRITONSERVER_MEMORY_GPU) {
        c.error = cat("input '", name,
                      "' is in GPU memory; stagecraft's backend reads CPU memory "
                      "(send it from the host, or use CPU shared memory)");
        return;
      }
      c.buffers[i].emplace_back(static_cast<const char*>(data), size);
      total += size;
    }
    if (total != expected) {
      c.error =
          cat("input '", name, "': its buffers hold ", total, " bytes, its shape needs ", expected);
      return;
    }
    seen[i] = true;
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) {
      c.error = cat("missing input '", io.inputs[i].name, "'");
      return;
    }
  }
  c.batch = batching ? batch : 1;
}

void send(Checked& c, const std::string& model_name) {
  if (!c.response) return;
  TRITONSERVER_Error* error = nullptr;
  if (!c.error.empty()) {
    error = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG,
                                  cat("stagecraft model '", model_name, "': ", c.error).c_str());
  }
  TRITONSERVER_Error* err =
      TRITONBACKEND_ResponseSend(c.response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, error);
  if (err) {
    log(TRITONSERVER_LOG_ERROR,
        cat("stagecraft: cannot send a response: ", TRITONSERVER_ErrorMessage(err)));
    TRITONSERVER_ErrorDelete(err);
  }
  if (error) TRITONSERVER_ErrorDelete(error);
  c.response = nullptr;
}

// One output of a request's answer: its name, shape (with the batch when batching) and values.
struct OutputView {
  const std::string* name;
  std::vector<int64_t> shape;
  std::span<const float> data;
};

// Writes the outputs the request asks for (every one when it names none) from `outputs` (the
// model's, in order) into c's response.
void write_outputs(Checked& c, const std::vector<OutputView>& outputs) {
  uint32_t requested = 0;
  check(TRITONBACKEND_RequestOutputCount(c.request, &requested),
        "TRITONBACKEND_RequestOutputCount");
  std::vector<size_t> chosen;
  for (uint32_t k = 0; k < requested; ++k) {
    const char* name = nullptr;
    check(TRITONBACKEND_RequestOutputName(c.request, k, &name), "TRITONBACKEND_RequestOutputName");
    size_t i = 0;
    while (i < outputs.size() && *outputs[i].name != name) ++i;
    if (i == outputs.size()) {
      c.error = cat("unknown output '", name, "'");
      return;
    }
    chosen.push_back(i);
  }
  if (requested == 0) {
    for (size_t i = 0; i < outputs.size(); ++i) chosen.push_back(i);
  }
  for (size_t i : chosen) {
    const OutputView& out = outputs[i];
    TRITONBACKEND_Output* output = nullptr;
    check(TRITONBACKEND_ResponseOutput(c.response, &output, out.name->c_str(), TRITONSERVER_TYPE_FP32,
                                       out.shape.data(), static_cast<uint32_t>(out.shape.size())),
          "TRITONBACKEND_ResponseOutput");
    const uint64_t bytes = out.data.size() * sizeof(float);
    void* buffer = nullptr;
    TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
    int64_t memory_id = 0;
    check(TRITONBACKEND_OutputBuffer(output, &buffer, bytes, &memory, &memory_id),
          "TRITONBACKEND_OutputBuffer");
    if (memory == TRITONSERVER_MEMORY_GPU) {
      c.error = cat("output '", *out.name, "': the server gave GPU memory; stagecraft writes CPU memory");
      return;
    }
    if (bytes > 0) std::memcpy(buffer, out.data.data(), bytes);
  }
}

// The inputs of `group`'s requests joined, one vector per model input (io's).
std::vector<std::vector<float>> joined_inputs(const ModelIo& io, const std::vector<Checked*>& group) {
  int64_t batch = 0;
  for (const Checked* c : group) batch += c->batch;
  std::vector<std::vector<float>> srcs(io.inputs.size());
  for (size_t i = 0; i < io.inputs.size(); ++i) {
    srcs[i].resize(static_cast<size_t>(batch * io.inputs[i].numel()));
    char* at = reinterpret_cast<char*>(srcs[i].data());
    for (const Checked* c : group) {
      for (const auto& [data, size] : c->buffers[i]) {
        std::memcpy(at, data, size);
        at += size;
      }
    }
  }
  return srcs;
}

// Runs the good requests of `group` (at most max_batch_size samples in all) as one batch.
void run_group_or_throw(InstanceState& instance, std::vector<Checked*>& group);
void run_group(InstanceState& instance, std::vector<Checked*>& group) {
  try {
    run_group_or_throw(instance, group);
  } catch (const std::exception& e) {  // out of memory for the staging buffers, say
    for (Checked* c : group) {
      if (c->error.empty()) c->error = e.what();
    }
  }
}

// A model whose outputs the data shapes (a data-dependent tail): each request runs on its own and
// gets the shapes its run gave.
void run_shaped_requests(InstanceState& instance, std::vector<Checked*>& group, const SampleShapes& shapes,
                         const ModelIo& io) {
  for (Checked* c : group) {
    try {
      const std::vector<std::vector<float>> srcs = joined_inputs(io, {c});
      const std::vector<std::span<const float>> src_spans(srcs.begin(), srcs.end());
      const std::vector<graph::ModelOutput> outs = instance.runner->run_shaped(c->batch, src_spans, shapes);
      std::vector<OutputView> views;
      for (const graph::ModelOutput& o : outs) views.push_back({&o.name, o.dims, o.data});
      write_outputs(*c, views);
    } catch (const std::exception& e) {
      c->error = e.what();
    }
  }
}

void run_group_or_throw(InstanceState& instance, std::vector<Checked*>& group) {
  const bool batching = instance.model->options.max_batch_size > 0;
  // The group's requests have one input shape (the execute loop groups them so).
  const SampleShapes shapes = instance.runner->dynamic() ? group.front()->shapes : SampleShapes{};
  const ModelIo io = instance.runner->io_for(shapes);
  const size_t plans_before = instance.runner->planned().size();
  const auto log_plan = [&] {
    if (instance.runner->planned().size() != plans_before) {
      log(TRITONSERVER_LOG_INFO, cat("stagecraft: ", instance.name, ": planned ", instance.runner->last_plan_summary()));
    }
  };
  if (instance.runner->has_tail()) {
    run_shaped_requests(instance, group, shapes, io);
    log_plan();
    return;
  }
  int64_t batch = 0;
  for (Checked* c : group) batch += c->batch;
  const std::vector<std::vector<float>> srcs = joined_inputs(io, group);
  std::vector<std::vector<float>> dsts(io.outputs.size());
  for (size_t i = 0; i < io.outputs.size(); ++i) {
    dsts[i].resize(static_cast<size_t>(batch * io.outputs[i].numel()));
  }
  std::vector<std::span<const float>> src_spans(srcs.begin(), srcs.end());
  std::vector<std::span<float>> dst_spans(dsts.begin(), dsts.end());
  std::string failure;
  try {
    instance.runner->run(batch, src_spans, dst_spans, shapes);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  log_plan();
  int64_t row = 0;
  for (Checked* c : group) {
    if (!failure.empty()) {
      c->error = failure;
    } else {
      try {
        std::vector<OutputView> views;
        for (size_t i = 0; i < io.outputs.size(); ++i) {
          const TensorSpec& spec = io.outputs[i];
          std::vector<int64_t> shape = spec.dims;
          if (batching) shape.insert(shape.begin(), c->batch);
          views.push_back({&spec.name, std::move(shape),
                           std::span<const float>(dsts[i]).subspan(static_cast<size_t>(row * spec.numel()),
                                                                   static_cast<size_t>(c->batch * spec.numel()))});
        }
        write_outputs(*c, views);
      } catch (const std::exception& e) {
        c->error = e.what();
      }
    }
    row += c->batch;
  }
}

}  // namespace
}  // namespace stagecraft::serve::triton

using namespace stagecraft;
using namespace stagecraft::serve;
using namespace stagecraft::serve::triton;

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  return guarded("stagecraft backend", [&] {
    uint32_t major = 0, minor = 0;
    check(TRITONBACKEND_ApiVersion(&major, &minor), "TRITONBACKEND_ApiVersion");
    if (major != STAGECRAFT_TRITONBACKEND_API_MAJOR || minor < STAGECRAFT_TRITONBACKEND_API_MINOR) {
      throw TritonFailure(TRITONSERVER_ERROR_UNSUPPORTED,
                          cat("the server's backend API is ", major, ".", minor,
                              "; this backend "
                              "was written for ",
                              STAGECRAFT_TRITONBACKEND_API_MAJOR, ".",
                              STAGECRAFT_TRITONBACKEND_API_MINOR, " (Triton 2.51) or a later 1.x"));
    }
    TRITONSERVER_Message* message = nullptr;
    check(TRITONBACKEND_BackendConfig(backend, &message), "TRITONBACKEND_BackendConfig");
    const nlohmann::json config = message_json(message, /*owned=*/false);  // the server's
    int cores = 0;
    if (config.contains("cmdline") && config["cmdline"].contains("cores")) {
      const std::string text = config["cmdline"]["cores"].get<std::string>();
      try {
        cores = std::stoi(text);
      } catch (const std::exception&) {
        cores = -1;
      }
      if (cores < 1) {
        throw UsageError(
            cat("--backend-config=stagecraft,cores=", text, ": a number of cores >= 1"));
      }
    }
    auto state = std::make_unique<BackendState>();
    state->pool = std::make_unique<CorePool>(cores);
    log(TRITONSERVER_LOG_INFO, cat("stagecraft: backend API ", major, ".", minor, ", ",
                                   state->pool->cores(), " core(s) shared by the models"));
    g_backend = state.release();
  });
}

TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend*) {
  delete g_backend;  // every model (and its reservation) is finalized before this
  g_backend = nullptr;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_GetBackendAttribute(TRITONBACKEND_Backend*,
                                                      TRITONBACKEND_BackendAttribute* attributes) {
  // Without an instance_group, a model gets CPU instances (KIND_AUTO picks GPUs where there are
  // some, which this backend refuses).
  return TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup(
      attributes, TRITONSERVER_INSTANCEGROUPKIND_CPU, 0, nullptr, 0);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  const char* name = "?";
  TRITONBACKEND_ModelName(model, &name);
  // Triton puts "load failed for model 'NAME'" in front; the options' errors name it too.
  return guarded("stagecraft", [&] {
    uint64_t version = 0;
    check(TRITONBACKEND_ModelVersion(model, &version), "TRITONBACKEND_ModelVersion");
    TRITONBACKEND_ArtifactType artifact = TRITONBACKEND_ARTIFACT_FILESYSTEM;
    const char* location = nullptr;
    check(TRITONBACKEND_ModelRepository(model, &artifact, &location),
          "TRITONBACKEND_ModelRepository");
    if (artifact != TRITONBACKEND_ARTIFACT_FILESYSTEM) {
      throw UsageError("the model repository must be a local folder");
    }
    TRITONSERVER_Message* message = nullptr;
    check(TRITONBACKEND_ModelConfig(model, 1, &message), "TRITONBACKEND_ModelConfig");
    nlohmann::json config = message_json(message, /*owned=*/true);
    auto state = std::make_unique<ModelState>();
    state->name = name;
    state->options = options_from_config(config, location, version);
    state->io = describe_model(state->options);
    bool auto_complete = false;
    check(TRITONBACKEND_ModelAutoCompleteConfig(model, &auto_complete),
          "TRITONBACKEND_ModelAutoCompleteConfig");
    if (auto_complete && complete_io(config, state->io)) {
      const std::string text = config.dump();
      TRITONSERVER_Message* completed = nullptr;
      check(TRITONSERVER_MessageNewFromSerializedJson(&completed, text.data(), text.size()),
            "TRITONSERVER_MessageNewFromSerializedJson");
      TRITONSERVER_Error* err = TRITONBACKEND_ModelSetConfig(model, 1, completed);
      TRITONSERVER_MessageDelete(completed);
      check(err, "TRITONBACKEND_ModelSetConfig");
    }
    check_io(config, state->io);
    if (state->options.reserve_cores > 0) {
      state->reservation =
          g_backend->pool->reserve(cat("model '", name, "'"), state->options.reserve_cores);
    }
    log(TRITONSERVER_LOG_INFO,
        cat("stagecraft: model '", name, "' version ", version, ": ", state->options.source.spec,
            ", schedule ", state->options.schedule.describe(), ", max_batch_size ",
            state->options.max_batch_size, ", cores ",
            state->reservation ? cat(state->reservation->cores(), " reserved")
                               : (state->options.cores ? std::to_string(state->options.cores)
                                                       : std::string("all shared"))));
    check(TRITONBACKEND_ModelSetState(model, state.get()), "TRITONBACKEND_ModelSetState");
    state.release();
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  return delete_state<ModelState>(model, TRITONBACKEND_ModelState);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  const char* name = "?";
  TRITONBACKEND_ModelInstanceName(instance, &name);
  return guarded(cat("stagecraft instance '", name, "'"), [&] {
    TRITONSERVER_InstanceGroupKind kind = TRITONSERVER_INSTANCEGROUPKIND_CPU;
    check(TRITONBACKEND_ModelInstanceKind(instance, &kind), "TRITONBACKEND_ModelInstanceKind");
    if (kind != TRITONSERVER_INSTANCEGROUPKIND_CPU) {
      throw UsageError(
          "config.pbtxt instance_group: stagecraft's Triton backend runs on the CPU "
          "(use kind: KIND_CPU)");
    }
    TRITONBACKEND_Model* model = nullptr;
    check(TRITONBACKEND_ModelInstanceModel(instance, &model), "TRITONBACKEND_ModelInstanceModel");
    void* model_state = nullptr;
    check(TRITONBACKEND_ModelState(model, &model_state), "TRITONBACKEND_ModelState");
    auto state = std::make_unique<InstanceState>();
    state->name = name;
    state->model = static_cast<ModelState*>(model_state);
    state->runner = std::make_unique<ModelRunner>(state->model->options, *g_backend->pool,
                                                  state->model->reservation);
    for (int64_t batch : state->model->options.warmup_batch_sizes) {
      state->runner->prepare(batch);
      log(TRITONSERVER_LOG_INFO,
          cat("stagecraft: ", name, ": planned ", state->runner->last_plan_summary()));
    }
    check(TRITONBACKEND_ModelInstanceSetState(instance, state.get()),
          "TRITONBACKEND_ModelInstanceSetState");
    state.release();
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  return delete_state<InstanceState>(instance, TRITONBACKEND_ModelInstanceState);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                       TRITONBACKEND_Request** requests,
                                                       const uint32_t request_count) {
  // Every request gets a response and is released here; the function itself fails only when it
  // cannot even find its state (then the server answers the requests).
  void* raw = nullptr;
  if (TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceState(instance, &raw)) return err;
  auto& state = *static_cast<InstanceState*>(raw);
  const ModelState& model = *state.model;
  const uint64_t exec_start = now_ns();
  std::vector<Checked> checked(request_count);
  for (uint32_t r = 0; r < request_count; ++r) {
    Checked& c = checked[r];
    c.request = requests[r];
    if (TRITONSERVER_Error* err = TRITONBACKEND_ResponseNew(&c.response, c.request)) {
      log(TRITONSERVER_LOG_ERROR, cat("stagecraft: ", state.name, ": cannot make a response: ",
                                      TRITONSERVER_ErrorMessage(err)));
      TRITONSERVER_ErrorDelete(err);
      c.response = nullptr;
      c.error = "no response";
      continue;
    }
    try {
      check_request(model, c);
    } catch (const std::exception& e) {
      c.error = e.what();
    }
  }
  // Good requests in runs of at most max_batch_size samples of one input shape (one request per
  // run without a batch dimension).
  const uint64_t compute_start = now_ns();
  const int64_t max_batch = std::max<int64_t>(1, model.options.max_batch_size);
  std::vector<Checked*> group;
  int64_t in_group = 0;
  int64_t executed = 0;
  for (Checked& c : checked) {
    if (!c.error.empty()) continue;
    if (!group.empty() && (in_group + c.batch > max_batch || c.shapes != group.front()->shapes)) {
      run_group(state, group);
      group.clear();
      in_group = 0;
    }
    group.push_back(&c);
    in_group += c.batch;
    executed += c.batch;
  }
  if (!group.empty()) run_group(state, group);
  const uint64_t compute_end = now_ns();
  // Statistics before the responses: a client that asks for them after its answer sees them.
  const uint64_t exec_end = now_ns();
  for (Checked& c : checked) {
    TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceReportStatistics(
        instance, c.request, c.error.empty(), exec_start, compute_start, compute_end, exec_end);
    if (err) TRITONSERVER_ErrorDelete(err);
  }
  if (executed > 0) {
    TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceReportBatchStatistics(
        instance, static_cast<uint64_t>(executed), exec_start, compute_start, compute_end,
        exec_end);
    if (err) TRITONSERVER_ErrorDelete(err);
  }
  for (Checked& c : checked) {
    send(c, model.name);
    TRITONSERVER_Error* err =
        TRITONBACKEND_RequestRelease(c.request, TRITONSERVER_REQUEST_RELEASE_ALL);
    if (err) {
      log(TRITONSERVER_LOG_ERROR,
          cat("stagecraft: cannot release a request: ", TRITONSERVER_ErrorMessage(err)));
      TRITONSERVER_ErrorDelete(err);
    }
  }
  return nullptr;
}

}  // extern "C"
