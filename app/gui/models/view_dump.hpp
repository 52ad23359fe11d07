// What `attnres-lab --dump-state` writes for one view (docs/json.md "attnres.lab_state"): its state
// and headline results for a scenario or, when the scenario gives it none, why. Each view's models
// file defines its dump function; the view table (app/gui/views.cpp) names it, and the command
// (app/gui/state_dump.cpp) walks the table — a new view adds its row and its own files only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "attnres/cancel.hpp"
#include "attnres/scenario.hpp"

namespace attnres::gui {

struct ViewDump {
  nlohmann::json view;     // {"state": ..., "results": ...}; null when not dumped
  std::string not_dumped;  // why not
};

using ViewDumpFunction = ViewDump (*)(const Scenario& scenario, const Progress& progress);

}  // namespace attnres::gui
