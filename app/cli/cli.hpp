// Entry point of the `attnres` command line, callable in-process (tests) or from main().
//
// Exit status: 0 success, 1 a bad input file or data (model, scenario, hardware file, write
// failure), 2 a bad flag (unknown command or flag, bad or contradictory flag values),
// 130 interrupted (Ctrl-C / SIGTERM; nothing written).
#pragma once

#include <iosfwd>
#include <stdexcept>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"

namespace attnres {
struct EngineOptions;
enum class Precision;
}  // namespace attnres

namespace attnres::cli {

using attnres::EngineOptions;
using attnres::Precision;

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitInterrupted = 130;  // Ctrl-C / SIGTERM: the work stopped, nothing written

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Whether a command's arguments ask for --format json (or --format=json): then every exit that
// prints to stdout prints JSON there, errors and interruptions included.
bool wants_json(const std::vector<std::string>& args);
// The JSON error object printed on stdout when a --format json command fails or is interrupted
// (the human message goes to stderr as always): {"schema": {"name": "attnres.error", "version":
// 1}, "error": {"message", "exit_status", "kind": "usage" | "error" | "cancelled"}}.
void print_json_error(std::ostream& out, const std::string& message, int exit_status,
                      const char* kind);

// Commands (args exclude the command name).
int init_model_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int forward_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int read_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int animate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cost_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int evidence_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int validate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int scaling_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int sweep_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int pipeline_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int plan_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int strategies_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int layout_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int memory_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int recompute_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int calibrate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int metrics_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int report_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int train_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int mask_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int export_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int inspect_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int recover_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int bench_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// A usage error: an unknown flag, a missing or malformed value. Reported with exit status 2.
struct UsageError : std::exception {
  explicit UsageError(std::string text) : message(std::move(text)) {}
  const char* what() const noexcept override { return message.c_str(); }
  std::string message;
};

// Runs `parse`, turning an attnres::Error into a UsageError (for values of flags). Cancelled
// (Ctrl-C or SIGTERM during work run under it, e.g. plan's grid) passes through: exit 130.
template <typename Parse>
auto parse_flag_value(Parse parse) {
  try {
    return parse();
  } catch (const UsageError&) {
    throw;
  } catch (const Cancelled&) {
    throw;
  } catch (const std::runtime_error& error) {
    throw UsageError(error.what());
  }
}

// The help of a --threads flag: `what`, then "(0: every core, at most kMaxThreads)".
std::string threads_help(const std::string& what);

// --engine, --device, --threads and --precision checked together (the CUDA engine is the fast
// engine in f32; 0 <= threads <= kMaxThreads; --threads, when `threads_given`, only with the fast
// engine on the CPU, the one engine that starts threads). Throws UsageError naming the flag, before
// any device is touched.
EngineOptions parse_engine_flags(const std::string& engine, const std::string& device, int threads,
                                 Precision precision, bool threads_given);
// Throws UsageError naming `flag` (--precision, --versus) unless `engine` computes `precision`:
// bf16 on the fast engine only, the CUDA engine in f32 only.
void check_precision_flag(const EngineOptions& engine, Precision precision,
                          const std::string& flag);
// --precision's value (f64 | f32 | bf16; f64 refused where `f64` is false, as for training).
Precision parse_precision_flag(const std::string& text, bool f64 = true);
// What a precision computes here, for a table: "f32", or "bf16 (bf16 products, f32
// accumulation; avx512_core_bf16)" with oneDNN's instruction set, and a warning where bf16 is
// emulated.
std::string precision_description(Precision precision);

}  // namespace attnres::cli
