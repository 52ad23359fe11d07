#include "attnres/format.hpp"

#include <cmath>
#include <sstream>

namespace attnres {

std::string format_number(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::abs(value) < 1e15) {
    std::ostringstream out;
    out << static_cast<long long>(value);
    return out.str();
  }
  std::ostringstream out;
  out.precision(6);
  out << value;
  return out.str();
}

}  // namespace attnres
