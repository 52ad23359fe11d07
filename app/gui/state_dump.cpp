// attnres-lab --dump-state (state_dump.hpp).
#include "state_dump.hpp"

#include <iostream>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/scenario.hpp"
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
  if (entry != nullptr && entry->dump == nullptr) {
    std::cerr << "attnres-lab: --dump-state: the " << view << " view has no state to dump: it "
              << entry->no_state << "\n";
    return 2;
  }
  try {
    const Scenario s = load_scenario(scenario);
    nlohmann::json dump = {{"schema", schema_tag("lab_state")},
                           {"title", s.title},
                           {"views", nlohmann::json::object()},
                           {"not_dumped", nlohmann::json::object()}};
    // Each view of the table (or the one asked for): its dump, or why it has none.
    for (const ViewEntry& row : view_table()) {
      const std::string name(row.name);
      if (!view.empty() && view != name) continue;
      if (row.dump == nullptr) {
        dump["not_dumped"][name] = std::string(row.no_state);
        continue;
      }
      ViewDump one = row.dump(s, {});
      if (one.view.is_null())
        dump["not_dumped"][name] = one.not_dumped;
      else
        dump["views"][name] = std::move(one.view);
    }
    write_file_atomically(out, dump.dump(2) + "\n");
  } catch (const Error& error) {
    std::cerr << "attnres-lab: " << error.what() << "\n";
    return 2;
  }
  return 0;
}

}  // namespace attnres::gui
