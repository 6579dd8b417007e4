// The stand-in server's functions (see fake_server.h).
#include "fake_server.h"

#include <cstring>

namespace {

TRITONSERVER_Error* fail(TRITONSERVER_Error_Code code, const std::string& message) {
  return new TRITONSERVER_Error{code, message};
}

}  // namespace

namespace fake_server {

std::vector<TRITONBACKEND_Response*>& responses() {
  static std::vector<TRITONBACKEND_Response*> all;
  return all;
}

void clear() {
  for (TRITONBACKEND_Response* r : responses()) delete r;
  responses().clear();
}

std::string take(TRITONSERVER_Error* error) {
  if (!error) return "";
  std::string message = error->message;
  delete error;
  return message;
}

}  // namespace fake_server

extern "C" {

TRITONSERVER_Error* TRITONSERVER_ErrorNew(TRITONSERVER_Error_Code code, const char* msg) {
  return fail(code, msg);
}
void TRITONSERVER_ErrorDelete(TRITONSERVER_Error* error) { delete error; }
TRITONSERVER_Error_Code TRITONSERVER_ErrorCode(TRITONSERVER_Error* error) { return error->code; }
const char* TRITONSERVER_ErrorMessage(TRITONSERVER_Error* error) { return error->message.c_str(); }

TRITONSERVER_Error* TRITONSERVER_MessageNewFromSerializedJson(TRITONSERVER_Message** message,
                                                              const char* base, size_t byte_size) {
  *message = new TRITONSERVER_Message{std::string(base, byte_size)};
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_MessageDelete(TRITONSERVER_Message* message) {
  delete message;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_MessageSerializeToJson(TRITONSERVER_Message* message,
                                                        const char** base, size_t* byte_size) {
  *base = message->json.data();
  *byte_size = message->json.size();
  return nullptr;
}

bool TRITONSERVER_LogIsEnabled(TRITONSERVER_LogLevel) { return false; }
TRITONSERVER_Error* TRITONSERVER_LogMessage(TRITONSERVER_LogLevel, const char*, const int,
                                            const char*) {
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ApiVersion(uint32_t* major, uint32_t* minor) {
  *major = 1;
  *minor = 19;  // Triton 2.51's
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_BackendName(TRITONBACKEND_Backend*, const char** name) {
  *name = "stagecraft";
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_BackendConfig(TRITONBACKEND_Backend* backend,
                                                TRITONSERVER_Message** backend_config) {
  *backend_config = &backend->config;  // the server's: the backend must not free it
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelName(TRITONBACKEND_Model* model, const char** name) {
  *name = model->name.c_str();
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ModelVersion(TRITONBACKEND_Model* model, uint64_t* version) {
  *version = model->version;
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ModelRepository(TRITONBACKEND_Model* model,
                                                  TRITONBACKEND_ArtifactType* artifact_type,
                                                  const char** location) {
  *artifact_type = TRITONBACKEND_ARTIFACT_FILESYSTEM;
  *location = model->repository.c_str();
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ModelConfig(TRITONBACKEND_Model* model, const uint32_t,
                                              TRITONSERVER_Message** model_config) {
  *model_config = new TRITONSERVER_Message{model->config};  // the caller's
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ModelAutoCompleteConfig(TRITONBACKEND_Model* model,
                                                          bool* auto_complete_config) {
  *auto_complete_config = model->auto_complete;
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ModelSetConfig(TRITONBACKEND_Model* model, const uint32_t,
                                                 TRITONSERVER_Message* model_config) {
  model->set_config = model_config->json;
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ModelSetState(TRITONBACKEND_Model* model, void* state) {
  model->state = state;
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ModelState(TRITONBACKEND_Model* model, void** state) {
  *state = model->state;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceName(TRITONBACKEND_ModelInstance* instance,
                                                    const char** name) {
  *name = instance->name.c_str();
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceKind(TRITONBACKEND_ModelInstance* instance,
                                                    TRITONSERVER_InstanceGroupKind* kind) {
  *kind = instance->kind;
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceModel(TRITONBACKEND_ModelInstance* instance,
                                                     TRITONBACKEND_Model** model) {
  *model = instance->model;
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceSetState(TRITONBACKEND_ModelInstance* instance,
                                                        void* state) {
  instance->state = state;
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceState(TRITONBACKEND_ModelInstance* instance,
                                                     void** state) {
  *state = instance->state;
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportStatistics(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request*, const bool success,
    const uint64_t, const uint64_t, const uint64_t, const uint64_t) {
  ++instance->statistics;
  instance->successes += success ? 1 : 0;
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportBatchStatistics(
    TRITONBACKEND_ModelInstance* instance, const uint64_t batch_size, const uint64_t,
    const uint64_t, const uint64_t, const uint64_t) {
  instance->batch_samples += batch_size;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestId(TRITONBACKEND_Request*, const char** id) {
  *id = "";
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_RequestInputCount(TRITONBACKEND_Request* request,
                                                    uint32_t* count) {
  *count = static_cast<uint32_t>(request->inputs.size());
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_RequestInputByIndex(TRITONBACKEND_Request* request,
                                                      const uint32_t index,
                                                      TRITONBACKEND_Input** input) {
  if (index >= request->inputs.size()) return fail(TRITONSERVER_ERROR_INVALID_ARG, "input index");
  *input = &request->inputs[index];
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_RequestOutputCount(TRITONBACKEND_Request* request,
                                                     uint32_t* count) {
  *count = static_cast<uint32_t>(request->outputs.size());
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_RequestOutputName(TRITONBACKEND_Request* request,
                                                    const uint32_t index,
                                                    const char** output_name) {
  *output_name = request->outputs.at(index).c_str();
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_RequestRelease(TRITONBACKEND_Request* request, uint32_t flags) {
  if (flags != TRITONSERVER_REQUEST_RELEASE_ALL) return fail(TRITONSERVER_ERROR_INTERNAL, "flags");
  if (request->released) return fail(TRITONSERVER_ERROR_INTERNAL, "released twice");
  request->released = true;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_InputProperties(TRITONBACKEND_Input* input, const char** name,
                                                  TRITONSERVER_DataType* datatype,
                                                  const int64_t** shape, uint32_t* dims_count,
                                                  uint64_t* byte_size, uint32_t* buffer_count) {
  *name = input->name.c_str();
  *datatype = input->type;
  *shape = input->shape.data();
  *dims_count = static_cast<uint32_t>(input->shape.size());
  uint64_t bytes = 0;
  for (const auto& b : input->buffers) bytes += b.size() * sizeof(float);
  *byte_size = bytes;
  *buffer_count = static_cast<uint32_t>(input->buffers.size());
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_InputBuffer(TRITONBACKEND_Input* input, const uint32_t index,
                                              const void** buffer, uint64_t* buffer_byte_size,
                                              TRITONSERVER_MemoryType* memory_type,
                                              int64_t* memory_type_id) {
  const auto& b = input->buffers.at(index);
  *buffer = b.data();
  *buffer_byte_size = b.size() * sizeof(float);
  *memory_type = input->memory;
  *memory_type_id = 0;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseNew(TRITONBACKEND_Response** response,
                                              TRITONBACKEND_Request* request) {
  *response = new TRITONBACKEND_Response{request, {}, false, ""};
  fake_server::responses().push_back(*response);
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ResponseDelete(TRITONBACKEND_Response*) { return nullptr; }
TRITONSERVER_Error* TRITONBACKEND_ResponseOutput(TRITONBACKEND_Response* response,
                                                 TRITONBACKEND_Output** output, const char* name,
                                                 const TRITONSERVER_DataType datatype,
                                                 const int64_t* shape, const uint32_t dims_count) {
  if (datatype != TRITONSERVER_TYPE_FP32) return fail(TRITONSERVER_ERROR_INTERNAL, "not FP32");
  TRITONBACKEND_Output& out = response->outputs[name];
  out.shape.assign(shape, shape + dims_count);
  *output = &out;
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_OutputBuffer(TRITONBACKEND_Output* output, void** buffer,
                                               const uint64_t buffer_byte_size,
                                               TRITONSERVER_MemoryType* memory_type,
                                               int64_t* memory_type_id) {
  output->data.assign(buffer_byte_size / sizeof(float), -1.0f);
  *buffer = output->data.data();
  *memory_type = TRITONSERVER_MEMORY_CPU;
  *memory_type_id = 0;
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ResponseSend(TRITONBACKEND_Response* response,
                                               const uint32_t send_flags,
                                               TRITONSERVER_Error* error) {
  if (send_flags != TRITONSERVER_RESPONSE_COMPLETE_FINAL)
    return fail(TRITONSERVER_ERROR_INTERNAL, "flags");
  if (response->sent) return fail(TRITONSERVER_ERROR_INTERNAL, "sent twice");
  response->sent = true;
  if (error) response->error = error->message;  // the backend keeps (and frees) its error
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup(
    TRITONBACKEND_BackendAttribute* backend_attributes, const TRITONSERVER_InstanceGroupKind kind,
    const uint64_t, const uint64_t*, const uint64_t) {
  backend_attributes->preferred.push_back(kind);
  return nullptr;
}

}  // extern "C"
