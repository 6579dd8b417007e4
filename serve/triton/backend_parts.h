#pragma once
// Internal to libtriton_stagecraft.so (backend.cpp: the entry points; requests.cpp: checking,
// running and answering requests): the server's failures as exceptions, the states the entry
// points keep, and a request as checked against its model.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/strings.h"
#include "serve/core_pool.h"
#include "serve/model_runner.h"
#include "serve/triton/triton_api.h"

namespace stagecraft::serve::triton {

// A failed call of the server's API (its message), thrown inside the backend only.
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
inline void check(TRITONSERVER_Error* err, const char* call) {
  if (!err) return;
  TritonFailure failure(TRITONSERVER_ErrorCode(err),
                        cat(call, ": ", TRITONSERVER_ErrorMessage(err)));
  TRITONSERVER_ErrorDelete(err);
  throw failure;
}

// Writes `message` to the server's log at `level` (when enabled).
inline void log(TRITONSERVER_LogLevel level, const std::string& message) {
  if (!TRITONSERVER_LogIsEnabled(level)) return;
  TRITONSERVER_Error* err = TRITONSERVER_LogMessage(level, __FILE__, __LINE__, message.c_str());
  if (err) TRITONSERVER_ErrorDelete(err);
}

// ---- State -------------------------------------------------------------------------------------

// A model (TRITONBACKEND_ModelInitialize to ModelFinalize): its options, inputs and outputs.
struct ModelState {
  std::string name;
  ServeOptions options;
  ModelIo io;
  std::shared_ptr<CorePool::Reservation> reservation;
};

// One instance of a model (ModelInstanceInitialize to ModelInstanceFinalize) and its runner.
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

/// Fills `c.batch`, `c.shapes` and `c.buffers` from its request, or `c.error` with one line.
void check_request(const ModelState& model, Checked& c);
/// Runs the good requests of `group` (at most max_batch_size samples in all, one input shape)
/// and writes their outputs, or each one's error.
void run_group(InstanceState& instance, std::vector<Checked*>& group);
/// Sends c's response (with its error, if any) and forgets it.
void send(Checked& c, const std::string& model_name);

}  // namespace stagecraft::serve::triton
