// attnres-lab --dump-state (state_dump.hpp).
#include "state_dump.hpp"

#include <iostream>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/scenario.hpp"
#include "explorer_results.hpp"
#include "scaling_state.hpp"
#include "training_state.hpp"
#include "views.hpp"

namespace attnres::gui {

int dump_state_command(const std::string& scenario, bool has_scenario, const std::string& out,
                       const std::string& view) {
  if (!has_scenario) {
    std::cerr << "attnres-lab: --dump-state: needs --scenario FILE.toml (the settings to dump)\n";
    return 2;
  }
  const ViewEntry* entry = view.empty() ? nullptr : find_view_entry(view);
  if (!view.empty() && entry == nullptr) {
    std::cerr << "attnres-lab: --view: unknown view '" << view << "' (expected "
              << view_names_text() << ")\n";
    return 2;
  }
  if (entry != nullptr && !entry->no_state.empty()) {
    std::cerr << "attnres-lab: --dump-state: the " << view << " view has no state to dump: it "
              << entry->no_state << "\n";
    return 2;
  }
  try {
    const Scenario s = load_scenario(scenario);
    nlohmann::json dump;
    if (s.has_model) {
      dump = dump_state(explorer_state(s), view);
    } else {
      dump = {{"schema", schema_tag("lab_state")},
              {"title", s.title},
              {"views", nlohmann::json::object()}};
    }
    if (view.empty() || view == "scaling")
      dump["views"]["scaling"] = scaling_dump(scaling_state(s));
    if (s.training && (view.empty() || view == "training")) {
      // The form Start would train with; the losses need the run itself (Start, or attnres report).
      nlohmann::json state = training_state_json(training_state(s));
      nlohmann::json results = {{"trains", state["trains"]},
                                {"settings_error", state["settings_error"]},
                                {"losses", "not computed: they need the training run (Start)"}};
      state.erase("trains");
      state.erase("settings_error");
      dump["views"]["training"] = {{"state", state}, {"results", results}};
    }
    // The views whose settings do not come from a scenario's [model], and why (the view table).
    dump["not_dumped"] = nlohmann::json::object();
    for (const ViewEntry& row : view_table()) {
      const std::string name(row.name);
      if (!row.no_state.empty() && (view.empty() || view == name))
        dump["not_dumped"][name] = std::string(row.no_state);
      else if (name == "training" && !s.training && (view.empty() || view == name))
        dump["not_dumped"][name] = "the scenario has no [train] table";
      else if (!s.has_model && (view.empty() || view == name) && !dump["views"].contains(name))
        dump["not_dumped"][name] = "the scenario has no [model] table";
    }
    write_file_atomically(out, dump.dump(2) + "\n");
  } catch (const Error& error) {
    std::cerr << "attnres-lab: " << error.what() << "\n";
    return 2;
  }
  return 0;
}

}  // namespace attnres::gui
