// The cost-engine commands' model flags (cost_input_flags.hpp): one flag per row of the table of
// cost inputs, and the UsageErrors that name them.
#include "cost_input_flags.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "attnres/block_layout.hpp"
#include "attnres/format.hpp"
#include "attnres/strategy.hpp"
#include "cli.hpp"

namespace attnres::cli {

std::string InputFlags::flag_name(const CostInputField& field, bool for_pipeline) {
  return for_pipeline && field.key == "batch" ? "micro-batch-size" : std::string(field.flag);
}

void InputFlags::add_to(po::options_description& options, bool for_pipeline) {
  pipeline = for_pipeline;
  const CostInputs defaults;
  po::options_description group("model flags");  // the usage lines' "[model flags]"
  for (const auto& field : cost_input_fields()) {
    if (for_pipeline && !field.pipeline_flag) continue;
    const std::string name = flag_name(field, for_pipeline);
    const std::string help = for_pipeline && field.key == "batch" ? "sequences per micro-batch"
                                                                  : std::string(field.help);
    auto* value = po::value(&(inputs.*field.member));
    if (defaults.*field.member != 0) value->default_value(defaults.*field.member);
    if (field.key == "d_model" && d_model_required) value->required();
    group.add_options()(name.c_str(), value, help.c_str());
  }
  // The choices (dtype, attention, mlp, recompute, sequence-parallel) and the hybrid list.
  for (const auto& choice : cost_input_choices()) {
    std::string names;
    for (std::size_t i = 0; i < choice.names.size(); ++i)
      names += (i ? " | " : "") + choice.names[i];
    const std::string help = std::string(choice.help) + ": " + names;
    group.add_options()(
        std::string(choice.flag).c_str(),
        po::value(&choices[std::string(choice.key)])->default_value(choice.get(defaults)),
        help.c_str());
  }
  // The lists (uneven blocks only where the command takes them).
  for (const auto& list : cost_input_lists()) {
    if (list.key == "block_sizes" && !block_list) continue;
    const std::string help = std::string(list.help) + ", e.g. " + std::string(list.example);
    group.add_options()(std::string(list.flag).c_str(), po::value(&lists[std::string(list.key)]),
                        help.c_str());
  }
  options.add(group);
}

std::string InputFlags::flag_for_field(const std::string& key) const {
  if (const CostInputList* list = find_cost_input_list(key)) return "--" + std::string(list->flag);
  if (const CostInputChoice* choice = find_cost_input_choice(key))
    return "--" + std::string(choice->flag);
  const CostInputField* field = find_cost_input_field(key);
  return field ? "--" + flag_name(*field, pipeline) : key;
}

void InputFlags::set_lists(CostInputs& in) const {
  for (const auto& list : cost_input_lists()) {
    const auto typed = lists.find(std::string(list.key));
    if (typed == lists.end() || typed->second.empty()) continue;
    const std::string flag = "--" + std::string(list.flag);
    in.*list.member = parse_flag_value([&] { return parse_block_list(typed->second, flag); });
  }
}

CostInputs InputFlags::resolved() {
  for (const auto& choice : cost_input_choices()) {
    const std::string& name = choices[std::string(choice.key)];
    if (name.empty()) continue;
    parse_flag_value([&] { choice.set(inputs, name, "--" + std::string(choice.flag)); });
  }
  set_lists(inputs);
  try {
    return resolve_cost_inputs(inputs);
  } catch (const CostInputError& error) {
    throw UsageError(flag_for_field(error.field) + ": " + error.what());
  }
}

CostInputs InputFlags::resolved_for_listing(const std::string& command) {
  const CostInputs out = resolved();
  if (out.sublayers > kMaxStrategySublayers) {
    // The sources of every read and the rows built from them (measured: about 15 bytes each).
    constexpr double kBytesPerSublayer = 15;
    throw UsageError(
        std::string(inputs.layers != 0 ? "--layers" : "--sublayers") + ": " + command +
        " lists every read; L = " + std::to_string(out.sublayers) + " sublayers would take about " +
        format_number(std::round(static_cast<double>(out.sublayers) * kBytesPerSublayer / 1e6)) +
        " MB; at most " + std::to_string(kMaxStrategySublayers) +
        " sublayers are listed (the cost command takes any L)");
  }
  return out;
}

const std::vector<std::string_view>& InputFlags::architecture_keys() {
  static const std::vector<std::string_view> keys = {
      "heads",      "kv_heads",      "head_dim",  "kv_latent", "rope_dim",
      "q_latent",   "hybrid_period", "experts",   "active",    "shared",
      "expert_ffn", "dense_layers",  "attention", "mlp",       "full_attention_layers"};
  return keys;
}

const std::vector<std::string_view>& InputFlags::parallel_keys() {
  static const std::vector<std::string_view> keys = {
      "tp", "cp", "ep", "dp", "zero", "optimizer_bytes", "recompute", "sequence_parallel", "vocab"};
  return keys;
}

void InputFlags::refuse_unused(const po::variables_map& values, const std::string& what,
                               std::initializer_list<std::string_view> used) const {
  auto in = [](const std::vector<std::string_view>& keys, std::string_view key) {
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  };
  auto uses = [&](std::string_view key) {
    for (const std::string_view u : used) {
      if (u == key) return true;
      if (u == "architecture" && in(architecture_keys(), key)) return true;
      if (u == "parallel" && in(parallel_keys(), key)) return true;
    }
    return false;
  };
  // The block shape, L and d are always used.
  static const std::vector<std::string_view> always = {"sublayers", "layers",     "d_model",
                                                       "blocks",    "block_size", "block_layers"};
  std::string list = "the block shape, --d-model";
  std::vector<std::string> flags;
  for (const std::string_view u : used) {
    if (u == "architecture")
      flags.emplace_back("the architecture flags");
    else if (u == "parallel")
      flags.emplace_back("the parallelism flags");
    else
      flags.push_back(flag_for_field(std::string(u)));
  }
  for (std::size_t i = 0; i < flags.size(); ++i)
    list += (i + 1 == flags.size() ? " and " : ", ") + flags[i];
  auto refuse = [&](const std::string& flag, const std::string& key) {
    std::string hint;
    if (in(parallel_keys(), key) && !uses("tp"))
      hint = "; memory per rank under parallelism: attnres memory";
    throw UsageError("--" + flag + " does not change " + what + " (it uses only " + list + ")" +
                     hint + "; leave it out");
  };
  for (const auto& field : cost_input_fields()) {
    if (in(always, field.key) || uses(field.key)) continue;
    const std::string flag = flag_name(field, pipeline);
    if (given(values, flag.c_str())) refuse(flag, std::string(field.key));
  }
  for (const auto& choice : cost_input_choices()) {
    if (uses(choice.key)) continue;
    const std::string flag(choice.flag);
    if (given(values, flag.c_str())) refuse(flag, std::string(choice.key));
  }
  for (const auto& typed : cost_input_lists()) {
    // The stage layout goes with the pipeline ranks it splits the model over.
    if (typed.key == "block_sizes" || uses(typed.key) ||
        (typed.key == "stage_layers" && uses("pp")))
      continue;
    const std::string flag(typed.flag);
    if (given(values, flag.c_str())) refuse(flag, std::string(typed.key));
  }
}

void warn_stage_split(const CostInputs& resolved, std::ostream& err) {
  if (const std::string warning = stage_split_warning(resolved); !warning.empty())
    err << "warning: " << warning << "\n";
}

void add_allowance_options(po::options_description& options, AllowanceFlags& flags) {
  options.add_options()("reserve",
                        po::value(&flags.reserve_gb)->default_value(flags.reserve_gb, "1.61"),
                        "GB the runtime holds beside the tensors: CUDA context, workspaces, NCCL "
                        "buffers (docs/math.md "
                        "§3.7)")(
      "fragmentation", po::value(&flags.fragmentation)->default_value(flags.fragmentation, "0.05"),
      "the caching allocator's reserve beyond the tensors, a fraction of them (0..1)")(
      "margin", po::value(&flags.margin_gb)->default_value(0, "0"),
      "GB kept free: a setting fits when total + margin <= capacity");
}

MemoryAllowance allowance_from_flags(const AllowanceFlags& flags) {
  MemoryAllowance a;
  a.runtime_bytes = flags.reserve_gb * 1e9;
  a.fragmentation = flags.fragmentation;
  a.margin_bytes = flags.margin_gb * 1e9;
  if (const auto problem = memory_allowance_problem(a)) {
    const char* flag = problem->field == "runtime_bytes"   ? "--reserve"
                       : problem->field == "fragmentation" ? "--fragmentation"
                                                           : "--margin";
    throw UsageError(std::string(flag) + ": " + problem->message);
  }
  return a;
}

ResidualMode strategy_mode(const std::string& mode) {
  const ResidualMode parsed = parse_flag_value([&] { return parse_residual_mode(mode, "--mode"); });
  if (parsed != ResidualMode::block && parsed != ResidualMode::full)
    throw UsageError("--mode: implementation strategies apply to block or full, got '" + mode +
                     "'");
  return parsed;
}

}  // namespace attnres::cli
