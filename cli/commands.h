#pragma once
/// The `stagecraft` subcommands. Each add_* function registers its commands on the app; the
/// command's work runs from its callback after parsing.

#include <CLI/CLI.hpp>

namespace stagecraft::cli {

/// `networks` and `graph`.
void add_graph_commands(CLI::App& app);

/// `schedule` and `show`.
void add_schedule_commands(CLI::App& app);

/// `run`, then `bench` (add_bench_command).
void add_run_commands(CLI::App& app);

/// `bench`.
void add_bench_command(CLI::App& app);

/// `calibrate`.
void add_quant_commands(CLI::App& app);

/// `devices`.
void add_device_commands(CLI::App& app);

}  // namespace stagecraft::cli
