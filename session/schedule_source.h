#pragma once
/// Where a schedule comes from: searched now by a strategy (sequential, greedy, dp), or read from
/// a schedule file. Front ends turn their text (`--schedule`, `strategy=`, a Triton parameter)
/// into one with ScheduleSource::parse, once, at their edge; the pipeline takes the typed value.
///
/// Example:
///   pipeline.schedule(graph, ScheduleSource::search(scheduler::Strategy::kDp));
///   pipeline.schedule(graph, ScheduleSource::parse(args.schedule));  // "dp" or "my.yaml"

#include <optional>
#include <string>

#include "scheduler/search_options.h"

namespace stagecraft::session {

/// A strategy to search with, or a schedule file.
class ScheduleSource {
 public:
  /// Searched now by `strategy`.
  static ScheduleSource search(scheduler::Strategy strategy);
  /// Read from the schedule file `path` (checked when it is read).
  static ScheduleSource file(std::string path);
  /// The search by the strategy `text` names (sequential | greedy | dp), or nothing.
  static std::optional<ScheduleSource> strategy_named(const std::string& text);
  /// A strategy name (sequential | greedy | dp), else an existing file; throws UsageError
  /// naming both readings when `text` is neither.
  static ScheduleSource parse(const std::string& text);

  bool is_file() const { return is_file_; }
  /// The strategy (when not a file).
  scheduler::Strategy strategy() const { return strategy_; }
  /// The file (when a file).
  const std::string& path() const { return path_; }
  /// "dp" or the file's path.
  std::string describe() const;

 private:
  bool is_file_ = false;
  scheduler::Strategy strategy_ = scheduler::Strategy::kDp;
  std::string path_;
};

}  // namespace stagecraft::session
