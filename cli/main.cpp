// The `stagecraft` command: parses the command line and reports every user error as one line.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/commands.h"
#include "common/error.h"

int main(int argc, char** argv) {
  CLI::App app{"stagecraft: inter-operator scheduler and multi-stream executor for CNN inference",
               "stagecraft"};
  app.require_subcommand(1);
  // Usage errors are one line too.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("stagecraft: error: ") + e.what() + " (see --help)\n";
  });
  app.set_version_flag("--version", "stagecraft 0.1.0");
  stagecraft::cli::add_graph_commands(app);
  stagecraft::cli::add_schedule_commands(app);
  stagecraft::cli::add_run_commands(app);
  stagecraft::cli::add_quant_commands(app);
  stagecraft::cli::add_device_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const stagecraft::Error& e) {
    std::cerr << "stagecraft: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "stagecraft: internal error (please report): " << e.what() << "\n";
    return 70;
  }
  return 0;
}
