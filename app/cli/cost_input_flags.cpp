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
    if (field.key == "block_layers" && block_list) {
      group.add_options()("block-sizes", po::value(&block_sizes),
                          "uneven blocks: sublayers per block, e.g. 6,6,4 (sum = L), instead of "
                          "blocks, block size or layers per block");
    }
    if (field.key == "tokens") {
      group.add_options()("dtype", po::value(&dtype)->default_value("bf16"),
                          "element type: bf16 | fp16 | fp32 | fp8");
    }
  }
  options.add(group);
}

std::string InputFlags::flag_for_field(const std::string& key) const {
  if (key == "block_sizes") return "--block-sizes";
  const CostInputField* field = find_cost_input_field(key);
  return field ? "--" + flag_name(*field, pipeline) : key;
}

CostInputs InputFlags::resolved() {
  inputs.dtype = parse_flag_value([&] { return parse_dtype(dtype, "--dtype"); });
  if (!block_sizes.empty()) {
    inputs.block_sizes =
        parse_flag_value([&] { return parse_block_list(block_sizes, "--block-sizes"); });
  }
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

void InputFlags::refuse_unused(const po::variables_map& values, const std::string& what,
                               std::initializer_list<std::string_view> used) const {
  auto uses = [&](std::string_view key) {
    return std::find(used.begin(), used.end(), key) != used.end();
  };
  std::string list = "the block shape, --d-model";
  std::vector<std::string> flags;
  for (const auto& field : cost_input_fields()) {
    if (uses(field.key)) flags.push_back("--" + flag_name(field, pipeline));
  }
  if (uses("dtype")) flags.push_back("--dtype");
  for (std::size_t i = 0; i < flags.size(); ++i)
    list += (i + 1 == flags.size() ? " and " : ", ") + flags[i];
  auto refuse = [&](const std::string& flag) {
    throw UsageError("--" + flag + " does not change " + what + " (it uses only " + list +
                     "); leave it out");
  };
  for (const auto& field : cost_input_fields()) {
    if (field.section == "model" && field.key != "streams" && field.key != "ffn") continue;
    if (uses(field.key)) continue;
    const std::string flag = flag_name(field, pipeline);
    if (given(values, flag.c_str())) refuse(flag);
  }
  if (!uses("dtype") && given(values, "dtype")) refuse("dtype");
}

ResidualMode strategy_mode(const std::string& mode) {
  const ResidualMode parsed = parse_flag_value([&] { return parse_residual_mode(mode, "--mode"); });
  if (parsed != ResidualMode::block && parsed != ResidualMode::full)
    throw UsageError("--mode: implementation strategies apply to block or full, got '" + mode +
                     "'");
  return parsed;
}

}  // namespace attnres::cli
