// Number formatting shared by tables, reports and messages.
#pragma once

#include <string>

namespace attnres {

// Integers exactly; other values to 6 significant digits.
std::string format_number(double value);

}  // namespace attnres
