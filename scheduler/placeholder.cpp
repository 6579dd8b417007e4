// scheduler: filled by the schedule-search issue
