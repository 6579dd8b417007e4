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
// line, so that the server keeps serving (serve/triton/requests.cpp).
//
// Errors thrown by stagecraft (one line) become TRITONSERVER_Errors; nothing is thrown across the
// C API.
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/strings.h"
#include "serve/core_pool.h"
#include "serve/model_runner.h"
#include "serve/triton/backend_parts.h"
#include "serve/triton/model_config.h"
#include "serve/triton/triton_api.h"

namespace stagecraft::serve::triton {
namespace {

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

// ---- State -------------------------------------------------------------------------------------

struct BackendState {
  std::unique_ptr<CorePool> pool;
};
BackendState* g_backend = nullptr;  // between TRITONBACKEND_Initialize and Finalize

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
