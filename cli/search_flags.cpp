#include "cli/search_flags.h"

namespace stagecraft::cli {

void SearchFlags::add_options(CLI::App& command) {
  command.add_option("--mode", mode, "dp stage kinds: both | merge | concurrent")
      ->check(CLI::IsMember({"both", "merge", "concurrent"}));
  command.add_option("-r,--max-group-size", max_group_size, "ops per group (default 3)")
      ->check(CLI::PositiveNumber);
  command.add_option("-s,--max-num-groups", max_num_groups, "groups (streams) per stage (default 8)")
      ->check(CLI::PositiveNumber);
  command.add_flag("--unpruned", unpruned,
                   "search every ending and group partition (small graphs only)");
  command.add_option("--max-part-transitions", max_part_transitions,
                     "split wider blocks into parts above this estimate (default 2e5)")
      ->check(CLI::PositiveNumber);
  command.add_option("--cost-model", cost_model,
                     "measured (on --backend; the default when one is given) | analytic:DEVICE "
                     "(configs/devices/; default analytic:v100 without a backend)");
}

scheduler::SearchOptions SearchFlags::options(const std::string& strategy) const {
  scheduler::SearchOptions o;
  o.strategy = scheduler::parse_strategy(strategy);
  o.mode = scheduler::parse_dp_mode(mode);
  o.max_group_size = max_group_size;
  o.max_num_groups = max_num_groups;
  o.pruned = !unpruned;
  o.max_part_transitions = max_part_transitions;
  return o;
}

}  // namespace stagecraft::cli
