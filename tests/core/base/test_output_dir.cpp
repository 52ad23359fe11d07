// Output directories that never lose a user's files (core/base/include/attnres/output_dir.hpp), and
// the safe text that messages go through.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/output_dir.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_output_dir {

namespace fs = std::filesystem;

// A build step that writes `files` (relative path -> content) into the staging folder.
auto writes(std::vector<std::pair<std::string, std::string>> files) {
  return [files](const fs::path& staging) {
    for (const auto& [name, content] : files) {
      fs::create_directories((staging / name).parent_path());
      write_file_atomically(staging / name, content);
    }
  };
}

OutputDirectoryOptions owner(const std::string& name) {
  OutputDirectoryOptions options;
  options.owner = name;
  return options;
}

std::vector<std::string> entries(const fs::path& directory) {
  std::vector<std::string> names;
  for (const auto& entry : fs::recursive_directory_iterator(directory)) {
    names.push_back(entry.path().lexically_relative(directory).generic_string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(OutputDirectory, ANewDirectoryGetsTheFilesAndAMarker) {
  test::TempDir dir;
  const auto result = write_output_directory(dir / "out", owner("report"),
                                             writes({{"report.md", "r"}, {"tables/io.csv", "t"}}));
  EXPECT_EQ(result.written, (std::vector<std::string>{"report.md", "tables/io.csv"}));
  EXPECT_EQ(entries(dir / "out"), (std::vector<std::string>{".attnres-output.json", "report.md",
                                                            "tables", "tables/io.csv"}));
  const auto marker = nlohmann::json::parse(read_file(dir / "out" / kOutputMarkerName));
  EXPECT_EQ(marker["sets"]["report"], nlohmann::json({"report.md", "tables/io.csv"}));
}

TEST(OutputDirectory, AnEmptyDirectoryMayBeWritten) {
  test::TempDir dir;
  fs::create_directories(dir / "out");
  write_output_directory(dir / "out", owner("model"), writes({{"config.json", "{}"}}));
  EXPECT_EQ(read_file(dir / "out/config.json"), "{}");
}

TEST(OutputDirectory, ADirectoryWithForeignFilesIsRefusedAndUntouched) {
  test::TempDir dir;
  fs::create_directories(dir / "study/data");
  write_file_atomically(dir / "study/notes.txt", "mine");
  write_file_atomically(dir / "study/data/x.csv", "1,2");
  const auto before = entries(dir / "study");
  const std::string message = error_of([&] {
    write_output_directory(dir / "study", owner("report"), writes({{"report.md", "r"}}));
  });
  EXPECT_NE(message.find("the directory holds files attnres did not write (data/, notes.txt)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("pass --force"), std::string::npos) << message;
  EXPECT_EQ(entries(dir / "study"), before);
  // An empty foreign folder counts as foreign too.
  fs::create_directories(dir / "empty-sub/inner");
  EXPECT_NE(error_of([&] {
              write_output_directory(dir / "empty-sub", owner("r"), writes({{"a", "1"}}));
            }),
            "");
}

TEST(OutputDirectory, ForceReplacesTheContentsButNeverTheInputs) {
  test::TempDir dir;
  fs::create_directories(dir / "study/data");
  write_file_atomically(dir / "study/notes.txt", "mine");
  write_file_atomically(dir / "study/data/x.csv", "1,2");
  write_file_atomically(dir / "study/s.toml", "scenario");
  OutputDirectoryOptions options = owner("report");
  options.force = true;
  options.inputs = {dir / "study/s.toml"};
  const auto result = write_output_directory(dir / "study", options, writes({{"report.md", "r"}}));
  EXPECT_EQ(entries(dir / "study"),
            (std::vector<std::string>{".attnres-output.json", "report.md", "s.toml"}));
  EXPECT_EQ(read_file(dir / "study/s.toml"), "scenario");
  EXPECT_NE(std::find(result.removed.begin(), result.removed.end(), "notes.txt"),
            result.removed.end());
  // An output that would land on an input is refused even with force.
  const std::string message = error_of([&] {
    write_output_directory(dir / "study", options, writes({{"s.toml", "overwritten"}}));
  });
  EXPECT_NE(message.find("would overwrite an input"), std::string::npos) << message;
  EXPECT_EQ(read_file(dir / "study/s.toml"), "scenario");
}

TEST(OutputDirectory, SeveralOwnersShareADirectoryAndEachReplacesOnlyItsOwnFiles) {
  test::TempDir dir;
  write_output_directory(dir / "s", owner("sweep:io"), writes({{"io.csv", "1"}, {"io.png", "p"}}));
  write_output_directory(dir / "s", owner("sweep:prefill"), writes({{"prefill.csv", "2"}}));
  EXPECT_EQ(read_file(dir / "s/io.csv"), "1");
  EXPECT_EQ(read_file(dir / "s/prefill.csv"), "2");
  // io again, without its chart this time: its old chart goes, prefill stays.
  write_output_directory(dir / "s", owner("sweep:io"), writes({{"io.csv", "3"}}));
  EXPECT_EQ(entries(dir / "s"),
            (std::vector<std::string>{".attnres-output.json", "io.csv", "prefill.csv"}));
  EXPECT_EQ(read_file(dir / "s/io.csv"), "3");
  // Another owner may not take a file that belongs to someone else.
  const std::string message = error_of([&] {
    write_output_directory(dir / "s", owner("sweep:other"), writes({{"io.csv", "x"}}));
  });
  EXPECT_NE(message.find("io.csv belongs to the output 'sweep:io'"), std::string::npos) << message;
  EXPECT_EQ(read_file(dir / "s/io.csv"), "3");
}

TEST(OutputDirectory, AFileAddedByTheUserToAnAttnresDirectoryMakesItForeign) {
  test::TempDir dir;
  write_output_directory(dir / "r", owner("report"), writes({{"report.md", "1"}}));
  write_file_atomically(dir / "r/notes.txt", "mine");
  EXPECT_NE(error_of([&] {
              write_output_directory(dir / "r", owner("report"), writes({{"report.md", "2"}}));
            }),
            "");
  EXPECT_EQ(read_file(dir / "r/report.md"), "1");
  EXPECT_EQ(read_file(dir / "r/notes.txt"), "mine");
}

TEST(OutputDirectory, AFailedOrCancelledBuildLeavesEverythingAsItWas) {
  test::TempDir dir;
  write_output_directory(dir / "r", owner("report"), writes({{"report.md", "old"}}));
  const auto before = entries(dir / "r");
  EXPECT_THROW(write_output_directory(dir / "r", owner("report"),
                                      [](const fs::path& staging) {
                                        write_file_atomically(staging / "report.md", "new");
                                        throw Error("simulated failure");
                                      }),
               Error);
  EXPECT_EQ(entries(dir / "r"), before);
  EXPECT_EQ(read_file(dir / "r/report.md"), "old");
  OutputDirectoryOptions cancelling = owner("report");
  cancelling.progress = [](std::size_t, std::size_t) { return false; };
  EXPECT_THROW(write_output_directory(dir / "r", cancelling, writes({{"report.md", "new"}})),
               Cancelled);
  EXPECT_EQ(entries(dir / "r"), before);
  // A directory the command created itself is removed again.
  EXPECT_THROW(write_output_directory(dir / "fresh/deeper", cancelling, writes({{"a", "1"}})),
               Cancelled);
  EXPECT_FALSE(fs::exists(dir / "fresh/deeper"));
}

TEST(OutputDirectory, MessagesNeverNameTheStagingFolder) {
  test::TempDir dir;
  const std::string message = error_of([&] {
    write_output_directory(dir / "r", owner("report"), [](const fs::path& staging) {
      write_file_atomically(staging / "missing-folder" / "report.md",
                            "x");  // fails: no such folder
    });
  });
  EXPECT_NE(message.find((dir / "r" / "missing-folder" / "report.md").string()), std::string::npos)
      << message;
  EXPECT_EQ(message.find("staging"), std::string::npos) << message;
}

TEST(OutputDirectory, StagingLeftByAKilledProcessIsRemovedAndReported) {
  test::TempDir dir;
  write_output_directory(dir / "r", owner("report"), writes({{"report.md", "1"}}));
  // A process that has exited: its pid is free (a child we waited for).
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);
  const std::string stale = ".attnres-staging." + std::to_string(child) + ".0";
  fs::create_directories(dir / "r" / stale / "charts");
  write_file_atomically(dir / "r" / stale / "charts/big.png", "half");
  const auto result =
      write_output_directory(dir / "r", owner("report"), writes({{"report.md", "2"}}));
  EXPECT_EQ(result.stale_staging, std::vector<std::string>{stale});
  EXPECT_FALSE(fs::exists(dir / "r" / stale));
  ASSERT_EQ(output_directory_notes(result).size(), 1u);
  EXPECT_NE(output_directory_notes(result)[0].find("left by an interrupted run"),
            std::string::npos);
  // A staging folder whose owner still runs (it holds the folder's lock) is left alone.
  const std::string live = ".attnres-staging." + std::to_string(getppid()) + ".7";
  fs::create_directories(dir / "r" / live);
  const int held = ::open((dir / "r" / live).c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_EQ(::flock(held, LOCK_EX), 0);
  write_output_directory(dir / "r", owner("report"), writes({{"report.md", "3"}}));
  EXPECT_TRUE(fs::exists(dir / "r" / live));
  // Its pid alone does not keep it: once nobody holds the lock (the owner died and its pid was
  // reused by another process, here our parent), it is removed.
  ::close(held);
  const auto later =
      write_output_directory(dir / "r", owner("report"), writes({{"report.md", "4"}}));
  EXPECT_FALSE(fs::exists(dir / "r" / live));
  EXPECT_EQ(later.stale_staging, std::vector<std::string>{live});
}

// The files of a directory with their bytes, attnres's bookkeeping left out.
std::map<std::string, std::string> contents(const fs::path& directory) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(directory)) {
    const std::string name = entry.path().lexically_relative(directory).generic_string();
    if (name.rfind(".attnres", 0) == 0) continue;
    if (entry.is_regular_file()) files[name] = read_file(entry.path());
  }
  return files;
}

TEST(OutputDirectory, AKillAtAnyStepOfACommitLeavesTheOldSetOrTheNewOne) {
  test::TempDir dir;
  const fs::path target = dir / "r";
  const auto first = writes({{"a.md", "old a"}, {"gone.csv", "old only"}, {"sub/b.png", "old b"}});
  const auto second = writes({{"a.md", "new a"}, {"sub/b.png", "new b"}, {"sub/c.svg", "new c"}});
  write_output_directory(target, owner("report"), first);
  const auto old_set = contents(target);
  const fs::path pristine = dir / "pristine";
  fs::copy(target, pristine, fs::copy_options::recursive);
  write_output_directory(target, owner("report"), second);
  const auto new_set = contents(target);

  int saw_old = 0, saw_new = 0, before_recovery_mixed = 0;
  for (long at = 1; at < 100; ++at) {
    fs::remove_all(target);
    fs::copy(pristine, target, fs::copy_options::recursive);
    const pid_t child = fork();
    if (child == 0) {
      setenv("ATTNRES_TEST_KILL_AT", std::to_string(at).c_str(), 1);
      try {
        write_output_directory(target, owner("report"), second);
      } catch (...) {
        _exit(3);
      }
      _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (WIFEXITED(status)) {
      EXPECT_EQ(WEXITSTATUS(status), 0);
      EXPECT_GT(at, 5);  // synced, record, three moves, removals, marker, record gone
      break;
    }
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    const auto raw = contents(target);
    if (raw != old_set && raw != new_set) ++before_recovery_mixed;
    // A reader refuses a directory with a record (and changes nothing); `attnres recover`
    // completes what the record says.
    if (fs::exists(target / ".attnres-commit.json")) {
      EXPECT_NE(
          error_of([&] { const OutputDirectoryReadLock lock(target); }).find("attnres recover"),
          std::string::npos);
      EXPECT_EQ(contents(target), raw) << "a reader changed the directory";
    }
    recover_output_directory(target);
    const std::map<std::string, std::string> seen = contents(target);
    if (seen == old_set) {
      ++saw_old;
    } else {
      EXPECT_EQ(seen, new_set) << "a kill at step " << at << " left a mix";
      ++saw_new;
    }
    EXPECT_FALSE(fs::exists(target / ".attnres-commit.json"));
    // And the next write needs no --force.
    EXPECT_EQ(error_of([&] { write_output_directory(target, owner("report"), second); }), "")
        << "after a kill at step " << at;
    EXPECT_EQ(contents(target), new_set);
  }
  EXPECT_GE(saw_old, 1);                // killed before the record: nothing happened
  EXPECT_GE(saw_new, 5);                // killed after it: completed by the next look
  EXPECT_GE(before_recovery_mixed, 1);  // the windows the record closes do exist
}

TEST(OutputDirectory, TemporaryFilesOfAKilledMarkerWriteAreNotForeign) {
  test::TempDir dir;
  write_output_directory(dir / "r", owner("report"), writes({{"report.md", "1"}}));
  write_file_atomically(dir / "r" / ".attnres-output.json.tmp123456", "{\"half");
  write_file_atomically(dir / "r" / ".attnres-commit.json.tmp42", "{");
  write_file_atomically(dir / "r" / "..attnres-output.json.attnres-tmp.999999.0", "{");
  EXPECT_EQ(error_of([&] { check_output_directory(dir / "r", owner("report")); }), "");
  write_output_directory(dir / "r", owner("report"), writes({{"report.md", "2"}}));
  EXPECT_EQ(entries(dir / "r"), (std::vector<std::string>{".attnres-output.json", "report.md"}));
  // A user's file whose name only contains the marker's is the user's: foreign, never removed.
  write_file_atomically(dir / "r" / ".attnres-output.json.bak", "mine");
  EXPECT_NE(error_of([&] {
              check_output_directory(dir / "r", owner("report"));
            }).find("holds files attnres did not write"),
            std::string::npos);
  EXPECT_EQ(read_file(dir / "r" / ".attnres-output.json.bak"), "mine");
}

TEST(OutputDirectory, ATornCommitRecordDropsTheWriteAndKeepsTheOldFiles) {
  test::TempDir dir;
  write_output_directory(dir / "r", owner("report"), writes({{"report.md", "1"}}));
  // A power cut before the record reached the disk: it is there but incomplete.
  write_file_atomically(dir / "r" / ".attnres-commit.json", "{\"owner\": \"rep");
  fs::create_directories(dir / "r" / ".attnres-staging.1.0");
  write_file_atomically(dir / "r" / ".attnres-staging.1.0" / "report.md", "2");
  {
    // A reader reads the old set, says so, and changes nothing.
    const OutputDirectoryReadLock lock(dir / "r");
    ASSERT_EQ(lock.notes().size(), 1u);
    EXPECT_NE(lock.notes()[0].find("cut short before any file moved"), std::string::npos);
    EXPECT_TRUE(fs::exists(dir / "r" / ".attnres-commit.json"));
  }
  const std::vector<std::string> notes = recover_output_directory(dir / "r");
  ASSERT_EQ(notes.size(), 2u);  // the record dropped, the staging folder removed
  EXPECT_NE(notes[0].find("dropped an interrupted write"), std::string::npos);
  EXPECT_EQ(read_file(dir / "r" / "report.md"), "1");
  EXPECT_FALSE(fs::exists(dir / "r" / ".attnres-commit.json"));
}

TEST(OutputDirectory, ConcurrentWritersOfOneDirectoryNeverRefuseEachOther) {
  test::TempDir dir;
  std::vector<pid_t> children;
  for (int writer = 0; writer < 2; ++writer) {
    const pid_t child = fork();
    if (child == 0) {
      int failures = 0;
      for (int i = 0; i < 40; ++i) {
        try {
          std::string name = "w";  // appended: GCC 12 warns falsely on "w" + std::to_string
          name += std::to_string(writer);
          write_output_directory(dir / "s", owner("sweep:" + name),
                                 writes({{name + ".csv", std::to_string(i)}}));
        } catch (...) {
          ++failures;
        }
      }
      _exit(failures);
    }
    children.push_back(child);
  }
  for (const pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "refusals of a writer";
  }
  EXPECT_EQ(read_file(dir / "s" / "w0.csv"), "39");
  EXPECT_EQ(read_file(dir / "s" / "w1.csv"), "39");
}

TEST(OutputDirectory, PathsAreCleaned) {
  EXPECT_EQ(clean_output_path("out/r/", "--out"), fs::path("out/r"));
  EXPECT_EQ(clean_output_path("out/r//", "--out"), fs::path("out/r"));
  EXPECT_EQ(clean_output_path("./x/", "--out"), fs::path("x"));
  EXPECT_EQ(clean_output_path(".", "--out"), fs::path("."));
  EXPECT_EQ(clean_output_path("./", "--out"), fs::path("."));
  EXPECT_EQ(clean_output_path("/tmp/", "--out"), fs::path("/tmp"));
  EXPECT_THROW(clean_output_path("", "--out"), Error);
}

TEST(OutputDirectory, TheCurrentDirectoryCanBeTheTarget) {
  test::TempDir dir;
  const fs::path previous = fs::current_path();
  fs::current_path(dir.path());
  write_output_directory(clean_output_path("./", "--out"), owner("sweep:io"),
                         writes({{"io.csv", "1"}}));
  fs::current_path(previous);
  EXPECT_EQ(read_file(dir / "io.csv"), "1");
  EXPECT_TRUE(fs::exists(dir / kOutputMarkerName));
}

TEST(OutputDirectory, AFileInThePlaceOfTheDirectoryIsRefused) {
  test::TempDir dir;
  write_file_atomically(dir / "plain", "x");
  EXPECT_NE(error_of([&] {
              write_output_directory(dir / "plain", owner("r"), writes({{"a", "1"}}));
            }).find("exists and is not a directory"),
            std::string::npos);
  EXPECT_EQ(read_file(dir / "plain"), "x");
}

TEST(OutputDirectory, NamesAreValidated) {
  for (const char* bad : {"", ".", "..", "a/b", "../x", "a\\b", ".hidden", "tab\tname"}) {
    EXPECT_THROW(validate_output_name(bad, "--name"), Error) << bad;
  }
  for (const char* good : {"io", "blocks-sweep", "io_vs_N", "sweep.v2"}) {
    EXPECT_NO_THROW(validate_output_name(good, "--name")) << good;
  }
}

TEST(OutputDirectory, AFileOutputMayNotOverwriteAnInput) {
  test::TempDir dir;
  fs::create_directories(dir / "m");
  write_file_atomically(dir / "m/model.safetensors", "w");
  EXPECT_THROW(refuse_overwriting_inputs(dir / "m/model.safetensors", {dir / "m"}, "--dump"),
               Error);
  EXPECT_THROW(refuse_overwriting_inputs(dir / "m/../m/model.safetensors", {dir / "m"}, "--dump"),
               Error);
  EXPECT_NO_THROW(refuse_overwriting_inputs(dir / "dump.safetensors", {dir / "m"}, "--dump"));
}

// True when `text` is well-formed UTF-8 (an independent check, byte patterns per RFC 3629).
bool valid_utf8(const std::string& text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t n = c < 0x80           ? 1
                    : (c >> 5) == 0x6  ? 2
                    : (c >> 4) == 0xE  ? 3
                    : (c >> 3) == 0x1E ? 4
                                       : 0;
    if (n == 0 || i + n > text.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// Everything in a directory, links as links (never followed), bookkeeping included: "nothing
// changed" compares two of these.
std::map<std::string, std::string> snapshot(const fs::path& directory) {
  std::map<std::string, std::string> all;
  for (const auto& entry : fs::recursive_directory_iterator(directory)) {
    const std::string name = entry.path().lexically_relative(directory).generic_string();
    if (entry.is_symlink()) {
      all[name] = "link -> " + fs::read_symlink(entry.path()).string();
    } else if (entry.is_directory()) {
      all[name] = "folder";
    } else {
      all[name] = "file: " + read_file(entry.path());
    }
  }
  return all;
}

// A commit record as attnres writes it, naming `staging` (a folder in `target`) by its device
// and inode unless `id` overrides them: what a crafted record inside a downloaded directory, or
// one written here by a process told to, would hold.
void write_record(const fs::path& target, const std::string& staging,
                  const std::vector<std::string>& files, const std::vector<std::string>& remove,
                  const std::vector<std::string>& directories,
                  std::optional<std::pair<std::uint64_t, std::uint64_t>> id = std::nullopt) {
  struct stat st {};
  ASSERT_EQ(::lstat((target / staging).c_str(), &st), 0);
  const auto [device, inode] =
      id.value_or(std::pair<std::uint64_t, std::uint64_t>(st.st_dev, st.st_ino));
  const nlohmann::json record = {{"owner", "model"},
                                 {"staging", staging},
                                 {"staging_id", {device, inode}},
                                 {"files", files},
                                 {"remove", remove},
                                 {"directories", directories},
                                 {"sets", {{"model", files}}}};
  write_file_atomically(target / ".attnres-commit.json", record.dump());
}

// The probe's reproducer: `evil/lnk -> ../victims` and a record that moves a file to
// lnk/.bashrc, removes lnk/v.txt and the folder lnk/vdir. Even with the staging folder's real
// inode (a record written in place), nothing outside `evil` changes, and neither does `evil`.
TEST(OutputDirectory, ARecordNeverWritesOrRemovesThroughALink) {
  test::TempDir dir;
  fs::create_directories(dir / "victims/vdir");
  write_file_atomically(dir / "victims/v.txt", "mine");
  write_file_atomically(dir / "victims/vdir/w.txt", "mine too");
  fs::create_directories(dir / "evil/.attnres-staging.1.0/lnk");
  write_file_atomically(dir / "evil/.attnres-staging.1.0/lnk/.bashrc", "rm -rf ~");
  write_file_atomically(dir / "evil/config.json", "{}");
  fs::create_directory_symlink("../victims", dir / "evil/lnk");
  write_record(dir / "evil", ".attnres-staging.1.0", {"lnk/.bashrc"}, {"lnk/v.txt"}, {"lnk/vdir"});
  const auto victims = snapshot(dir / "victims");
  const auto evil = snapshot(dir / "evil");

  const std::string recovering = error_of([&] { recover_output_directory(dir / "evil"); });
  EXPECT_NE(recovering.find("passes through lnk, a symbolic link"), std::string::npos)
      << recovering;
  EXPECT_NE(recovering.find("changed nothing"), std::string::npos) << recovering;
  const std::string reading = error_of([&] { const OutputDirectoryReadLock lock(dir / "evil"); });
  EXPECT_NE(reading.find("attnres recover"), std::string::npos) << reading;
  const std::string writing = error_of([&] {
    write_output_directory(dir / "evil", owner("model"), writes({{"a", "b"}}));
  });
  EXPECT_NE(writing.find("symbolic link"), std::string::npos) << writing;
  auto forced = owner("model");
  forced.force = true;
  EXPECT_NE(error_of([&] {
              write_output_directory(dir / "evil", forced, writes({{"a", "b"}}));
            }).find("symbolic link"),
            std::string::npos);
  EXPECT_EQ(snapshot(dir / "victims"), victims);
  EXPECT_EQ(snapshot(dir / "evil"), evil);

  // A link in the staging folder is refused the same way (it would move the user's file in).
  fs::remove_all(dir / "evil/.attnres-staging.1.0/lnk");
  fs::create_directory_symlink("../../victims", dir / "evil/.attnres-staging.1.0/lnk");
  write_record(dir / "evil", ".attnres-staging.1.0", {"lnk/v.txt"}, {}, {});
  EXPECT_NE(error_of([&] { recover_output_directory(dir / "evil"); }).find("a symbolic link"),
            std::string::npos);
  EXPECT_EQ(snapshot(dir / "victims"), victims);
}

// A record copied from elsewhere (a download, an archive: another inode) or written by hand is
// refused even when every path in it is harmless, and so is one naming "..", an absolute path,
// the marker or a staging folder that is a link.
TEST(OutputDirectory, ARecordItsWriterDidNotMakeHereIsRefused) {
  test::TempDir dir;
  fs::create_directories(dir / "d/.attnres-staging.7.0");
  write_file_atomically(dir / "d/.attnres-staging.7.0/a.txt", "new");
  write_file_atomically(dir / "d/a.txt", "old");
  const std::vector<std::pair<std::string, std::function<void()>>> cases = {
      {"not the one its writer made",
       [&] {
         write_record(dir / "d", ".attnres-staging.7.0", {"a.txt"}, {}, {}, {{1, 2}});
       }},
      {"not a path inside",
       [&] { write_record(dir / "d", ".attnres-staging.7.0", {"a.txt"}, {"../x"}, {}); }},
      {"not a path inside",
       [&] { write_record(dir / "d", ".attnres-staging.7.0", {"a.txt"}, {"/etc/passwd"}, {}); }},
      {"not a path inside",
       [&] { write_record(dir / "d", ".attnres-staging.7.0", {".attnres-output.json"}, {}, {}); }},
  };
  for (const auto& [expected, write] : cases) {
    write();
    const auto before = snapshot(dir / "d");
    const std::string message = error_of([&] { recover_output_directory(dir / "d"); });
    EXPECT_NE(message.find(expected), std::string::npos) << message;
    EXPECT_EQ(snapshot(dir / "d"), before);
  }
  // The staging folder itself a link (to a folder elsewhere, with the right inode there).
  fs::create_directories(dir / "elsewhere");
  write_file_atomically(dir / "elsewhere/a.txt", "theirs");
  fs::create_directory_symlink("../elsewhere", dir / "d/.attnres-staging.8.0");
  struct stat st {};
  ASSERT_EQ(::stat((dir / "elsewhere").c_str(), &st), 0);
  write_record(dir / "d", ".attnres-staging.8.0", {"a.txt"}, {}, {}, {{st.st_dev, st.st_ino}});
  EXPECT_NE(error_of([&] { recover_output_directory(dir / "d"); }).find("not a folder there"),
            std::string::npos);
  EXPECT_EQ(read_file(dir / "elsewhere/a.txt"), "theirs");
  EXPECT_EQ(read_file(dir / "d/a.txt"), "old");
}

// A marker that names lnk/x (the previous set's files, removed when the set is written again) is
// not used: the directory counts as foreign; with --force the link itself goes, never what it
// points to.
TEST(OutputDirectory, AMarkerNamingAPathThroughALinkIsNotUsed) {
  test::TempDir dir;
  fs::create_directories(dir / "victims");
  write_file_atomically(dir / "victims/.bashrc", "mine");
  fs::create_directories(dir / "m");
  write_file_atomically(dir / "m/config.json", "{}");
  fs::create_directory_symlink("../victims", dir / "m/lnk");
  write_file_atomically(dir / "m/.attnres-output.json",
                        R"({"sets": {"model": ["config.json", "lnk/.bashrc"]}})");
  const auto victims = snapshot(dir / "victims");
  EXPECT_NE(error_of([&] {
              write_output_directory(dir / "m", owner("model"), writes({{"config.json", "{1}"}}));
            }).find("holds files attnres did not write"),
            std::string::npos);
  auto forced = owner("model");
  forced.force = true;
  EXPECT_EQ(error_of([&] {
              write_output_directory(dir / "m", forced, writes({{"config.json", "{1}"}}));
            }),
            "");
  EXPECT_EQ(snapshot(dir / "victims"), victims);
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir / "m/lnk")));
  EXPECT_EQ(read_file(dir / "m/config.json"), "{1}");
}

// --force replacing a foreign link with a folder of the set (a report's tables/ where a link
// `tables -> ../victims` was): the files go into a real folder, never through the link.
TEST(OutputDirectory, ForceReplacesALinkWithARealFolder) {
  test::TempDir dir;
  fs::create_directories(dir / "victims");
  write_file_atomically(dir / "victims/x.csv", "mine");
  fs::create_directories(dir / "r");
  fs::create_directory_symlink("../victims", dir / "r/tables");
  auto forced = owner("report");
  forced.force = true;
  write_output_directory(dir / "r", forced, writes({{"tables/x.csv", "new"}, {"a.md", "a"}}));
  EXPECT_EQ(read_file(dir / "victims/x.csv"), "mine");
  EXPECT_FALSE(fs::is_symlink(dir / "r/tables"));
  EXPECT_EQ(read_file(dir / "r/tables/x.csv"), "new");
}

// --force keeps every file of an input directory inside the target (export --model out/m --out
// out), not only the directory's name; an input that is the target keeps everything but the
// command's own previous files.
TEST(OutputDirectory, ForceKeepsEveryFileOfAnInputDirectory) {
  test::TempDir dir;
  fs::create_directories(dir / "out/m/sub");
  write_file_atomically(dir / "out/m/config.json", "c");
  write_file_atomically(dir / "out/m/sub/w.bin", "w");
  write_file_atomically(dir / "out/notes.txt", "n");
  auto forced = owner("export");
  forced.force = true;
  forced.inputs = {dir / "out/m"};
  write_output_directory(dir / "out", forced, writes({{"model.safetensors", "x"}}));
  EXPECT_EQ(read_file(dir / "out/m/config.json"), "c");
  EXPECT_EQ(read_file(dir / "out/m/sub/w.bin"), "w");
  EXPECT_FALSE(fs::exists(dir / "out/notes.txt"));
  EXPECT_NE(error_of([&] {
              write_output_directory(dir / "out", forced, writes({{"m/config.json", "x"}}));
            }).find("would overwrite an input"),
            std::string::npos);

  // The input is the target itself (forward --model m --chart m).
  write_output_directory(dir / "t", owner("model"), writes({{"config.json", "c"}}));
  write_file_atomically(dir / "t/notes.txt", "n");
  auto charts = owner("charts");
  charts.force = true;
  charts.inputs = {dir / "t"};
  write_output_directory(dir / "t", charts, writes({{"a.png", "1"}, {"b.png", "1"}}));
  write_output_directory(dir / "t", charts, writes({{"a.png", "2"}}));
  EXPECT_EQ(read_file(dir / "t/config.json"), "c");
  EXPECT_EQ(read_file(dir / "t/notes.txt"), "n");
  EXPECT_EQ(read_file(dir / "t/a.png"), "2");
  EXPECT_FALSE(fs::exists(dir / "t/b.png"));  // the command's own previous file
  EXPECT_NE(error_of([&] {
              write_output_directory(dir / "t", charts, writes({{"config.json", "x"}}));
            }).find("would overwrite an input"),
            std::string::npos);
}

// What docs/output-safety.md tells other programs: a reader holding a shared flock on the
// directory sees one whole set, however long it reads; the writer switches once it lets go.
TEST(OutputDirectory, APlainReaderHoldingASharedLockSeesOneWholeSet) {
  test::TempDir dir;
  const fs::path target = dir / "r";
  write_output_directory(target, owner("report"), writes({{"a.md", "1"}, {"b.json", "1"}}));
  const int fd = ::open(target.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_SH), 0);
  const pid_t child = fork();
  if (child == 0) {
    ::close(fd);  // the lock belongs to the open file the child shares: only the parent holds it
    try {
      write_output_directory(target, owner("report"), writes({{"a.md", "2"}, {"b.json", "2"}}));
    } catch (...) {
      _exit(3);
    }
    _exit(0);
  }
  // Whatever the writer has done meanwhile, it cannot switch while the lock is held.
  for (int look = 0; look < 200; ++look) {
    ASSERT_EQ(read_file(target / "a.md"), "1");
    ASSERT_EQ(read_file(target / "b.json"), "1");
    ASSERT_FALSE(fs::exists(target / ".attnres-commit.json"));
  }
  ::close(fd);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(read_file(target / "a.md"), "2");
  EXPECT_EQ(read_file(target / "b.json"), "2");
}

// A temporary file of a write whose name an attacker placed as a link is never written through.
TEST(AtomicFile, ATemporaryThatIsALinkIsNeverWrittenThrough) {
  test::TempDir dir;
  write_file_atomically(dir / "victim.txt", "mine");
  const fs::path temporary = temporary_path_for(dir / "out.txt");
  // The next temporary's name: the counter moved on by one.
  const std::string name = temporary.filename().string();
  const std::size_t dot = name.rfind('.');
  const std::string next =
      name.substr(0, dot + 1) + std::to_string(std::stoul(name.substr(dot + 1)) + 1);
  fs::create_symlink(dir / "victim.txt", dir / next);
  EXPECT_NE(error_of([&] { write_file_atomically(dir / "out.txt", "theirs"); }), "");
  EXPECT_EQ(read_file(dir / "victim.txt"), "mine");
}

TEST(PrintableText, EscapesWhatIsNotPrintableUtf8) {
  EXPECT_EQ(printable_text("plain ascii, tab\tand newline\n"), "plain ascii, tab\tand newline\n");
  EXPECT_EQ(printable_text("P·V = 4 × 4, α ≤ 1, 🙂"), "P·V = 4 × 4, α ≤ 1, 🙂");
  EXPECT_EQ(printable_text("key\xff\x1b[31mred"), "key\\xff\\x1b[31mred");
  EXPECT_EQ(printable_text(std::string("nul\0byte", 8)), "nul\\x00byte");
  EXPECT_EQ(printable_text("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(printable_text("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a UTF-16 surrogate
  EXPECT_EQ(printable_text("\xe2\x82"), "\\xe2\\x82");           // truncated sequence
  EXPECT_EQ(printable_text("\xc2\x9b"), "\\xc2\\x9b");           // C1 control (CSI)
  EXPECT_EQ(printable_text("del\x7f"), "del\\x7f");
  // Whatever goes in, valid UTF-8 without raw escapes comes out.
  std::mt19937 random(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes(static_cast<std::size_t>(random() % 24), '\0');
    for (char& b : bytes) b = static_cast<char>(random() % 256);
    const std::string safe = printable_text(bytes);
    ASSERT_TRUE(valid_utf8(safe)) << trial;
    ASSERT_EQ(safe.find('\x1b'), std::string::npos) << trial;
    ASSERT_EQ(printable_text(safe), safe) << "idempotent";
  }
}

}  // namespace test_output_dir
}  // namespace attnres
