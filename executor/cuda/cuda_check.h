#pragma once
// Checks of every CUDA, cuDNN and cuBLAS call: a failure throws BackendError naming the
// statement, file:line and the library's error string. Internal to executor/cuda/.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>

#include "executor/backend.h"

namespace stagecraft::executor::cuda {

[[noreturn]] void fail_call(const char* library, const char* statement, const char* file, int line,
                            const std::string& error);

const char* cublas_error_string(cublasStatus_t status);

// Whether a library call succeeded, and its error string, for each library's status type.
inline bool status_ok(cudaError_t status) { return status == cudaSuccess; }
inline bool status_ok(cudnnStatus_t status) { return status == CUDNN_STATUS_SUCCESS; }
inline bool status_ok(cublasStatus_t status) { return status == CUBLAS_STATUS_SUCCESS; }
inline const char* status_string(cudaError_t status) { return cudaGetErrorString(status); }
inline const char* status_string(cudnnStatus_t status) { return cudnnGetErrorString(status); }
inline const char* status_string(cublasStatus_t status) { return cublas_error_string(status); }

}  // namespace stagecraft::executor::cuda

// The statement's result must convert to `status_type` (each library's check takes its own
// library's calls only); `text` is the statement as written, for the message.
#define STAGECRAFT_STATUS_CHECK(status_type, library, text, statement)      \
  do {                                                                      \
    const status_type stagecraft_status_ = (statement);                     \
    if (!::stagecraft::executor::cuda::status_ok(stagecraft_status_)) {     \
      ::stagecraft::executor::cuda::fail_call(                              \
          library, text, __FILE__, __LINE__,                                \
          ::stagecraft::executor::cuda::status_string(stagecraft_status_)); \
    }                                                                       \
  } while (0)

#define STAGECRAFT_CUDA_CHECK(statement) \
  STAGECRAFT_STATUS_CHECK(cudaError_t, "CUDA", #statement, statement)
#define STAGECRAFT_CUDNN_CHECK(statement) \
  STAGECRAFT_STATUS_CHECK(cudnnStatus_t, "cuDNN", #statement, statement)
#define STAGECRAFT_CUBLAS_CHECK(statement) \
  STAGECRAFT_STATUS_CHECK(cublasStatus_t, "cuBLAS", #statement, statement)

// After own kernel launches: catches launch configuration errors at once.
#define STAGECRAFT_CUDA_LAUNCHED() STAGECRAFT_CUDA_CHECK(cudaGetLastError())
