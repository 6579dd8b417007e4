// libtriton_stagecraft.so's requests: each checked against its model (one line for a bad one),
// the good ones joined into runs of at most max_batch_size samples, run on the instance's
// ModelRunner, and their outputs (or errors) written into their responses.
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "serve/triton/backend_parts.h"

namespace stagecraft::serve::triton {
namespace {

const char* type_name(TRITONSERVER_DataType t) {
  static const char* names[] = {"INVALID", "BOOL", "UINT8", "UINT16", "UINT32",
                                "UINT64",  "INT8", "INT16", "INT32",  "INT64",
                                "FP16",    "FP32", "FP64",  "BYTES",  "BF16"};
  const auto i = static_cast<size_t>(t);
  return i < std::size(names) ? names[i] : "unknown";
}

std::string dims_text(const int64_t* dims, uint32_t n) {
  return cat("[", join(std::span<const int64_t>(dims, n), ", "), "]");
}

}  // namespace

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

namespace {

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

void run_group(InstanceState& instance, std::vector<Checked*>& group) {
  try {
    run_group_or_throw(instance, group);
  } catch (const std::exception& e) {  // out of memory for the staging buffers, say
    for (Checked* c : group) {
      if (c->error.empty()) c->error = e.what();
    }
  }
}

}  // namespace stagecraft::serve::triton
