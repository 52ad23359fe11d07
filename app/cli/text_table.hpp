// Plain-text tables for the CLI's readable summaries: numeric columns right-aligned, text columns
// (names, formulas, meanings) left-aligned, widths in characters (UTF-8 "·" is one), at most
// `max_width` columns wide where the cells can wrap at spaces (long headers and formulas take
// several lines).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace attnres::cli {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream& out, std::size_t max_width = 120) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

std::string format_fixed(double value, int decimals);
// Characters of a UTF-8 string (code points; the CLI prints no double-width characters).
std::size_t display_width(const std::string& text);

}  // namespace attnres::cli
