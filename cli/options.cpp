#include "cli/options.h"

#include <unistd.h>

#include <iostream>

#include "session/report.h"

namespace stagecraft::cli {

void add_source_options(CLI::App& command, GraphSource& source, bool onnx_flag) {
  source.log = &std::cerr;
  auto* positional = command.add_option(
      "network", source.spec, "built-in network name (see `stagecraft networks`), a graph file "
                              "(.yaml) or an ONNX model (.onnx)");
  if (onnx_flag) {
    auto* onnx = command.add_option("--onnx", source.spec, "an ONNX model (instead of NETWORK)");
    positional->excludes(onnx);
    onnx->excludes(positional);
  }
  command.add_option("--batch", source.batch, "batch size (default: the network's or file's own, 1)")
      ->check(CLI::PositiveNumber);
  command.add_option("--input-size", source.input_size,
                     "input height = width of a built-in network or an ONNX model (default: its "
                     "own; required for an ONNX model with symbolic H, W)")
      ->check(CLI::PositiveNumber);
  command.add_option("--seed", source.seed, "seed of randomly wired networks (randwire*)");
  command.add_flag("--raw", source.raw, "keep batch norms and activations as separate ops");
  add_dtype_options(command, source);
}

void add_dtype_options(CLI::App& command, GraphSource& source) {
  source.log = &std::cerr;
  command.add_option("--dtype", source.dtype, "element type: f32 (default) | f16 (CUDA backend) | "
                                              "bf16 (CPUs with AVX512_BF16 or AMX: convolutions, "
                                              "linear layers, matmuls and additions in bfloat16) | "
                                              "int8 (quantised: u8/i8 activations, per-channel i8 "
                                              "weights)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "int8"}));
  command.add_option("--calibration", source.calibration,
                     "int8: calibration file from `stagecraft calibrate` (default: calibrate on "
                     "generated inputs now)");
  command.add_option("--calibration-samples", source.calibration_samples,
                     "int8 without --calibration: generated inputs to calibrate on (default 8)");
}

void add_backend_options(CLI::App& command, SessionOptions& options, bool backend_default_cpu) {
  options.log = &std::cerr;
  if (backend_default_cpu) options.backend = "cpu";
  command.add_option("--backend", options.backend, "backend to run and measure on: cpu | cuda");
  command.add_option("--cache-dir", options.cache_dir,
                     "profile cache directory (default: $STAGECRAFT_CACHE_DIR or "
                     "~/.cache/stagecraft)");
  command.add_option("--layout,--layouts", options.layout,
                     "activation layout: nchw | nhwc | nChw8c | nChw16c, or auto (a layout per "
                     "tensor, chosen by measuring; default: the backend's preferred)");
  command.add_option("--streams", options.max_streams, "stream slots of the plan (default 8)")
      ->check(CLI::PositiveNumber);
  command.add_option("--cost-model", options.cost_model,
                     "measured (on --backend; the default when one is given) | analytic:DEVICE "
                     "(configs/devices/; default analytic:v100 without a backend)");
  command.add_flag("--tf32", options.backend_config.tf32,
                   "CUDA: allow TF32 tensor-core math for f32 convolutions and GEMMs");
  command.add_flag("!--no-winograd", options.backend_config.winograd,
                   "CPU: run every convolution on oneDNN (default: f32 stride-1 3x3, 1xK and Kx1 "
                   "convolutions by Winograd's algorithm where it beats oneDNN's direct kernel, "
                   "measured once per convolution on this machine and cached)");
  command.add_flag("!--winograd-rule", options.backend_config.measure_kernels,
                   "CPU: choose Winograd or direct by the FMA-width rule instead of measuring each "
                   "convolution (the same plan on every machine of a CPU family; for tests)");
  command.add_flag("--fast-winograd", options.backend_config.fast_winograd,
                   "CPU: Winograd's larger tiles (F(4x4,3x3), F(m,K) up to 10 points): faster, "
                   "each layer rounding 5-20x more than a direct kernel (default: F(2x2,3x3), F(2,K))");
  command.add_flag("!--stream-mode", options.executor.replay_cuda_graph,
                   "CUDA: launch kernel by kernel instead of replaying a captured CUDA Graph");
  command.add_flag("!--fixed-threads", options.executor.adapt_threads,
                   "CPU: keep every thread (default: half while another process holds cores)");
}

void add_search_options(CLI::App& command, scheduler::SearchOptions& options) {
  command.add_option_function<std::string>(
             "--mode", [&options](const std::string& mode) { options.mode = scheduler::parse_dp_mode(mode); },
             "dp stage kinds: both | merge | concurrent (default both)")
      ->check(CLI::IsMember({"both", "merge", "concurrent"}));
  command.add_option("-r,--max-group-size", options.max_group_size, "ops per group (default 3)")
      ->check(CLI::PositiveNumber);
  command.add_option("-s,--max-num-groups", options.max_num_groups,
                     "groups (streams) per stage (default 8)")
      ->check(CLI::PositiveNumber);
  command.add_flag("!--unpruned", options.pruned,
                   "search every ending and group partition (small graphs only)");
  command.add_option("--max-part-transitions", options.max_part_transitions,
                     "split wider blocks into parts above this estimate (default 2e5)")
      ->check(CLI::PositiveNumber);
  command.add_option("--search-budget", options.budget.seconds,
                     "dp on a measured model: seconds for the whole search, measurements "
                     "included (default 40; 0: no limit); the best schedule found so far is used "
                     "when it ends")
      ->check(CLI::NonNegativeNumber);
  command.add_flag("--exhaustive", options.budget.exhaustive,
                   "dp on a measured model: after converging, measure every candidate stage that "
                   "could still win, however optimistic its estimate (the unbounded search; hours "
                   "on NASNet-A Large: combine with --search-budget 0)");
}

namespace {
constexpr double kQuietSearchSeconds = 1.0;  // searches shorter than this print no progress
}  // namespace

SearchProgressPrinter::SearchProgressPrinter(bool quiet)
    : quiet_(quiet), tty_(isatty(STDERR_FILENO) != 0) {}

SearchProgressPrinter::~SearchProgressPrinter() {
  if (shown_ && tty_) std::cerr << "\n";
}

void SearchProgressPrinter::operator()(const scheduler::SearchProgress& p) {
  if (quiet_ || p.seconds < kQuietSearchSeconds) return;
  const bool last = p.block == p.num_blocks && p.num_blocks > 0;
  if (!tty_ && p.seconds - last_ < 1.0 && !last) return;
  last_ = p.seconds;
  shown_ = true;
  std::cerr << (tty_ ? "\r" : "") << "searching: " << session::search_progress_text(p)
            << (tty_ ? "   " : "\n") << std::flush;
}

}  // namespace stagecraft::cli
