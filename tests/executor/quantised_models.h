#pragma once
// Shared by the int8 tests (test_quantize.cpp, test_quantize_scales.cpp): running a graph on the
// CPU, quantising a model, a cosine, and a pre-activation dense block.
#include <cmath>
#include <vector>

#include "common/strings.h"
#include "executor/backend.h"
#include "executor/executor.h"
#include "graph/quantize.h"
#include "graph/weights.h"
#include "networks/builder.h"
#include "quant/calibration.h"
#include "support/models.h"

namespace stagecraft::executor {

// Graphs to be quantised keep their additions (int8 convolutions take no residual).
inline const graph::InferenceOptions kUnfused{.fuse_residual_adds = false};

inline std::vector<HostTensor> run(const graph::Graph& g, const graph::WeightStore& w, const scheduler::Schedule& s,
                            const std::vector<HostTensor>& inputs, PlanOptions options = {}) {
  ExecutionPlan plan(g, s, w, stagecraft::testing::cpu_backend(), options);
  Executor executor(plan);
  return executor.run(inputs);
}

inline stagecraft::testing::Model quantised(const stagecraft::testing::Model& m, int samples = 4) {
  quant::CalibrationOptions options;
  options.samples = samples;
  graph::QuantizeReport report;
  graph::Graph q = graph::quantize(m.graph, quant::calibrate(m.graph, m.weights, stagecraft::testing::cpu_backend(), options), &report);
  return stagecraft::testing::Model{std::move(q), graph::quantised_weights(m.graph, m.weights, report)};
}

// The cosine of two tensors' values.
inline double cosine(const HostTensor& a, const HostTensor& b) {
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    dot += static_cast<double>(a.data[i]) * b.data[i];
    na += static_cast<double>(a.data[i]) * a.data[i];
    nb += static_cast<double>(b.data[i]) * b.data[i];
  }
  return dot / std::sqrt(na * nb);
}

// A pre-activation dense block (DenseNet's: BN + ReLU over the concatenation so far, then a
// convolution), batch-norm statistics far from identity.
inline stagecraft::testing::Model dense_block() {
  networks::NetBuilder b("dense", 1, 16, 14, 14);
  graph::ValueId x = b.relu(b.conv(b.input(), networks::square_conv(16, 3, 1, 1, true), "stem"));
  for (int i = 0; i < 3; ++i) {
    const graph::ValueId y = b.conv(b.relu(b.bn(x, 1e-3, cat("bn", i))), networks::square_conv(8, 3, 1, 1), cat("c", i));
    x = b.concat({x, y}, cat("cat", i));
  }
  const graph::ValueId pooled = b.global_avg_pool(b.relu(b.bn(x, 1e-3, "bn_last")));
  stagecraft::testing::Model m = stagecraft::testing::model_of(std::move(b).finish({b.linear(b.flatten(pooled), 10)}), 1, kUnfused);
  for (const char* bn : {"bn0", "bn1", "bn2", "bn_last"}) {
    graph::OpWeights& w = m.weights[bn];
    for (size_t c = 0; c < w.gamma.size(); ++c) {
      const double t = static_cast<double>(c) / static_cast<double>(w.gamma.size());
      w.gamma[c] = static_cast<float>(0.5 + 1.5 * t);
      w.beta[c] = static_cast<float>(0.4 - 0.8 * t);
      w.mean[c] = static_cast<float>(0.3 * std::sin(7.0 * t));
      w.var[c] = static_cast<float>(0.4 + 2.0 * (1.0 - t));
    }
  }
  return m;
}

}  // namespace stagecraft::executor
