#pragma once
/// The CPU backend on oneDNN (2.x API). A stream is a worker thread with its own OpenMP team and
/// oneDNN stream; events are completion counters; every primitive uses a user-managed scratchpad
/// (the library-managed one is not safe when primitives run concurrently). Only this folder sees
/// oneDNN types.

#include <memory>

#include "executor/backend.h"

namespace stagecraft::executor {

/// A new CPU backend (of `config`, it reads `winograd`).
std::unique_ptr<Backend> make_cpu_backend(const BackendConfig& config = {});

}  // namespace stagecraft::executor
