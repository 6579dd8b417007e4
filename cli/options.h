#pragma once
/// The command-line options of the library's settings structs (session/): each add_* function
/// registers flags that fill the given struct when the command line is parsed.

#include <CLI/CLI.hpp>

#include "scheduler/search_options.h"
#include "session/pipeline.h"
#include "session/source.h"

namespace stagecraft::cli {

using session::GraphSource;
using session::Model;
using session::Pipeline;
using session::SessionOptions;
using session::load_f32_model;
using session::load_model;
using session::load_source;

/// Adds the positional NETWORK|FILE argument and --batch, --input-size, --seed, --raw, --dtype,
/// --calibration, --calibration-samples; with `onnx_flag`, also --onnx FILE as another way to
/// name an ONNX model. User-facing lines (an int8 calibration run now) go to stderr.
void add_source_options(CLI::App& command, GraphSource& source, bool onnx_flag = true);
/// Adds --dtype, --calibration and --calibration-samples only.
void add_dtype_options(CLI::App& command, GraphSource& source);

/// Adds --backend, --cache-dir, --cost-model, --layout, --streams, --tf32, --no-winograd,
/// --stream-mode; with `backend_default_cpu`, --backend defaults to "cpu" instead of none.
/// Progress and warnings go to stderr.
void add_backend_options(CLI::App& command, SessionOptions& options, bool backend_default_cpu);

/// Adds --mode, -r, -s, --unpruned, --max-part-transitions, --search-budget, --exhaustive.
void add_search_options(CLI::App& command, scheduler::SearchOptions& options);

/// Prints a search's progress on stderr once it has run for a second: one line rewritten in
/// place on a terminal, else a line a second. Unless quiet.
class SearchProgressPrinter {
 public:
  explicit SearchProgressPrinter(bool quiet = false);
  ~SearchProgressPrinter();
  SearchProgressPrinter(const SearchProgressPrinter&) = delete;
  SearchProgressPrinter& operator=(const SearchProgressPrinter&) = delete;
  /// Shows `progress`.
  void operator()(const scheduler::SearchProgress& progress);
  /// A callback for SearchOptions::on_progress / Pipeline::schedule calling this printer.
  std::function<void(const scheduler::SearchProgress&)> callback() {
    return [this](const scheduler::SearchProgress& p) { (*this)(p); };
  }

 private:
  bool quiet_;
  bool tty_;
  bool shown_ = false;
  double last_ = -1;
};

}  // namespace stagecraft::cli
