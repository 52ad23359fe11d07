#include "text_table.hpp"

#include <algorithm>
#include <iomanip>
#include <ostream>
#include <sstream>

namespace attnres::cli {

std::string format_fixed(double value, int decimals) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(decimals) << value;
  return text.str();
}

void TextTable::print(std::ostream& out) const {
  std::vector<std::size_t> widths(header_.size(), 0);
  auto widen = [&](const std::vector<std::string>& row) {
    for (std::size_t c = 0; c < row.size() && c < widths.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  };
  widen(header_);
  for (const auto& row : rows_) widen(row);
  auto print_row = [&](const std::vector<std::string>& row) {
    for (std::size_t c = 0; c < widths.size(); ++c) {
      const std::string cell = c < row.size() ? row[c] : "";
      if (c == 0) {
        out << std::left << std::setw(static_cast<int>(widths[c])) << cell;
      } else {
        out << "  " << std::right << std::setw(static_cast<int>(widths[c])) << cell;
      }
    }
    out << '\n';
  };
  print_row(header_);
  for (const auto& row : rows_) print_row(row);
}

}  // namespace attnres::cli
