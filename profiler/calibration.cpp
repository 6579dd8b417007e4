// Calibration: value ranges of an f32 graph over sample inputs; agreement of two sets of logits.
#include "profiler/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "common/strings.h"
#include "executor/plan.h"

namespace stagecraft::profiler {

namespace {

constexpr double kMinPercentile = 50;
constexpr double kMaxPercentile = 100;

// The graph with every value an output (the order of values), so one run yields them all.
graph::Graph every_value_out(const graph::Graph& g) {
  graph::Graph all = g;
  for (size_t v = 0; v < g.num_values(); ++v) all.add_output(static_cast<graph::ValueId>(v));
  return all;
}

double magnitude_at(std::vector<float> data, double percentile) {
  if (data.empty()) return 0;
  for (float& x : data) x = std::fabs(x);
  if (percentile >= kMaxPercentile) return *std::max_element(data.begin(), data.end());
  const auto k = static_cast<size_t>(std::floor(percentile / 100.0 * static_cast<double>(data.size() - 1)));
  std::nth_element(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(k), data.end());
  return data[k];
}

}  // namespace

graph::Calibration calibrate(const graph::Graph& graph, const graph::WeightStore& weights,
                             executor::Backend& backend, const CalibrationOptions& options) {
  const int samples = options.inputs.empty() ? options.samples
                                             : static_cast<int>(options.inputs.size());
  if (samples < 1) {
    throw UsageError(cat("calibration needs at least one sample (got ", samples,
                         "): pass --samples N with N >= 1, or input files"));
  }
  if (options.method != "minmax" && options.method != "percentile") {
    throw UsageError(cat("unknown calibration method '", options.method,
                         "' (known: minmax, percentile)"));
  }
  const double percentile = options.method == "minmax" ? kMaxPercentile : options.percentile;
  if (!(percentile >= kMinPercentile && percentile <= kMaxPercentile)) {
    throw UsageError(cat("the calibration percentile must be in [50, 100] (got ", percentile, ")"));
  }
  for (graph::ValueId v : graph.inputs()) {
    if (graph.value(v).desc.dtype != graph::DataType::kF32) {
      throw UsageError(cat("calibration runs the f32 graph, but input '", graph.value(v).name,
                           "' is ", graph::to_string(graph.value(v).desc.dtype)));
    }
  }

  const graph::Graph all = every_value_out(graph);
  scheduler::Schedule sequential;
  for (const graph::Op& op : all.ops()) sequential.stages.push_back(scheduler::Stage::concurrent({{op.id}}));
  executor::ExecutionPlan plan(all, sequential, weights, backend);
  executor::Executor executor(plan);

  graph::Calibration cal;
  cal.network = graph.name();
  cal.method = options.method;
  cal.percentile = percentile;
  cal.samples = samples;
  std::vector<graph::ValueRange> ranges(graph.num_values());
  for (auto& r : ranges) {
    r.min = std::numeric_limits<double>::infinity();
    r.max = -std::numeric_limits<double>::infinity();
  }
  for (int s = 0; s < samples; ++s) {
    std::vector<executor::HostTensor> inputs;
    if (!options.inputs.empty()) {
      inputs = options.inputs[static_cast<size_t>(s)];
    } else {
      for (size_t i = 0; i < graph.inputs().size(); ++i) {
        inputs.push_back(executor::random_host_tensor(graph.value(graph.inputs()[i]).desc.shape,
                                                      options.seed + static_cast<uint64_t>(s) * 7919 + i));
      }
    }
    const std::vector<executor::HostTensor> values = executor.run(inputs);
    // Outputs of `all`: the graph's own outputs first (add_output keeps the first mention), then
    // the remaining values in id order.
    for (size_t k = 0; k < values.size(); ++k) {
      const graph::ValueId v = all.outputs()[k];
      const std::vector<float>& data = values[k].data;
      graph::ValueRange& r = ranges[static_cast<size_t>(v)];
      for (float x : data) {
        r.min = std::min(r.min, static_cast<double>(x));
        r.max = std::max(r.max, static_cast<double>(x));
      }
      r.absmax = std::max(r.absmax, magnitude_at(data, percentile));
    }
    if (options.progress) options.progress(s + 1, samples);
  }
  for (size_t v = 0; v < graph.num_values(); ++v) {
    cal.values.emplace(graph.value(static_cast<graph::ValueId>(v)).name, ranges[v]);
  }
  return cal;
}

Agreement compare_logits(const std::vector<executor::HostTensor>& got,
                         const std::vector<executor::HostTensor>& want) {
  Agreement a;
  a.min_cosine = std::numeric_limits<double>::infinity();
  double sum_cosine = 0;
  int agree = 0;
  std::set<std::ptrdiff_t> classes;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const executor::HostTensor& x = got[i];
    const executor::HostTensor& y = want[i];
    if (x.shape != y.shape) {
      throw Error(cat("cannot compare outputs of shapes ", x.shape.to_string(), " and ",
                      y.shape.to_string()));
    }
    const int64_t rows = x.shape.rank() >= 1 ? x.shape[0] : 1;
    const size_t cols = x.data.size() / static_cast<size_t>(std::max<int64_t>(rows, 1));
    for (int64_t r = 0; r < rows; ++r) {
      const float* p = x.data.data() + static_cast<size_t>(r) * cols;
      const float* q = y.data.data() + static_cast<size_t>(r) * cols;
      double dot = 0, nx = 0, ny = 0;
      for (size_t c = 0; c < cols; ++c) {
        dot += static_cast<double>(p[c]) * q[c];
        nx += static_cast<double>(p[c]) * p[c];
        ny += static_cast<double>(q[c]) * q[c];
      }
      const double cosine = nx > 0 && ny > 0 ? dot / std::sqrt(nx * ny) : (nx == ny ? 1.0 : 0.0);
      a.min_cosine = std::min(a.min_cosine, cosine);
      sum_cosine += cosine;
      const std::ptrdiff_t want_class = std::max_element(q, q + cols) - q;
      classes.insert(want_class);
      agree += std::max_element(p, p + cols) - p == want_class;
      ++a.samples;
    }
  }
  if (a.samples == 0) return Agreement{};
  a.mean_cosine = sum_cosine / a.samples;
  a.top1 = static_cast<double>(agree) / a.samples;
  a.distinct_top1 = static_cast<int>(classes.size());
  return a;
}

}  // namespace stagecraft::profiler
