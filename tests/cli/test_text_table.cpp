// The CLI's plain-text tables: widths in characters (a "·" is one, not two bytes), numbers
// right-aligned and text left-aligned, and at most 120 columns where the cells can wrap.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "text_table.hpp"

namespace attnres::cli {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_text_table {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(TextTable, CountsCharactersNotBytes) {
  EXPECT_EQ(display_width("N_p·d"), 5u);
  EXPECT_EQ(display_width("≤ 4"), 3u);
  TextTable table({"accounting", "x N_p·d"});
  table.add_row({"paper, naive: C(C-1)/2 · N_p · d", "28"});
  table.add_row({"exact, cached", "25"});
  std::ostringstream out;
  table.print(out);
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 3u);
  // The numbers end in the same column although the first row has two-byte characters.
  EXPECT_EQ(display_width(lines[1]), display_width(lines[2]));
  EXPECT_EQ(display_width(lines[0]), display_width(lines[1]));
}

TEST(TextTable, NumbersRightTextLeft) {
  TextTable table({"scheme", "total", "formula"});
  table.add_row({"standard", "3", "2d + d"});
  table.add_row({"Full AttnRes", "24", "(S + N - 2)d + 2d"});
  std::ostringstream out;
  table.print(out);
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 3u);
  // "standard" padded to the first column's 12 characters, two spaces, "3" right-aligned under
  // "total", two spaces, the formula left-aligned.
  EXPECT_EQ(lines[1], "standard          3  2d + d") << out.str();
  EXPECT_NE(lines[2].find("   24  (S + N - 2)d + 2d"), std::string::npos) << out.str();
}

TEST(TextTable, WideTablesFitTheWidthByWrappingHeadersFirstThenText) {
  TextTable table({"scheme", "reads (elements/token)", "writes (elements/token)",
                   "total (elements/token)", "total (bytes/token)", "formula"});
  table.add_row({"Full AttnRes, naive (mean over l)", "910336", "7168", "917504", "1835008",
                 "2(l-1)d + d, mean = L·d over every read of the model"});
  table.add_row({"standard", "14336", "7168", "21504", "43008", "2d + d"});
  std::ostringstream out;
  table.print(out, 100);
  const auto lines = lines_of(out.str());
  std::string all;
  for (const auto& line : lines) {
    EXPECT_LE(display_width(line), 100u) << line;
    all += line + " ";
  }
  // Every word is still there, and the numbers are never split.
  for (const char* word : {"reads", "(elements/token)", "(bytes/token)", "910336", "1835008", "L·d",
                           "model", "standard", "43008"}) {
    EXPECT_NE(all.find(word), std::string::npos) << word << "\n" << out.str();
  }
  // The header took more than one line (it wrapped before the cells did).
  EXPECT_NE(lines[1].find("(elements/token)"), std::string::npos) << out.str();
  // A word longer than the width stays whole (the table is then wider than asked, not cut).
  TextTable narrow({"key"});
  narrow.add_row({"io_elements_per_sublayer.full_two_phase"});
  std::ostringstream small;
  narrow.print(small, 10);
  EXPECT_NE(small.str().find("io_elements_per_sublayer.full_two_phase"), std::string::npos);
}

}  // namespace test_text_table
}  // namespace attnres::cli
