// STYLE: core/ is plain C++ — no Qt include anywhere in it, nor in the report layer above it
// (docs/architecture.md), which the CLI and the GUI both use.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_no_qt_in_core {

TEST(Layout, CoreHasNoQtInclude) {
  const std::regex qt_include(R"(#\s*include\s*[<"]Q[A-Za-z])");
  int files = 0;
  const std::filesystem::path core = ATTNRES_CORE_DIR;
  for (const auto& root : {core, core.parent_path() / "report"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
      if (!entry.is_regular_file()) continue;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      int number = 0;
      while (std::getline(in, line)) {
        ++number;
        EXPECT_FALSE(std::regex_search(line, qt_include))
            << entry.path() << ":" << number << ": " << line;
      }
    }
  }
  EXPECT_GT(files, 50);
}

}  // namespace test_no_qt_in_core
