// Calibration: value ranges of an f32 graph over sample inputs; agreement of two sets of logits.
#include "quant/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "common/strings.h"
#include "executor/executor.h"

namespace stagecraft::quant {

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
  executor::ExecutionPlan plan(all, scheduler::sequential_schedule(all), weights, backend);
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

namespace {

struct Rows {
  std::vector<std::vector<double>> rows;
};

// Every sample's outputs as rows (first dimension = samples within a tensor).
Rows rows_of(const std::vector<executor::HostTensor>& tensors) {
  Rows r;
  for (const executor::HostTensor& t : tensors) {
    const int64_t n = t.shape.rank() >= 1 ? std::max<int64_t>(t.shape[0], 1) : 1;
    const size_t cols = t.data.size() / static_cast<size_t>(n);
    for (int64_t i = 0; i < n; ++i) {
      const float* p = t.data.data() + static_cast<size_t>(i) * cols;
      r.rows.emplace_back(p, p + cols);
    }
  }
  return r;
}

void centre(Rows& r) {
  if (r.rows.empty()) return;
  std::vector<double> mean(r.rows[0].size(), 0.0);
  for (const auto& row : r.rows)
    for (size_t c = 0; c < row.size(); ++c) mean[c] += row[c] / static_cast<double>(r.rows.size());
  for (auto& row : r.rows)
    for (size_t c = 0; c < row.size(); ++c) row[c] -= mean[c];
}

LogitScores score(const Rows& got, const Rows& want) {
  LogitScores s;
  s.min_cosine = std::numeric_limits<double>::infinity();
  double sum = 0;
  int agree = 0;
  std::set<std::ptrdiff_t> classes;
  for (size_t i = 0; i < want.rows.size(); ++i) {
    const auto& p = got.rows[i];
    const auto& q = want.rows[i];
    double dot = 0, np = 0, nq = 0;
    for (size_t c = 0; c < q.size(); ++c) {
      dot += p[c] * q[c];
      np += p[c] * p[c];
      nq += q[c] * q[c];
    }
    const double cosine = np > 0 && nq > 0 ? dot / std::sqrt(np * nq) : (np == nq ? 1.0 : 0.0);
    s.min_cosine = std::min(s.min_cosine, cosine);
    sum += cosine;
    const std::ptrdiff_t want_class = std::max_element(q.begin(), q.end()) - q.begin();
    classes.insert(want_class);
    agree += std::max_element(p.begin(), p.end()) - p.begin() == want_class;
  }
  const double n = static_cast<double>(std::max<size_t>(want.rows.size(), 1));
  s.mean_cosine = sum / n;
  s.top1 = agree / n;
  s.distinct_top1 = static_cast<int>(classes.size());
  return s;
}

}  // namespace

Agreement compare_logits(const std::vector<executor::HostTensor>& got,
                         const std::vector<executor::HostTensor>& want) {
  if (got.size() != want.size()) {
    throw Error(cat("cannot compare ", got.size(), " outputs with ", want.size()));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].shape != want[i].shape) {
      throw Error(cat("cannot compare outputs of shapes ", got[i].shape.to_string(), " and ",
                      want[i].shape.to_string()));
    }
  }
  Rows g = rows_of(got), w = rows_of(want);
  Agreement a;
  a.samples = static_cast<int>(w.rows.size());
  if (a.samples == 0) return a;
  a.raw = score(g, w);
  centre(g);
  centre(w);
  a.centred = score(g, w);
  return a;
}

Agreement compare_on_random_inputs(executor::Executor& got, executor::Executor& want,
                                   const graph::Graph& graph, int samples, uint64_t seed) {
  std::vector<executor::HostTensor> got_outputs, want_outputs;
  const auto& inputs_of = graph.inputs();
  for (int i = 0; i < samples; ++i) {
    std::vector<executor::HostTensor> inputs;
    for (size_t k = 0; k < inputs_of.size(); ++k) {
      inputs.push_back(executor::random_host_tensor(graph.value(inputs_of[k]).desc.shape,
                                                    static_cast<uint64_t>(i) * 31 + k + seed));
    }
    want_outputs.push_back(want.run(inputs).at(0));
    got_outputs.push_back(got.run(inputs).at(0));
  }
  return compare_logits(got_outputs, want_outputs);
}

std::vector<ValueError> value_errors(const graph::Graph& f32, const graph::WeightStore& f32_weights,
                                     const graph::Graph& int8, const graph::WeightStore& int8_weights,
                                     executor::Backend& backend,
                                     const std::vector<executor::HostTensor>& inputs) {
  auto run_all = [&](const graph::Graph& g, const graph::WeightStore& w) {
    const graph::Graph all = every_value_out(g);
    executor::ExecutionPlan plan(all, scheduler::sequential_schedule(all), w, backend);
    executor::Executor executor(plan);
    std::vector<executor::HostTensor> values = executor.run(inputs);
    std::vector<executor::HostTensor> by_id(g.num_values());  // every_value_out's order -> value ids
    for (size_t k = 0; k < values.size(); ++k) by_id[static_cast<size_t>(all.outputs()[k])] = std::move(values[k]);
    return by_id;
  };
  const std::vector<executor::HostTensor> want = run_all(f32, f32_weights);
  const std::vector<executor::HostTensor> got = run_all(int8, int8_weights);
  std::vector<bool> per_channel(int8.num_values(), false);
  std::vector<double> relative(int8.num_values(), 0.0);
  std::vector<ValueError> errors;
  for (size_t v = 0; v < int8.num_values(); ++v) {
    const graph::Value& value = int8.value(static_cast<graph::ValueId>(v));
    const graph::Op* op = value.producer == graph::kNoOp ? nullptr : &int8.op(value.producer);
    if (op && op->kind == graph::OpKind::kConcat && op->attrs_as<graph::ConcatAttrs>().part_scales) per_channel[v] = true;
    if (op && graph::keeps_scale(op->kind) && per_channel[static_cast<size_t>(op->inputs[0])]) per_channel[v] = true;
    double inherited = 0;  // the largest relative error of the op's inputs
    if (op)
      for (graph::ValueId in : op->inputs) inherited = std::max(inherited, relative[static_cast<size_t>(in)]);
    const auto match = f32.find_value(value.name);
    if (per_channel[v] || !match) {
      relative[v] = inherited;  // a conversion, or a value left out: passed on as its inputs' error
      continue;
    }
    const std::vector<float>& a = got[v].data;
    const std::vector<float>& b = want[static_cast<size_t>(*match)].data;
    if (a.size() != b.size()) continue;
    // A u8 value read only through ReLU holds the f32 value's positive part (read_through_relu
    // in graph/quantize.cpp); for any other u8 value the f32 one is >= 0 anyway.
    const bool positive_part = value.desc.dtype == graph::DataType::kU8;
    double diff = 0, norm = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const double f = positive_part ? std::max(0.0, static_cast<double>(b[i])) : b[i];
      diff += (a[i] - f) * (a[i] - f);
      norm += f * f;
    }
    relative[v] = std::sqrt(diff / std::max(norm, 1e-300));
    errors.push_back({value.name, op ? std::string(graph::to_string(op->kind)) : "input", relative[v],
                      relative[v] - inherited});
  }
  return errors;
}

}  // namespace stagecraft::quant
