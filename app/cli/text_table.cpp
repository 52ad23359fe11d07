#include "text_table.hpp"

#include <algorithm>
#include <iomanip>
#include <numeric>
#include <ostream>
#include <sstream>

namespace attnres::cli {

std::string format_fixed(double value, int decimals) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(decimals) << value;
  return text.str();
}

std::size_t display_width(const std::string& text) {
  // UTF-8: every byte that is not a continuation byte (10xxxxxx) starts a character.
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

namespace {

std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// Greedy word wrap to `width` characters (a longer word keeps a line of its own).
std::vector<std::string> wrap(const std::string& text, std::size_t width) {
  if (display_width(text) <= width) return {text};
  std::vector<std::string> lines;
  std::string line;
  for (const auto& word : words_of(text)) {
    if (!line.empty() && display_width(line) + 1 + display_width(word) > width) {
      lines.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty() || lines.empty()) lines.push_back(line);
  return lines;
}

// A number as the CLI prints them ("3", "-0.0627", "1.5e+09", "4.47%"), or nothing.
bool numeric(const std::string& cell) {
  if (cell.empty() || cell == "-") return true;
  std::size_t digits = 0;
  for (char c : cell) {
    if (c >= '0' && c <= '9') {
      ++digits;
    } else if (c != '.' && c != '-' && c != '+' && c != 'e' && c != 'E' && c != '%' && c != ',') {
      return false;
    }
  }
  return digits > 0;
}

std::size_t longest_word(const std::string& text) {
  std::size_t longest = 0;
  for (const auto& word : words_of(text)) longest = std::max(longest, display_width(word));
  return longest;
}

}  // namespace

void TextTable::print(std::ostream& out, std::size_t max_width) const {
  const std::size_t columns = header_.size();
  // Natural widths; then, until the table fits, wrap headers at spaces first (down to the widest
  // cell below them), and only then the cells themselves (down to their longest word), always
  // narrowing the widest column that can still give (wide columns shrink together).
  std::vector<std::size_t> widths(columns, 0), cell_width(columns, 0), header_word(columns, 0),
      cell_word(columns, 0);
  for (std::size_t c = 0; c < columns; ++c) {
    widths[c] = display_width(header_[c]);
    header_word[c] = longest_word(header_[c]);
  }
  for (const auto& row : rows_) {
    for (std::size_t c = 0; c < row.size() && c < columns; ++c) {
      cell_width[c] = std::max(cell_width[c], display_width(row[c]));
      cell_word[c] = std::max(cell_word[c], longest_word(row[c]));
      widths[c] = std::max(widths[c], cell_width[c]);
    }
  }
  auto total = [&] {
    return std::accumulate(widths.begin(), widths.end(), std::size_t{0}) + 2 * (columns - 1);
  };
  for (int phase = 0; phase < 2; ++phase) {
    std::vector<std::size_t> floor(columns);
    for (std::size_t c = 0; c < columns; ++c) {
      floor[c] = std::max(header_word[c], phase == 0 ? cell_width[c] : cell_word[c]);
    }
    while (columns > 0 && total() > max_width) {
      std::size_t best = columns;
      for (std::size_t c = 0; c < columns; ++c) {
        if (widths[c] > floor[c] && (best == columns || widths[c] > widths[best])) best = c;
      }
      if (best == columns) break;  // nothing left to give in this phase
      --widths[best];
    }
  }
  // Numbers are right-aligned, text (names, formulas, meanings) left-aligned.
  std::vector<bool> right(columns, false);
  for (std::size_t c = 1; c < columns; ++c) {
    right[c] = std::all_of(rows_.begin(), rows_.end(), [c](const std::vector<std::string>& row) {
      return c >= row.size() || numeric(row[c]);
    });
  }
  auto print_row = [&](const std::vector<std::string>& row) {
    std::vector<std::vector<std::string>> cells(columns);
    std::size_t lines = 1;
    for (std::size_t c = 0; c < columns; ++c) {
      cells[c] = wrap(c < row.size() ? row[c] : std::string(), widths[c]);
      lines = std::max(lines, cells[c].size());
    }
    for (std::size_t l = 0; l < lines; ++l) {
      std::string text;
      for (std::size_t c = 0; c < columns; ++c) {
        const std::string cell = l < cells[c].size() ? cells[c][l] : std::string();
        const std::size_t pad =
            widths[c] > display_width(cell) ? widths[c] - display_width(cell) : 0;
        if (c > 0) text += "  ";
        text += right[c] ? std::string(pad, ' ') + cell : cell + std::string(pad, ' ');
      }
      while (!text.empty() && text.back() == ' ') text.pop_back();
      out << text << '\n';
    }
  };
  print_row(header_);
  for (const auto& row : rows_) print_row(row);
}

}  // namespace attnres::cli
