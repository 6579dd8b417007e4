// Block partition and widths on hand-made graphs with known answers, and chain covers.
#include <gtest/gtest.h>

#include "graph/blocks.h"
#include "graph/poset.h"
#include "networks/builder.h"

namespace stagecraft::graph {
namespace {

using networks::NetBuilder;

std::vector<std::vector<std::string>> block_names(const Graph& g,
                                                  const std::vector<Block>& blocks) {
  std::vector<std::vector<std::string>> names;
  for (const auto& b : blocks) {
    names.emplace_back();
    for (OpId id : b.ops) names.back().push_back(g.op(id).name);
  }
  return names;
}

TEST(Blocks, ChainIsOneBlockPerOp) {
  NetBuilder nb("chain", 1, 2, 4, 4);
  ValueId x = nb.relu(nb.input(), "a");
  x = nb.relu(x, "b");
  x = nb.relu(x, "c");
  Graph g = std::move(nb).finish({x});
  const auto blocks = partition_blocks(g);
  EXPECT_EQ(block_names(g, blocks),
            (std::vector<std::vector<std::string>>{{"a"}, {"b"}, {"c"}}));
  for (const auto& b : blocks) EXPECT_EQ(b.width, 1);
}

TEST(Blocks, InceptionLikeModuleEndsAtItsConcat) {
  // stem -> {b1, b2a -> b2b, pool} -> cat -> head
  NetBuilder nb("module", 1, 4, 8, 8);
  ValueId stem = nb.relu(nb.input(), "stem");
  ValueId b1 = nb.relu(stem, "b1");
  ValueId b2 = nb.relu(nb.relu(stem, "b2a"), "b2b");
  ValueId p = nb.max_pool(stem, 3, 1, 1, false, "pool");
  ValueId cat = nb.concat({b1, b2, p}, "cat");
  ValueId head = nb.relu(cat, "head");
  Graph g = std::move(nb).finish({head});
  const auto blocks = partition_blocks(g);
  EXPECT_EQ(block_names(g, blocks),
            (std::vector<std::vector<std::string>>{
                {"stem"}, {"b1", "b2a", "b2b", "pool", "cat"}, {"head"}}));
  EXPECT_EQ(blocks[1].width, 3);
  EXPECT_EQ(cut_vertices(g), (std::vector<OpId>{0, 5, 6}));
}

TEST(Blocks, SkipConnectionsMergeCellsIntoOneBlock) {
  // Like NASNet: cell2 reads cell1 and cell0, so cell1 is not a cut vertex.
  NetBuilder nb("cells", 1, 4, 8, 8);
  ValueId c0 = nb.relu(nb.input(), "c0");
  ValueId c1 = nb.relu(c0, "c1");
  ValueId c2 = nb.add({c1, c0}, "c2");
  ValueId c3 = nb.relu(c2, "c3");
  Graph g = std::move(nb).finish({c3});
  EXPECT_EQ(block_names(g, partition_blocks(g)),
            (std::vector<std::vector<std::string>>{{"c0"}, {"c1", "c2"}, {"c3"}}));
}

TEST(Blocks, TwoOutputsAndADeadBranch) {
  // a -> b (output), a -> c (dead end, no readers, not an output): a is the only cut vertex.
  NetBuilder nb("outs", 1, 4, 8, 8);
  ValueId a = nb.relu(nb.input(), "a");
  ValueId b = nb.relu(a, "b");
  nb.relu(a, "c");
  Graph g = std::move(nb).finish({b});
  EXPECT_EQ(block_names(g, partition_blocks(g)),
            (std::vector<std::vector<std::string>>{{"a"}, {"b", "c"}}));
}

TEST(Blocks, EveryOpInExactlyOneBlockInOrder) {
  NetBuilder nb("wide", 1, 4, 8, 8);
  std::vector<ValueId> branches;
  ValueId stem = nb.relu(nb.input(), "stem");
  for (int i = 0; i < 5; ++i) branches.push_back(nb.relu(nb.relu(stem)));
  Graph g = std::move(nb).finish({nb.concat(branches)});
  const auto blocks = partition_blocks(g);
  std::vector<int> seen(g.num_ops(), 0);
  OpId last = -1;
  for (const auto& b : blocks) {
    for (OpId id : b.ops) {
      ++seen[id];
      EXPECT_GT(id, last);
      last = id;
    }
  }
  for (int count : seen) EXPECT_EQ(count, 1);
  EXPECT_EQ(blocks[1].width, 5);
}

TEST(Poset, ChainCoversAndAntichain) {
  // 0 -> 1 -> 3, 0 -> 2 -> 3, 4 isolated
  Adjacency succ = {{1, 2}, {3}, {3}, {}, {}};
  EXPECT_EQ(max_antichain_size(succ), 3);  // {1, 2, 4}
  const auto paths = min_chain_cover(succ, /*transitive=*/false);
  EXPECT_EQ(paths.size(), 3u);             // e.g. 0-1-3, 2, 4
  size_t covered = 0;
  for (const auto& chain : paths) {
    covered += chain.size();
    for (size_t i = 1; i < chain.size(); ++i) {
      const auto& outs = succ[chain[i - 1]];
      EXPECT_NE(std::find(outs.begin(), outs.end(), chain[i]), outs.end());
    }
  }
  EXPECT_EQ(covered, 5u);
  // Transitive chains may skip: 0 -> 1 -> 2 path cover needs 2 chains for a "V", closure too.
  Adjacency v = {{2}, {2}, {}};
  EXPECT_EQ(min_chain_cover(v, true).size(), 2u);
  // The closure lets one chain jump over a vertex taken by another chain.
  Adjacency skip = {{1}, {2, 3}, {}, {}};  // paths: 0-1-2, 3 ; antichain {2, 3}
  EXPECT_EQ(max_antichain_size(skip), 2);
  const auto reach = transitive_closure(skip);
  EXPECT_TRUE(reach[0][3]);
  EXPECT_FALSE(reach[3][0]);
  EXPECT_FALSE(reach[2][3]);
}

}  // namespace
}  // namespace stagecraft::graph
