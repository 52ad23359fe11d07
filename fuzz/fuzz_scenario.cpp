// libFuzzer target: scenario TOML parsing and validation, then the cost engine on what passed
// (and small sweeps), and the scenario writer's round trip.
#include <cstdint>
#include <string>

#include "attnres/error.hpp"
#include "attnres/scenario.hpp"
#include "attnres/sweep.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto scenario =
        attnres::parse_scenario(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    if (scenario.has_model) {
      const auto report = attnres::evaluate_costs(scenario.inputs);
      (void)report;
      for (const auto& sweep : scenario.sweeps) {
        const std::size_t settings = sweep.x.values.size() * (sweep.y ? sweep.y->values.size() : 1);
        if (settings <= 64 && !scenario.pipeline)
          attnres::run_sweep(scenario.scenario_inputs(), sweep);
      }
    }
    attnres::parse_scenario(attnres::scenario_to_toml(scenario), "fuzz-rt");
  } catch (const attnres::Error&) {
  }
  return 0;
}
