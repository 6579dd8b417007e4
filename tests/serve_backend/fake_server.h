#pragma once
// A stand-in for Triton's side of the C API (serve/triton/triton_api.h): just enough server for
// the backend's entry points to be called from a test — configs in, requests with tensors in any
// memory and buffer split, responses, statistics and releases recorded.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "serve/triton/triton_api.h"

struct TRITONSERVER_Error {
  TRITONSERVER_Error_Code code;
  std::string message;
};

struct TRITONSERVER_Message {
  std::string json;
};

struct TRITONBACKEND_Backend {
  TRITONSERVER_Message config{"{\"cmdline\":{}}"};
  void* state = nullptr;
};

struct TRITONBACKEND_Model {
  std::string name;
  uint64_t version = 1;
  std::string repository;  // the model's folder
  std::string config;      // JSON
  bool auto_complete = true;
  std::string set_config;  // what the backend set (auto-complete), "" if nothing
  void* state = nullptr;
};

struct TRITONBACKEND_ModelInstance {
  std::string name;
  TRITONSERVER_InstanceGroupKind kind = TRITONSERVER_INSTANCEGROUPKIND_CPU;
  TRITONBACKEND_Model* model = nullptr;
  void* state = nullptr;
  int statistics = 0;          // requests reported
  int successes = 0;           // of them, successful
  uint64_t batch_samples = 0;  // samples reported in batch statistics
};

struct TRITONBACKEND_Input {
  std::string name;
  TRITONSERVER_DataType type = TRITONSERVER_TYPE_FP32;
  std::vector<int64_t> shape;
  std::vector<std::vector<float>> buffers;  // the data, split as the test likes
  TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
};

struct TRITONBACKEND_Request {
  std::vector<TRITONBACKEND_Input> inputs;
  std::vector<std::string> outputs;  // requested ("" none: all)
  bool released = false;
};

struct TRITONBACKEND_Output {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

struct TRITONBACKEND_BackendAttribute {
  std::vector<TRITONSERVER_InstanceGroupKind> preferred;
};

struct TRITONBACKEND_Response {
  TRITONBACKEND_Request* request = nullptr;
  std::map<std::string, TRITONBACKEND_Output> outputs;
  bool sent = false;
  std::string error;  // "" when sent without one
};

namespace fake_server {
/// Every response made since the last clear(), in order.
std::vector<TRITONBACKEND_Response*>& responses();
/// Frees the responses.
void clear();
/// An error's message ("" for none), freeing it.
std::string take(TRITONSERVER_Error* error);
}  // namespace fake_server
