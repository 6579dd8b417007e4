// `stagecraft networks` and `stagecraft graph`.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/files.h"
#include "common/strings.h"
#include "graph/blocks.h"
#include "graph/dot.h"
#include "frontend/onnx/onnx_io.h"
#include "graph/passes.h"
#include "graph/quantize.h"
#include "graph/yaml_io.h"
#include "networks/registry.h"

namespace stagecraft::cli {

namespace {

struct GraphStats {
  size_t ops = 0;
  size_t convs = 0;
  int64_t macs = 0;
  int64_t params = 0;
  size_t blocks = 0;
  int max_width = 0;
  size_t largest_block = 0;
};

GraphStats stats_of(const graph::Graph& g, const std::vector<graph::Block>& blocks) {
  GraphStats s;
  s.ops = g.num_ops();
  s.convs = graph::count_ops(g, graph::OpKind::kConv2d);
  s.macs = graph::total_macs(g);
  s.params = graph::total_params(g);
  s.blocks = blocks.size();
  for (const auto& b : blocks) {
    s.max_width = std::max(s.max_width, b.width);
    s.largest_block = std::max(s.largest_block, b.ops.size());
  }
  return s;
}

void run_networks() {
  TextTable table({"name", "input", "ops", "convs", "MACs", "params", "blocks", "max width",
                   "description"},
                  {TextTable::kLeft, TextTable::kRight, TextTable::kRight, TextTable::kRight,
                   TextTable::kRight, TextTable::kRight, TextTable::kRight, TextTable::kRight,
                   TextTable::kLeft});
  for (const auto& info : networks::network_registry()) {
    const graph::Graph raw = networks::build_network(info.name);
    const graph::Graph g = graph::prepare_for_inference(raw);
    const GraphStats s = stats_of(g, graph::partition_blocks(g));
    table.add_row({info.name, cat(info.default_input_size), cat(s.ops), cat(s.convs),
                   si_count(static_cast<double>(s.macs)), si_count(static_cast<double>(s.params)),
                   cat(s.blocks), cat(s.max_width), info.description});
  }
  std::cout << table.render();
  std::cout << "ops are counted after batch-norm folding and activation fusion; MACs count "
               "convolutions and linear layers at batch 1.\n";
}

struct GraphOptions {
  GraphSource source;
  std::string onnx_path;
  std::string yaml_path;
  std::string dot_path;
  bool show_blocks = false;
};

void run_graph(const GraphOptions& options) {
  std::shared_ptr<const graph::OnnxTail> tail;
  const graph::Graph g = load_source(options.source, &tail);
  const auto blocks = graph::partition_blocks(g);
  const GraphStats s = stats_of(g, blocks);
  const auto& input = g.value(g.inputs().at(0)).desc;
  std::cout << g.name() << ": input " << input.to_string() << ", " << s.ops << " ops ("
            << s.convs << " convolutions), " << si_count(static_cast<double>(s.macs))
            << " MACs, " << si_count(static_cast<double>(s.params)) << " params\n";
  std::cout << s.blocks << " blocks, largest " << s.largest_block << " ops, max width "
            << s.max_width << "\n";
  if (tail) std::cout << "tail: " << tail->summary() << " (their output shapes depend on the data)\n";
  if (graph::is_quantised(g)) {
    size_t int8_values = 0;
    for (size_t v = 0; v < g.num_values(); ++v) {
      int8_values += graph::is_int8(g.value(static_cast<graph::ValueId>(v)).desc.dtype);
    }
    std::cout << "int8: " << int8_values << " of " << g.num_values()
              << " tensors are 8-bit (the others f32); conversions are identity ops\n";
  }
  if (options.show_blocks) {
    TextTable table({"block", "ops", "width", "first op", "last op"},
                    {TextTable::kRight, TextTable::kRight, TextTable::kRight});
    for (size_t i = 0; i < blocks.size(); ++i) {
      table.add_row({cat(i), cat(blocks[i].ops.size()), cat(blocks[i].width),
                     g.op(blocks[i].ops.front()).name, g.op(blocks[i].ops.back()).name});
    }
    std::cout << table.render();
  }
  if (!options.yaml_path.empty()) {
    graph::save_graph(g, options.yaml_path);
    std::cout << "wrote " << options.yaml_path << "\n";
  }
  if (!options.onnx_path.empty()) {
    if (tail) {
      throw UsageError(cat("--onnx: ", options.source.spec, " ends in ", tail->summary(),
                           "; the export writes the graph only, so it would lose them: keep the model's "
                           "own ONNX file"));
    }
    const Model model = load_model(options.source);
    graph::export_onnx(model.graph, model.weights, options.onnx_path);
    std::cout << "wrote " << options.onnx_path << " (ONNX opset 13, checked; weights seeded with "
              << options.source.seed << ")\n";
  }
  if (!options.dot_path.empty()) {
    write_text_file(options.dot_path, graph::graph_to_dot(g, blocks));
    std::cout << "wrote " << options.dot_path << " (render: dot -Tsvg " << options.dot_path
              << " -o graph.svg)\n";
  }
}

}  // namespace

void add_graph_commands(CLI::App& app) {
  CLI::App* networks = app.add_subcommand(
      "networks", "List the built-in networks: ops, convolutions, MACs, params, blocks, width");
  networks->callback([] { run_networks(); });

  auto options = std::make_shared<GraphOptions>();
  CLI::App* graph_cmd = app.add_subcommand(
      "graph", "Build or load a graph, print its summary, write it as YAML or Graphviz dot");
  add_source_options(*graph_cmd, options->source, /*onnx_flag=*/false);
  graph_cmd->add_option("--onnx", options->onnx_path,
                        "write the graph and its weights as an ONNX model to this file");
  graph_cmd->add_option("-o,--output", options->yaml_path, "write the graph as YAML to this file");
  graph_cmd->add_option("--dot", options->dot_path,
                        "write a Graphviz drawing (blocks as clusters) to this file");
  graph_cmd->add_flag("--blocks", options->show_blocks, "print the block table");
  graph_cmd->callback([options] { run_graph(*options); });
}

}  // namespace stagecraft::cli
