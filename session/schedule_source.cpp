#include "session/schedule_source.h"

#include <filesystem>

#include "common/error.h"
#include "common/strings.h"

namespace stagecraft::session {

ScheduleSource ScheduleSource::search(scheduler::Strategy strategy) {
  ScheduleSource source;
  source.strategy_ = strategy;
  return source;
}

ScheduleSource ScheduleSource::file(std::string path) {
  ScheduleSource source;
  source.is_file_ = true;
  source.path_ = std::move(path);
  return source;
}

std::optional<ScheduleSource> ScheduleSource::strategy_named(const std::string& text) {
  for (auto s : {scheduler::Strategy::kSequential, scheduler::Strategy::kGreedy, scheduler::Strategy::kDp}) {
    if (text == scheduler::to_string(s)) return search(s);
  }
  return std::nullopt;
}

ScheduleSource ScheduleSource::parse(const std::string& text) {
  if (auto strategy = strategy_named(text)) return *strategy;
  std::error_code error;
  if (!std::filesystem::is_regular_file(text, error)) {
    throw UsageError(cat("--schedule: '", text, "' is neither a file nor one of sequential, "
                         "greedy, dp"));
  }
  return file(text);
}

std::string ScheduleSource::describe() const {
  return is_file_ ? path_ : std::string(scheduler::to_string(strategy_));
}

}  // namespace stagecraft::session
