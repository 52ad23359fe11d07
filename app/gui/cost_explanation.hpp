// The cost explorer's explanation column (HTML): what each tab shows, the formulas it draws, the
// docs it cites and what to try, kept apart from the view's logic (cost_view.cpp).
#pragma once

namespace attnres::gui {

const char* cost_explorer_explanation();

}  // namespace attnres::gui
