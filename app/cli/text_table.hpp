// Plain-text tables for the CLI's readable summaries: right-aligned numeric columns.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace attnres::cli {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

std::string format_fixed(double value, int decimals);

}  // namespace attnres::cli
