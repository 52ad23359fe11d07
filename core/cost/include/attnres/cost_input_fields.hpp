// The one table of the cost engine's integer inputs (docs/math.md §3, docs/scenarios.md): for
// each CostInputs field its key (scenario key, sweep parameter, JSON key, error field), the TOML
// table it lives in, the CLI flag that sets it, its symbol, unit and help. Scenario parsing and
// writing, sweeps, the JSON inputs block, the CLI's model flags and the GUI's cost inputs are all
// generated from it; the element type (dtype) is the one non-integer input and is handled beside
// it. Also here: the sweep value lists ("1,2,4", "divisors", ranges) that the CLI and scenario
// files both accept, expanded by one function.
//
//   for (const CostInputField& f : cost_input_fields()) std::cout << f.key << " = " <<
//   in.*f.member; set_cost_input(in, "blocks", 8);            // clears block_size: N and S are one
//   choice expand_sweep_range({1, 64, 0, 2}, "--values");  // 1, 2, 4, ..., 64
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attnres/cost.hpp"

namespace attnres {

struct CostInputField {
  std::string_view key;              // "seq_shards"
  std::int64_t CostInputs::*member;  // &CostInputs::seq_shards
  std::string_view section;          // TOML table: "model", "sequence" or "parallel"
  std::string_view flag;             // CLI flag without dashes: "seq-shards" (tokens: "seq")
  std::string_view symbol;           // the docs' symbol ("T") or "" when there is none
  std::string_view label;            // short name with the symbol: "sequence length T"
  std::string_view unit;             // "tokens"
  std::string_view help;             // one line for --help, tooltips and docs
  // The other way to give the same quantity, cleared when this one is set (blocks <-> block_size,
  // sublayers <-> layers); empty when there is none.
  std::string_view alternative;
  // An alias derived from another field (layers = L / 2, blocks from S): read from scenario files
  // and flags, but a written scenario gives the primary field only.
  bool derived = false;
  // Whether `attnres pipeline` takes it (it has no prefill, mHC or chunking flags).
  bool pipeline_flag = true;
  // Sensible bounds for interactive inputs (the GUI's spin boxes); the engine's own limit is
  // that products fit 64 bits (resolve_cost_inputs).
  std::int64_t input_min = 1, input_max = 1'000'000'000;
};

// Every integer CostInputs field, in the order scenarios, help texts and JSON list them.
inline constexpr std::size_t kCostInputFieldCount = 33;
std::span<const CostInputField> cost_input_fields();

// The inputs that take one of a few names (dtype, attention, mlp, recompute, sequence_parallel):
// the same roles as CostInputField (key, TOML table, flag, help), with the accepted names and the
// value read and written as its name.
struct CostInputChoice {
  std::string_view key;      // "attention"
  std::string_view section;  // TOML table
  std::string_view flag;     // CLI flag without dashes
  std::string_view label;
  std::string_view help;
  std::vector<std::string> names;         // accepted values, in the order messages list them
  std::string (*get)(const CostInputs&);  // the value's name
  // Sets the value; throws attnres::Error naming `where` and the accepted names.
  void (*set)(CostInputs&, const std::string& name, const std::string& where);
};
std::span<const CostInputChoice> cost_input_choices();
const CostInputChoice* find_cost_input_choice(std::string_view key);
// The inputs that take a list of integers (model.block_sizes, attention.full_attention_layers,
// parallel.stage_layers): the same roles (key, TOML table, flag, help) and the member; the CLI
// and the GUI take them as "7,8,8,6".
struct CostInputList {
  std::string_view key;      // "stage_layers"
  std::string_view section;  // TOML table
  std::string_view flag;     // CLI flag without dashes
  std::string_view label;
  std::string_view help;
  std::string_view example;  // "7,8,8,6"
  std::vector<std::int64_t> CostInputs::*member;
};
std::span<const CostInputList> cost_input_lists();
const CostInputList* find_cost_input_list(std::string_view key);
// The TOML tables of the cost inputs, in the order a written scenario lists them.
inline constexpr std::string_view kCostInputSections[] = {"model", "attention", "moe", "sequence",
                                                          "parallel"};
// The keys of one table: its integer fields, then its choices, then its lists.
std::vector<std::string> cost_input_section_keys(std::string_view section);
// The TOML table of any cost input key (field, choice or list); "" when none.
std::string_view cost_input_section(std::string_view key);
// nullptr when `key` names no field.
const CostInputField* find_cost_input_field(std::string_view key);
// The keys of one TOML table ("model", "sequence", "parallel"), in table order.
std::vector<std::string> cost_input_keys(std::string_view section);
// The field a resolved input shows for `field` (layers: L / 2, the rest: the member).
std::int64_t cost_input_value(const CostInputs& resolved, const CostInputField& field);

// Names of the parameters a sweep may vary: every CostInputs field, the two
// pipeline-simulation settings in kPipelineSweepParameters and the named ones.
inline constexpr std::string_view kPipelineSweepParameters[] = {"microbatches",
                                                                "link_bandwidth_gbps"};
// The parameters whose values are names (docs/math.md §3.8): the implementation strategy and the
// hardware (a preset name or a .toml file). A sweep over one lists the names; its points carry
// their index.
inline constexpr std::string_view kNamedSweepParameters[] = {"strategy", "hardware"};
const std::vector<std::string>& sweep_parameters();
bool is_pipeline_sweep_parameter(std::string_view parameter);
bool is_named_sweep_parameter(std::string_view parameter);
// Sets one field (and clears its alternative). Throws attnres::Error on an unknown name, with a
// did-you-mean hint, and on a pipeline-simulation parameter (those need a scenario's [pipeline]).
void set_cost_input(CostInputs& inputs, const std::string& parameter, std::int64_t value);

// ------------------------------------------------------------------ sweep values
// A sweep axis's values in one of the three forms both the CLI (`--values`) and scenario files
// (`values = ...`) accept: a list, "divisors" (of L), or a range FROM..TO by STEP or by FACTOR.
struct SweepRange {
  std::int64_t from = 0, to = 0;
  std::int64_t step = 0;    // > 0: from, from + step, ... (<= to)
  std::int64_t factor = 0;  // > 0: from, from·factor, ... (<= to); exactly one of step/factor
};
// Most values one axis may have (a range with a tiny step over a huge span is refused, not run).
inline constexpr std::int64_t kMaxSweepAxisValues = 10'000'000;
// The values of a range; throws attnres::Error naming `where` ("--values", "sweep.values") and the
// rule: TO >= FROM, STEP >= 1, FACTOR >= 2 with FROM >= 1, at most kMaxSweepAxisValues values.
std::vector<std::int64_t> expand_sweep_range(const SweepRange& range, const std::string& where);
// The CLI's text form: "1,2,4" | "divisors" | "FROM:TO" | "FROM:TO:STEP" | "FROM:TO:xFACTOR".
// `sublayers` is L for "divisors". Throws attnres::Error naming `where` and the accepted forms.
std::vector<std::int64_t> parse_sweep_values(const std::string& text, const std::string& where,
                                             std::int64_t sublayers);

// Divisors of n in increasing order.
std::vector<std::int64_t> divisors(std::int64_t n);

}  // namespace attnres
