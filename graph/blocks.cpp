#include "graph/blocks.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dominator_tree.hpp>

#include "graph/poset.h"

namespace stagecraft::graph {

std::vector<OpId> cut_vertices(const Graph& graph) {
  using Dag = boost::adjacency_list<boost::listS, boost::vecS, boost::bidirectionalS>;
  using Vertex = boost::graph_traits<Dag>::vertex_descriptor;
  const int n = static_cast<int>(graph.num_ops());
  if (n == 0) return {};
  const int source = n;
  const int sink = n + 1;
  Dag dag(n + 2);
  for (const Op& op : graph.ops()) {
    const auto preds = graph.predecessors(op.id);
    if (preds.empty()) boost::add_edge(source, op.id, dag);
    for (OpId p : preds) boost::add_edge(p, op.id, dag);
    bool feeds_sink = graph.successors(op.id).empty();
    for (ValueId v : op.outputs) feeds_sink = feeds_sink || graph.is_output(v);
    if (feeds_sink) boost::add_edge(op.id, sink, dag);
  }

  std::vector<Vertex> idom(n + 2, boost::graph_traits<Dag>::null_vertex());
  auto index_map = boost::get(boost::vertex_index, dag);
  auto dom_map = boost::make_iterator_property_map(idom.begin(), index_map);
  boost::lengauer_tarjan_dominator_tree(dag, boost::vertex(source, dag), dom_map);

  std::vector<OpId> cuts;
  for (Vertex v = idom[sink]; v != boost::graph_traits<Dag>::null_vertex() &&
                              static_cast<int>(v) != source;
       v = idom[v]) {
    cuts.push_back(static_cast<OpId>(v));
  }
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

int max_width(const SubgraphView& view) {
  Adjacency successors(view.size());
  for (size_t i = 0; i < view.size(); ++i) {
    for (OpId s : view.successors(view.ops()[i])) successors[i].push_back(view.local_index(s));
  }
  return max_antichain_size(successors);
}

std::vector<Block> partition_blocks(const Graph& graph) {
  const std::vector<OpId> cuts = cut_vertices(graph);
  // block_of[op] = number of cut vertices that must run before it. Every op is an ancestor or a
  // descendant of each cut vertex, so this counts the cut vertices that are strict ancestors; in
  // topological order it is the largest block index among predecessors, +1 after a cut vertex.
  std::vector<int> is_cut(graph.num_ops(), 0);
  for (OpId c : cuts) is_cut[c] = 1;
  std::vector<int> block_of(graph.num_ops(), 0);
  int num_blocks = 0;
  for (OpId id : graph.topological_order()) {
    int index = 0;
    for (OpId p : graph.predecessors(id)) index = std::max(index, block_of[p] + is_cut[p]);
    block_of[id] = index;
    num_blocks = std::max(num_blocks, index + 1);
  }
  std::vector<Block> blocks(num_blocks);
  for (OpId id : graph.topological_order()) blocks[block_of[id]].ops.push_back(id);
  std::erase_if(blocks, [](const Block& b) { return b.ops.empty(); });
  for (Block& block : blocks) block.width = max_width(SubgraphView(graph, block.ops));
  return blocks;
}

}  // namespace stagecraft::graph
