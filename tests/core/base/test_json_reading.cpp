// Reading hostile documents (issue 42): size caps checked on the open file, JSON nesting capped,
// duplicate keys refused, and error messages that quote a value briefly and printably.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "attnres/error.hpp"
#include "attnres/json_reading.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_json_reading {

namespace fs = std::filesystem;
using nlohmann::json;

std::string nested(std::size_t depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}

// The message of the Error that `parse` throws, or "" when it throws none.
std::string parse_error(const std::string& text, const JsonReadOptions& options = {}) {
  try {
    parse_json_document(text, "doc.json", options);
  } catch (const Error& error) {
    return error.what();
  }
  return {};
}

TEST(JsonReading, ParsesWhatNlohmannParses) {
  const std::string text =
      R"({"a": [1, -2, 3.5, true, null, "x\"y"], "b": {"c": {}, "d": []}, "e": 18446744073709551615})";
  EXPECT_EQ(parse_json_document(text, "doc.json"), json::parse(text));
  EXPECT_EQ(parse_json_document("  7 ", "doc.json"), json(7));
  EXPECT_EQ(parse_json_document(nested(64), "doc.json"), json::parse(nested(64)));
}

TEST(JsonReading, NestingDeeperThanTheLimitIsRefusedWithItsPosition) {
  // 100,000 levels: nlohmann's own DOM would be built, and copying or dumping it overflows the
  // stack; the limit stops the parse at level 65.
  const std::string message = parse_error(nested(100'000));
  EXPECT_EQ(message,
            "doc.json:1:65: JSON nested deeper than 64 levels (refused; real files nest "
            "a few)");
  // Inside an object on line 2: the 64th bracket there is the 65th level.
  EXPECT_EQ(parse_error("{\n  \"a\": " + nested(64) + "}").substr(0, 14), "doc.json:2:71:");
  JsonReadOptions shallow;
  shallow.max_depth = 2;
  EXPECT_EQ(parse_error("[[1]]", shallow), "");
  EXPECT_NE(parse_error("[[[1]]]", shallow).find("doc.json:1:3: JSON nested deeper than 2"),
            std::string::npos);
}

TEST(JsonReading, ADuplicateKeyIsRefusedAtItsSecondOccurrence) {
  EXPECT_EQ(parse_error("{\"a\": 1,\n \"b\": {\"x\": 1, \"x\": 2}}"),
            "doc.json:2:16: duplicate key 'x' (a key may appear once in an object)");
  EXPECT_EQ(parse_error("{\"a\": 1, \"a\": 1}"),
            "doc.json:1:10: duplicate key 'a' (a key may appear once in an object)");
  // Escapes before the key: the position is the key's opening quote.
  EXPECT_EQ(parse_error(R"({"q\"\\": 1, "q\"\\": 2})").substr(0, 14), "doc.json:1:14:");
  JsonReadOptions named;
  named.top_level_key_name = "tensor name";
  EXPECT_NE(parse_error(R"({"t": {}, "t": {}})", named).find("duplicate tensor name 't'"),
            std::string::npos);
  // A hostile key is shown printable and short.
  const std::string key = "\\u001b[31m" + std::string(500, 'k');
  const std::string message = parse_error("{\"" + key + "\": 1, \"" + key + "\": 2}");
  EXPECT_NE(message.find("'\\x1b[31mkkk"), std::string::npos) << message;
  EXPECT_NE(message.find("...'"), std::string::npos) << message;
  EXPECT_LT(message.size(), 200u) << message;
  EXPECT_EQ(message.find('\x1b'), std::string::npos);
}

TEST(JsonReading, SyntaxErrorsAndOverflowsNameTheFileLineAndColumn) {
  EXPECT_NE(parse_error("{\"a\":\n tru}").find("doc.json:2:"), std::string::npos);
  EXPECT_NE(parse_error("{\"a\":\n tru}").find("not valid JSON"), std::string::npos);
  EXPECT_NE(parse_error("[1e99999]").find("number overflow"), std::string::npos);
  EXPECT_NE(parse_error("").find("not valid JSON"), std::string::npos);
  EXPECT_NE(parse_error("[1] [2]").find("not valid JSON"), std::string::npos);
}

TEST(JsonReading, DescribeJsonIsShortShallowAndPrintable) {
  EXPECT_EQ(describe_json(json("gelu")), "\"gelu\"");
  EXPECT_EQ(describe_json(json(12)), "12");
  EXPECT_EQ(describe_json(json::parse(R"({"a":[1,2],"b":null})")), "{\"a\": [1, 2], \"b\": null}");
  EXPECT_EQ(describe_json(json::parse(R"([[[[1]]]])")), "[[[[...]]]]");
  // A value nested 10,000 deep (built without recursion) is described without recursing into it.
  json deep = json::array();
  for (int i = 0; i < 10'000; ++i) deep = json::array({std::move(deep)});
  EXPECT_EQ(describe_json(deep), "[[[[...]]]]");
  const std::string long_text = describe_json(json(std::string(100'000, 'x')));
  EXPECT_EQ(long_text.size(), kJsonQuoteChars + 3);
  EXPECT_EQ(long_text.substr(long_text.size() - 3), "...");
  json wide = json::array();
  for (int i = 0; i < 100'000; ++i) wide.push_back(i);
  EXPECT_LE(describe_json(wide).size(), kJsonQuoteChars + 3);
  EXPECT_EQ(describe_json(json("\x1b[2J")), "\"\\u001b[2J\"");
  // Cut at a character boundary, not inside a UTF-8 sequence.
  const std::string accents = describe_json(json(std::string(200, 'a') + "\xc3\xa9"), 1);
  EXPECT_EQ(accents, "\"...");
  EXPECT_EQ(quote_untrusted("\xc3\xa9\xc3\xa9", 3), "\xc3\xa9...");
}

TEST(JsonReading, ReadDocumentRefusesAFileOverTheCapByName) {
  test::TempDir dir;
  const fs::path path = dir / "config.json";
  std::ofstream(path) << std::string(1000, ' ');
  EXPECT_EQ(read_document(path, "a config.json file", 1000).size(), 1000u);
  try {
    read_document(path, "a config.json file", 999);
    FAIL() << "not refused";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()),
              path.string() +
                  ": the file holds 1000 bytes, more than the 999 bytes accepted for "
                  "a config.json file; refused without reading it");
  }
}

TEST(JsonReading, ASparse3GiBFileIsRefusedWithoutReadingIt) {
  test::TempDir dir;
  const fs::path path = dir / "config.json";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{3} << 30), 0);  // sparse: no disk, no memory
  ::close(fd);
  try {
    read_document(path, "a config.json file");
    FAIL() << "not refused";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()),
              path.string() +
                  ": the file holds 3221225472 bytes, more than the 16 MiB (16777216 "
                  "bytes) accepted for a config.json file; refused without reading it");
  }
}

TEST(JsonReading, ReadDocumentSaysWhatIsThereInsteadOfAFile) {
  test::TempDir dir;
  try {
    read_document(dir.path(), "a config.json file");
    FAIL() << "not refused";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("is a directory, expected a config.json file"),
              std::string::npos)
        << error.what();
  }
  EXPECT_THROW(read_document(dir / "missing.json", "a config.json file"), Error);
  // A device that never ends is refused before any byte is read.
  EXPECT_THROW(read_document("/dev/zero", "a config.json file"), Error);
}

}  // namespace test_json_reading
}  // namespace attnres
