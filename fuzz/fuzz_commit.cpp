// libFuzzer target: the commit record (.attnres-commit.json, docs/output-safety.md) of a directory
// that holds a link out of itself (`lnk -> ../victims`), a staging folder and a few files. Any
// record must be refused, dropped as torn or applied inside the directory: a reader and
// `attnres recover` never crash, and the victims folder beside it never changes. "@ID@" in an
// input is replaced by the staging folder's real device and inode, so that inputs can reach the
// code that applies a record.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/output_dir.hpp"

namespace {

namespace fs = std::filesystem;

struct Root {
  fs::path path = fs::temp_directory_path() / ("attnres-fuzz-commit-" + std::to_string(::getpid()));
  Root() {
    fs::create_directories(path / "victims/sub");
    attnres::write_file_atomically(path / "victims/v.txt", "mine");
    attnres::write_file_atomically(path / "victims/sub/w.txt", "mine too");
  }
  ~Root() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

const fs::path& root() {
  static const Root r;
  return r.path;
}

bool victims_intact() {
  std::error_code error;
  std::size_t entries = 0;
  for (auto it = fs::recursive_directory_iterator(root() / "victims", error);
       it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (error) return false;
    ++entries;
  }
  try {
    return entries == 3 && attnres::read_file(root() / "victims/v.txt") == "mine" &&
           attnres::read_file(root() / "victims/sub/w.txt") == "mine too";
  } catch (const attnres::Error&) {
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fs::path d = root() / "d";
  std::error_code ignored;
  fs::remove_all(d, ignored);
  fs::create_directories(d / "sub");
  fs::create_directories(d / ".attnres-staging.1.0/lnk");
  attnres::write_file_atomically(d / "a.txt", "old a");
  attnres::write_file_atomically(d / "sub/b.txt", "old b");
  attnres::write_file_atomically(d / ".attnres-staging.1.0/a.txt", "new a");
  attnres::write_file_atomically(d / ".attnres-staging.1.0/lnk/x", "payload");
  fs::create_directory_symlink("../victims", d / "lnk");
  struct stat st {};
  if (::lstat((d / ".attnres-staging.1.0").c_str(), &st) != 0) return 0;
  std::string record(reinterpret_cast<const char*>(data), size);
  const std::string id = std::to_string(st.st_dev) + ", " + std::to_string(st.st_ino);
  for (std::size_t at = record.find("@ID@"); at != std::string::npos; at = record.find("@ID@", at))
    record.replace(at, 4, id);
  attnres::write_file_atomically(d / ".attnres-commit.json", record);
  try {
    const attnres::OutputDirectoryReadLock lock(d);
  } catch (const attnres::Error&) {
  }
  try {
    attnres::recover_output_directory(d);
  } catch (const attnres::Error&) {
  }
  if (!victims_intact()) __builtin_trap();
  return 0;
}
