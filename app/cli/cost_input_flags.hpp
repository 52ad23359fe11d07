// The model, sequence and parallelism flags of the cost-engine commands (cost, strategies, layout,
// recompute, sweep, pipeline), generated from the one table of cost inputs
// (attnres/cost_input_fields.hpp), and the --mode of the implementation-strategy commands. An
// internal header of the CLI: engine errors come back as UsageErrors naming the flag the user
// typed.
#pragma once

#include <initializer_list>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "attnres/cost.hpp"
#include "attnres/cost_input_fields.hpp"
#include "attnres/rank_memory.hpp"
#include "options.hpp"

namespace attnres::cli {

struct InputFlags {
  CostInputs inputs;
  std::map<std::string, std::string> choices;  // CostInputChoice key -> the name typed
  std::map<std::string, std::string> lists;    // CostInputList key -> the list typed ("7,8,6")
  bool pipeline =
      false;  // pipeline: --micro-batch-size instead of --batch, no prefill or mHC flags
  bool d_model_required = true;  // off for `sweep`, whose --scenario gives the model instead
  bool block_list = false;       // --block-sizes LIST (uneven blocks): cost, strategies, layout
  // The flag of `field` without its dashes ("micro-batch-size" for batch in `pipeline`).
  static std::string flag_name(const CostInputField& field, bool for_pipeline);
  // Adds the "model flags" group to `options`, each flag bound to its field of `inputs`.
  void add_to(po::options_description& options, bool for_pipeline = false);
  // The flag that sets CostInputs field `key` ("--seq" for tokens).
  std::string flag_for_field(const std::string& key) const;
  // The inputs as typed, with the choices and lists parsed, resolved and validated.
  CostInputs resolved();
  // Sets the lists the user typed (non-empty) into `in`; UsageError naming the flag.
  void set_lists(CostInputs& in) const;
  // resolved(), for a command that lists every read (`layout`, `recompute`: memory grows with
  // L): L at most kMaxStrategySublayers, refused before the work with the memory it would take.
  CostInputs resolved_for_listing(const std::string& command);
  // Refuses (UsageError naming the flag) every model flag the user typed that `what` ("the
  // layout") does not depend on: it uses the block shape, --d-model and the CostInputs keys in
  // `used` ("pp", "tokens", ...; "dtype" for --dtype; "architecture" for every architecture key,
  // "parallel" for the parallel degrees, ZeRO, recompute, sequence parallelism and vocab),
  // nothing else.
  static const std::vector<std::string_view>& architecture_keys();
  static const std::vector<std::string_view>& parallel_keys();
  void refuse_unused(const po::variables_map& values, const std::string& what,
                     std::initializer_list<std::string_view> used) const;
};

// "warning: the stage boundaries split layers ..." on `err` when P·V chunks cannot hold whole
// layers (stage_split_warning, cost.hpp); nothing otherwise.
void warn_stage_split(const CostInputs& resolved, std::ostream& err);

// The fit verdict's reserve and margin (MemoryAllowance, rank_memory.hpp): --reserve GB (the
// runtime's fixed share), --fragmentation F (the allocator's, a fraction of the tensors) and
// --margin GB (kept free), shared by `memory`, `pipeline` and `plan`. The allowance is in GB as
// typed until allowance_from_flags turns it into bytes and checks it (UsageError naming the flag).
struct AllowanceFlags {
  double reserve_gb = kDefaultRuntimeBytes / 1e9;
  double fragmentation = kDefaultFragmentation;
  double margin_gb = 0;
};
void add_allowance_options(po::options_description& options, AllowanceFlags& flags);
MemoryAllowance allowance_from_flags(const AllowanceFlags& flags);

// --mode of `strategies` and `recompute`: block or full (the schemes with implementation
// strategies).
ResidualMode strategy_mode(const std::string& mode);

}  // namespace attnres::cli
