#include "graph/layout_assignment.h"

#include "common/hash.h"
#include "common/strings.h"
#include "graph/errors.h"
#include "graph/graph.h"
#include "graph/yaml_io.h"

namespace stagecraft::graph {

LayoutAssignment LayoutAssignment::uniform(Layout layout) {
  if (layout_rank(layout) != 4) {
    throw GraphError(cat("layout '", to_string(layout), "' is not an activation layout (known: ",
                         "nchw, nhwc, nChw8c, nChw16c)"));
  }
  LayoutAssignment a;
  a.kind_ = Kind::kUniform;
  a.uniform_ = layout;
  return a;
}

LayoutAssignment LayoutAssignment::per_value(const Graph& graph, std::vector<Layout> layouts) {
  if (layouts.size() != graph.num_values()) {
    throw GraphError(cat("graph '", graph.name(), "': ", layouts.size(),
                         " per-value layouts for ", graph.num_values(), " values"));
  }
  return per_value(std::move(layouts), graph::graph_hash(graph));
}

LayoutAssignment LayoutAssignment::per_value(std::vector<Layout> layouts, std::string graph_hash) {
  LayoutAssignment a;
  a.kind_ = Kind::kPerValue;
  a.values_ = std::move(layouts);
  a.graph_hash_ = std::move(graph_hash);
  return a;
}

std::optional<Layout> LayoutAssignment::uniform_layout() const {
  if (kind_ == Kind::kUniform) return uniform_;
  return std::nullopt;
}

Layout LayoutAssignment::of(size_t v, Layout fallback) const {
  switch (kind_) {
    case Kind::kUniform: return uniform_;
    case Kind::kPerValue: return v < values_.size() ? values_[v] : fallback;
    case Kind::kBackendDefault: break;
  }
  return fallback;
}

Layout LayoutAssignment::uniform_or(Layout fallback) const {
  return kind_ == Kind::kUniform ? uniform_ : fallback;
}

std::string LayoutAssignment::name() const {
  switch (kind_) {
    case Kind::kUniform: return std::string(to_string(uniform_));
    case Kind::kPerValue: return "auto";
    case Kind::kBackendDefault: break;
  }
  return "";
}

std::string LayoutAssignment::key() const {
  switch (kind_) {
    case Kind::kUniform: return std::string(to_string(uniform_));
    case Kind::kPerValue: {
      Fnv1a hasher;
      for (Layout l : values_) hasher.add_int(static_cast<uint64_t>(l));
      return cat("values:", values_.size(), ":", hex64(hasher.digest()));
    }
    case Kind::kBackendDefault: break;
  }
  return "default";
}

void LayoutAssignment::check_fits(const Graph& graph) const {
  if (kind_ != Kind::kPerValue) return;
  if (values_.size() != graph.num_values() || graph_hash_ != graph::graph_hash(graph)) {
    throw GraphError(cat("per-value layouts chosen for another graph (hash ", graph_hash_,
                         ") do not fit graph '", graph.name(), "' (hash ", graph::graph_hash(graph),
                         "): choose layouts for this graph (--layout auto) or give one layout"));
  }
}

}  // namespace stagecraft::graph
