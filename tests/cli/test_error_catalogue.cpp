// Every entry of docs/errors.md: run its command in-process, in a directory holding the fixtures
// the catalogue describes, and compare the exit status and the exact message.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "attnres/atomic_file.hpp"
#include "attnres/format.hpp"
#include "attnres/safetensors.hpp"
#include "cli.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_error_catalogue {

namespace fs = std::filesystem;

struct Entry {
  std::string title, command, message;
  int status = -1;
};

struct Catalogue {
  std::vector<std::pair<std::string, std::string>> files;  // name, content
  std::vector<Entry> entries;
};

Catalogue read_catalogue() {
  std::ifstream in(ATTNRES_ERRORS_DOC);
  Catalogue catalogue;
  std::string line, title;
  while (std::getline(in, line)) {
    if (line.rfind("### ", 0) == 0) title = line.substr(4);
    if (line.rfind("```file:", 0) == 0) {
      std::string name = line.substr(8), content;
      while (std::getline(in, line) && line != "```") content += line + "\n";
      catalogue.files.emplace_back(name, content);
    } else if (line == "```console") {
      Entry entry;
      entry.title = title;
      std::getline(in, line);
      entry.command = line.substr(2);  // "$ attnres ..."
      std::getline(in, entry.message);
      std::getline(in, line);  // "[exit N]"
      entry.status = std::stoi(line.substr(6));
      catalogue.entries.push_back(entry);
    }
  }
  return catalogue;
}

// Shell-like words: spaces separate, single quotes group.
std::vector<std::string> words(const std::string& command) {
  std::vector<std::string> out;
  std::string word;
  bool quoted = false, any = false;
  for (char c : command) {
    if (c == '\'') {
      quoted = !quoted;
      any = true;
    } else if (c == ' ' && !quoted) {
      if (any) out.push_back(word);
      word.clear();
      any = false;
    } else {
      word += c;
      any = true;
    }
  }
  if (any) out.push_back(word);
  return out;
}

void make_fixtures(const fs::path& root) {
  std::ostringstream out, err;
  ASSERT_EQ(
      cli::run({"init-model", "--layers", "2", "--d-model", "16", "--heads", "4", "--kv-heads", "2",
                "--ffn", "24", "--vocab", "20", "--seed", "3", "--out", (root / "m").string()},
               out, err),
      0)
      << err.str();
  for (const char* name : {"m-truncated", "m-nan", "m-missing", "m-badjson", "m-hostile"}) {
    fs::copy(root / "m", root / name);
  }
  const std::string bytes = read_file(root / "m/model.safetensors");
  write_file_atomically(root / "m-truncated/model.safetensors", bytes.substr(0, bytes.size() / 2));
  const auto file = SafetensorsFile::read(root / "m/model.safetensors");
  std::uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  const TensorInfo* first = &file.tensors().front();
  for (const auto& tensor : file.tensors()) {
    if (tensor.begin < first->begin) first = &tensor;
  }
  std::string nan = bytes;
  const std::uint32_t nan_bits = 0x7fc00000u;
  std::memcpy(nan.data() + 8 + header + first->begin, &nan_bits, 4);
  write_file_atomically(root / "m-nan/model.safetensors", nan);
  std::vector<TensorToWrite> kept;
  for (const auto& tensor : file.tensors()) {
    if (tensor.name == "lm_head.weight") continue;
    TensorToWrite t{tensor.name, tensor.shape, {}, {}, false};
    for (double v : file.values(tensor)) t.data.push_back(static_cast<float>(v));
    kept.push_back(std::move(t));
  }
  write_safetensors(root / "m-missing/model.safetensors", kept);
  write_file_atomically(root / "m-badjson/config.json", "{ \"hidden_size\": 16,\n");
  write_file_atomically(root / "m-hostile/config.json", "{\"hidden_size\xff\x1b[31m\": 16}\n");
  // A write cut short after its commit record, and the same record as if copied (another inode).
  for (const char* name : {"m-interrupted", "m-copied"}) {
    fs::copy(root / "m", root / name);
    const fs::path staging = root / name / ".attnres-staging.1.0";
    fs::create_directories(staging);
    fs::copy_file(root / "m/config.json", staging / "config.json");
    struct stat st {};
    ASSERT_EQ(::lstat(staging.c_str(), &st), 0);
    const bool here = std::string(name) == "m-interrupted";
    const std::string id =
        here ? std::to_string(st.st_dev) + ", " + std::to_string(st.st_ino) : std::string("1, 2");
    write_file_atomically(root / name / ".attnres-commit.json",
                          "{\"owner\": \"model\", \"staging\": \".attnres-staging.1.0\", "
                          "\"staging_id\": [" +
                              id +
                              "], \"files\": [\"config.json\"], "
                              "\"remove\": [], \"directories\": [], \"sets\": {\"model\": "
                              "[\"config.json\", \"model.safetensors\"]}}");
  }
  write_file_atomically(root / "binary.bin", std::string("\x7f"
                                                         "ELF\0\x01 not text",
                                                         15));
}

TEST(ErrorCatalogue, EveryEntryPrintsItsDocumentedMessage) {
  const Catalogue catalogue = read_catalogue();
  ASSERT_GE(catalogue.entries.size(), 40u);
  test::TempDir dir;
  make_fixtures(dir.path());
  for (const auto& [name, content] : catalogue.files) {
    fs::create_directories((dir / name).parent_path());
    write_file_atomically(dir / name, content);
  }
  const fs::path previous = fs::current_path();
  fs::current_path(dir.path());
  for (const auto& entry : catalogue.entries) {
    SCOPED_TRACE(entry.title + ": " + entry.command);
    auto args = words(entry.command);
    ASSERT_EQ(args.front(), "attnres");
    args.erase(args.begin());
    std::ostringstream out, err;
    const int status = cli::run(args, out, err);
    EXPECT_EQ(status, entry.status);
    EXPECT_EQ(err.str(), entry.message + "\n");
    EXPECT_FALSE(fs::exists("x") || fs::exists("r") || fs::exists("s"))
        << "a failed command left output behind";
    EXPECT_EQ(printable_text(err.str()), err.str()) << "the message is not safe text";
    if (fs::exists("mine")) {
      EXPECT_EQ(read_file("mine/notes.txt"), "my notes\n");
      EXPECT_FALSE(fs::exists("mine/.attnres-output.json"));
    }
  }
  fs::current_path(previous);
}

}  // namespace test_error_catalogue
}  // namespace attnres
