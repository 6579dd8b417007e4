// Schedule validation: each broken rule is rejected with a message naming the stage and op.
#include <gtest/gtest.h>

#include <algorithm>

#include "networks/builder.h"
#include "scheduler/schedule.h"
#include "tests/support/graph_ops.h"

namespace stagecraft::scheduler {
namespace {

using networks::NetBuilder;
using networks::square_conv;

// x -> {c1 (1x1), c3 (3x3 pad 1), c5 (5x5 pad 2), s2 (3x3 stride 2)} ; c1 -> r ; cat(c3, c5, r)
struct Fixture {
  graph::Graph g;
  OpId c1, c3, c5, s2, r, cat;
  Fixture() {
    NetBuilder b("fixture", 1, 8, 16, 16);
    auto x = b.input();
    auto v1 = b.conv(x, square_conv(4, 1), "c1");
    auto v3 = b.conv(x, square_conv(4, 3, 1, 1), "c3");
    auto v5 = b.conv(x, square_conv(4, 5, 1, 2), "c5");
    auto vs = b.conv(x, square_conv(4, 3, 2, 1), "s2");
    auto vr = b.relu(v1, "r");
    auto vc = b.concat({v3, v5, vr}, "cat");
    g = std::move(b).finish({vc, vs});
    std::tie(c1, c3, c5, s2, r, cat) =
        stagecraft::testing::op_ids(g, "c1", "c3", "c5", "s2", "r", "cat");
  }
  // `first`, then every other op as its own stage in topological order.
  std::vector<Stage> with_rest(const Stage& first) const {
    std::vector<Stage> stages{first};
    const auto used = first.ops();
    for (OpId id : g.topological_order()) {
      if (std::find(used.begin(), used.end(), id) == used.end()) {
        stages.push_back(Stage::concurrent({{id}}));
      }
    }
    return stages;
  }
  std::string error(const std::vector<Stage>& stages) const {
    Schedule s;
    s.stages = stages;
    try {
      validate(g, s);
    } catch (const ScheduleError& e) {
      return e.what();
    }
    return "<valid>";
  }
};

TEST(Validate, AcceptsAValidScheduleWithMergeAndGroups) {
  Fixture f;
  EXPECT_EQ(f.error({Stage::merge({f.c1, f.c3, f.c5}), Stage::concurrent({{f.r}, {f.s2}}),
                     Stage::concurrent({{f.cat}})}),
            "<valid>");
  EXPECT_EQ(f.error({Stage::concurrent({{f.c1, f.r}, {f.c3}, {f.c5}, {f.s2}}),
                     Stage::concurrent({{f.cat}})}),
            "<valid>");
}

TEST(Validate, MissingAndRepeatedOps) {
  Fixture f;
  std::string m = f.error({Stage::concurrent({{f.c1, f.c3, f.c5, f.s2, f.r}})});
  EXPECT_NE(m.find("op 'cat' is not scheduled"), std::string::npos) << m;
  m = f.error({Stage::concurrent({{f.c1, f.c3, f.c5, f.s2, f.r}}),
               Stage::concurrent({{f.c1, f.cat}})});
  EXPECT_NE(m.find("stage 2 (concurrent): op 'c1' is already scheduled in stage 1"),
            std::string::npos)
      << m;
  m = f.error({Stage::concurrent({{99}})});
  EXPECT_NE(m.find("op id 99 is not in the graph"), std::string::npos) << m;
  m = f.error({Stage::concurrent({{}})});
  EXPECT_NE(m.find("must contain at least one op"), std::string::npos) << m;
}

TEST(Validate, DependencyOrder) {
  Fixture f;
  std::string m = f.error({Stage::concurrent({{f.r}}), Stage::concurrent({{f.c1, f.c3, f.c5, f.s2}}),
                           Stage::concurrent({{f.cat}})});
  EXPECT_NE(m.find("stage 1 (concurrent): op 'r' runs before its input 'c1' (stage 2)"),
            std::string::npos)
      << m;
  m = f.error({Stage::concurrent({{f.r, f.c1}, {f.c3}, {f.c5}, {f.s2}}),
               Stage::concurrent({{f.cat}})});
  EXPECT_NE(m.find("op 'r' comes before its input 'c1' in its group"), std::string::npos) << m;
  m = f.error({Stage::concurrent({{f.c1}, {f.r}, {f.c3}, {f.c5}, {f.s2}}),
               Stage::concurrent({{f.cat}})});
  EXPECT_NE(m.find("op 'r' in group 2 reads 'c1' of group 1; groups of a stage must be "
                   "independent"),
            std::string::npos)
      << m;
}

TEST(Validate, IllegalMerges) {
  Fixture f;
  std::string m = f.error(f.with_rest(Stage::merge({f.c3, f.s2})));
  EXPECT_NE(m.find("stage 1 (merge): cannot merge: 'c3' and 's2' differ in stride"),
            std::string::npos)
      << m;
  m = f.error(f.with_rest(Stage::merge({f.c3, f.c5, f.r})));
  EXPECT_NE(m.find("op 'r' runs before its input 'c1'"), std::string::npos) << m;
  std::vector<Stage> stages{Stage::concurrent({{f.c1}}), Stage::merge({f.c3, f.r})};
  for (OpId id : {f.c5, f.s2, f.cat}) stages.push_back(Stage::concurrent({{id}}));
  m = f.error(stages);
  EXPECT_NE(m.find("op 'r' is not a convolution"), std::string::npos) << m;
  m = f.error(f.with_rest(Stage::merge({f.c1})));
  EXPECT_NE(m.find("at least two convolutions"), std::string::npos) << m;
  Stage two_per_group = Stage::merge({f.c1, f.c3});
  two_per_group.groups = {{f.c1, f.c3}};
  m = f.error(f.with_rest(two_per_group));
  EXPECT_NE(m.find("holds one convolution"), std::string::npos) << m;
}

TEST(Validate, MergeRulesForInputsGroupsAndPadding) {
  NetBuilder b("m", 1, 8, 16, 16);
  auto x = b.input();
  auto y = b.relu(x, "y");
  auto a = b.conv(x, square_conv(4, 3, 1, 1), "a");
  auto other_input = b.conv(y, square_conv(4, 3, 1, 1), "b");
  networks::ConvSpec dw = square_conv(8, 3, 1, 1);
  dw.groups = 8;
  auto depthwise = b.conv(x, dw, "dw");
  networks::ConvSpec off = square_conv(4, 3, 1, 1);
  off.kernel = {1, 3};
  off.padding = {0, 0, 0, 2};  // same output width, but not centred
  auto skewed = b.conv(x, off, "skewed");
  networks::ConvSpec rect = square_conv(4, 1);
  rect.kernel = {1, 7};
  rect.padding = graph::Pads::symmetric(0, 3);
  auto r17 = b.conv(x, rect, "r17");
  rect.kernel = {7, 1};
  rect.padding = graph::Pads::symmetric(3, 0);
  auto r71 = b.conv(x, rect, "r71");
  const graph::Graph g = std::move(b).finish({a, other_input, depthwise, skewed, r17, r71});
  auto id = [&](const char* n) { return *g.find_op(n); };
  EXPECT_NE(merge_conflict(g, id("a"), id("b")).find("read different values"), std::string::npos);
  EXPECT_NE(merge_conflict(g, id("a"), id("dw")).find("groups must be 1"), std::string::npos);
  EXPECT_NE(merge_conflict(g, id("a"), id("skewed")).find("centred"), std::string::npos);
  EXPECT_EQ(merge_conflict(g, id("r17"), id("r71")), "");
  EXPECT_TRUE(can_merge(g, {id("a"), id("r17"), id("r71")}));
  const auto merged = merged_conv_attrs(g, {id("a"), id("r17"), id("r71")});
  EXPECT_EQ(merged.out_channels, 12);
  EXPECT_EQ(merged.kernel, (graph::Hw{7, 7}));
  EXPECT_EQ(merged.padding, graph::Pads::same(3));
}

}  // namespace
}  // namespace stagecraft::scheduler
