// profiler: filled by the schedule-search issue
