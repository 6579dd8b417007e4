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

}  // namespace stagecraft::executor::cuda

#define STAGECRAFT_CUDA_CHECK(statement)                                                       \
  do {                                                                                         \
    const cudaError_t stagecraft_status_ = (statement);                                        \
    if (stagecraft_status_ != cudaSuccess) {                                                   \
      ::stagecraft::executor::cuda::fail_call("CUDA", #statement, __FILE__, __LINE__,         \
                                              cudaGetErrorString(stagecraft_status_));         \
    }                                                                                          \
  } while (0)

#define STAGECRAFT_CUDNN_CHECK(statement)                                                      \
  do {                                                                                         \
    const cudnnStatus_t stagecraft_status_ = (statement);                                      \
    if (stagecraft_status_ != CUDNN_STATUS_SUCCESS) {                                          \
      ::stagecraft::executor::cuda::fail_call("cuDNN", #statement, __FILE__, __LINE__,        \
                                              cudnnGetErrorString(stagecraft_status_));        \
    }                                                                                          \
  } while (0)

#define STAGECRAFT_CUBLAS_CHECK(statement)                                                     \
  do {                                                                                         \
    const cublasStatus_t stagecraft_status_ = (statement);                                     \
    if (stagecraft_status_ != CUBLAS_STATUS_SUCCESS) {                                         \
      ::stagecraft::executor::cuda::fail_call(                                                 \
          "cuBLAS", #statement, __FILE__, __LINE__,                                            \
          ::stagecraft::executor::cuda::cublas_error_string(stagecraft_status_));              \
    }                                                                                          \
  } while (0)

// After own kernel launches: catches launch configuration errors at once.
#define STAGECRAFT_CUDA_LAUNCHED() STAGECRAFT_CUDA_CHECK(cudaGetLastError())
