// `attnres-lab --scenario FILE --dump-state OUT.json [--view NAME]`: every view's state and
// headline results for a scenario, computed by the functions the views compute with, without a
// window (docs/teaching.md "Scenarios", docs/json.md "attnres.lab_state").
#pragma once

#include <string>

namespace attnres::gui {

// Runs the command (the views' rows in the view table say which have a state); returns the exit
// status (0; 2 with a message on stderr for a bad flag or
// scenario: nothing is written then).
int dump_state_command(const std::string& scenario, bool has_scenario, const std::string& out,
                       const std::string& view);

}  // namespace attnres::gui
