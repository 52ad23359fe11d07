// Atomic file writes: the temporary file is hidden and names its process, and a temporary left by
// a process that was killed is removed by the next write of the same file.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "attnres/atomic_file.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_atomic_file {

namespace fs = std::filesystem;

std::vector<std::string> entries(const fs::path& folder) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(folder)) out.push_back(entry.path().filename());
  std::sort(out.begin(), out.end());
  return out;
}

// The PID of a process that has ended (a child that exited and was reaped).
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

TEST(AtomicFile, TheTemporaryIsHiddenAndNamesItsProcess) {
  const fs::path temporary = temporary_path_for("/out/dump.safetensors");
  EXPECT_EQ(temporary.parent_path(), fs::path("/out"));
  const std::string name = temporary.filename();
  const std::string prefix = ".dump.safetensors.attnres-tmp." + std::to_string(::getpid()) + ".";
  EXPECT_EQ(name.rfind(prefix, 0), 0u) << name;
  EXPECT_NE(temporary_path_for("/out/dump.safetensors"), temporary);  // a new one each call
}

TEST(AtomicFile, AStaleTemporaryOfADeadProcessIsRemovedByTheNextWrite) {
  test::TempDir dir;
  const std::string dead = ".dump.safetensors.attnres-tmp." + std::to_string(dead_pid()) + ".0";
  const std::string alive = ".dump.safetensors.attnres-tmp." + std::to_string(::getppid()) + ".0";
  const std::string other = ".other.safetensors.attnres-tmp." + std::to_string(dead_pid()) + ".0";
  for (const auto& name : {dead, alive, other}) std::ofstream(dir / name) << "half";
  write_file_atomically(dir / "dump.safetensors", "complete");
  // The dead process's temporary of this file is gone; a running process's one and another
  // file's one are left alone; no temporary of this write remains.
  std::vector<std::string> expected = {alive, other, "dump.safetensors"};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(entries(dir.path()), expected);
  EXPECT_EQ(read_file(dir / "dump.safetensors"), "complete");
  EXPECT_EQ(remove_stale_temporaries(dir / "other.safetensors"), 1u);
}

}  // namespace test_atomic_file
}  // namespace attnres
