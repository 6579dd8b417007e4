#pragma once
// For tests that build small graphs by hand and then name their ops. Header-only, so that every
// test program can include it (as "tests/support/graph_ops.h"), not only those linking models.cpp.

#include <string>
#include <tuple>

#include "graph/graph.h"

namespace stagecraft::testing {

/// The ids of the ops with these names, in order (throws std::bad_optional_access when one is
/// missing), e.g. std::tie(conv, relu) = op_ids(g, "conv", "relu").
template <class... Names>
auto op_ids(const graph::Graph& g, const Names&... names) {
  return std::make_tuple(g.find_op(names).value()...);
}

}  // namespace stagecraft::testing
