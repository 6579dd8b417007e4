#pragma once
/// The one value a layout decision travels as: the layouts a graph's rank-4 activations run in.
/// Either the backend's default for all of them, one layout for all (uniform), or one layout per
/// value (the layout DP's choice under `--layout auto`), the last tied to its graph by the graph's
/// content hash. The pipeline (session/pipeline.h) decides it once per graph and hands the same
/// value to the schedule search (the cost model measures stages in it; it is part of the profile
/// and schedule cache keys), to the schedule (recorded in it and in its file) and to the plan.
///
/// Example:
///   LayoutAssignment nhwc = LayoutAssignment::uniform(Layout::kNHWC);
///   LayoutAssignment mixed = LayoutAssignment::per_value(graph, layouts);  // layouts[v] by value id
///   Layout l = mixed.of(v, backend_layout);   // what value v runs in
///   mixed.check_fits(other_graph);             // GraphError: chosen for another graph

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/types.h"

namespace stagecraft::graph {

class Graph;

/// The layouts of a graph's rank-4 activations (see the file comment).
class LayoutAssignment {
 public:
  enum class Kind : uint8_t {
    kBackendDefault,  ///< the backend's preferred layout for the graph's element type
    kUniform,         ///< one layout for every rank-4 activation
    kPerValue,        ///< one layout per value (graph inputs keep theirs)
  };

  /// The backend's default.
  LayoutAssignment() = default;
  /// One rank-4 layout for all; throws GraphError for a layout of another rank.
  static LayoutAssignment uniform(Layout layout);
  /// One layout per value of `graph` (by value id); throws GraphError when the count differs.
  static LayoutAssignment per_value(const Graph& graph, std::vector<Layout> layouts);
  /// One layout per value of the graph whose content hash is `graph_hash` (a schedule file).
  static LayoutAssignment per_value(std::vector<Layout> layouts, std::string graph_hash);

  Kind kind() const { return kind_; }
  bool is_backend_default() const { return kind_ == Kind::kBackendDefault; }
  bool is_per_value() const { return kind_ == Kind::kPerValue; }
  /// The uniform layout, when uniform.
  std::optional<Layout> uniform_layout() const;
  /// The per-value layouts by value id (empty unless per-value).
  const std::vector<Layout>& per_value() const { return values_; }
  /// The content hash of the graph a per-value assignment was made for ("" otherwise).
  const std::string& graph_hash() const { return graph_hash_; }

  /// The layout value `v` runs in, given the layout the backend uses by default (`fallback`).
  Layout of(size_t v, Layout fallback) const;
  /// The layout uniform and default assignments give every activation: the uniform one, else
  /// `fallback`. A per-value assignment answers `fallback` (its values decide one by one).
  Layout uniform_or(Layout fallback) const;

  /// The name recorded in schedules and reports: "" (default), a layout name, or "auto".
  std::string name() const;
  /// Stable text of the whole assignment for cache keys: "default", a layout name, or
  /// "values:<count>:<hash of the list>".
  std::string key() const;
  /// Throws GraphError when a per-value assignment was made for a graph of other content.
  void check_fits(const Graph& graph) const;

  bool operator==(const LayoutAssignment&) const = default;

 private:
  Kind kind_ = Kind::kBackendDefault;
  Layout uniform_ = Layout::kNCHW;
  std::vector<Layout> values_;
  std::string graph_hash_;
};

}  // namespace stagecraft::graph
