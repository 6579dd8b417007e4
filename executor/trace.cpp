#include "executor/trace.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace stagecraft::executor {

namespace {

std::string json_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

constexpr int kStageLane = 1000;  // thread id of the stage lane, after the stream lanes

}  // namespace

std::string chrome_trace(const ExecutionPlan& plan, const std::vector<KernelTiming>& timings,
                         const std::string& title) {
  std::ostringstream out;
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  out << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\""
      << json_escape(title) << "\"}}";
  for (int s = 0; s < plan.num_streams(); ++s) {
    out << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" << s
        << ",\"args\":{\"name\":\"stream " << s << "\"}}";
  }
  out << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" << kStageLane
      << ",\"args\":{\"name\":\"stages\"}}";
  std::map<int, std::pair<double, double>> stages;  // stage -> [first start, last end]
  for (const KernelTiming& t : timings) {
    const PlannedKernel& k = plan.kernels()[t.kernel];
    out << ",\n{\"name\":\"" << json_escape(k.label) << "\",\"cat\":\"kernel\",\"ph\":\"X\",\"pid\":1"
        << ",\"tid\":" << k.stream << ",\"ts\":" << t.start_us
        << ",\"dur\":" << std::max(0.0, t.end_us - t.start_us) << ",\"args\":{\"stage\":" << k.stage
        << ",\"implementation\":\"" << json_escape(k.kernel->implementation()) << "\"}}";
    auto [it, inserted] = stages.emplace(k.stage, std::make_pair(t.start_us, t.end_us));
    if (!inserted) {
      it->second.first = std::min(it->second.first, t.start_us);
      it->second.second = std::max(it->second.second, t.end_us);
    }
  }
  for (const auto& [stage, span] : stages) {
    out << ",\n{\"name\":\"" << (stage == 0 ? std::string("copies") : "stage " + std::to_string(stage))
        << "\",\"cat\":\"stage\",\"ph\":\"X\",\"pid\":1,\"tid\":" << kStageLane
        << ",\"ts\":" << span.first << ",\"dur\":" << std::max(0.0, span.second - span.first) << "}";
  }
  out << "\n]}\n";
  return out.str();
}

}  // namespace stagecraft::executor
