// What an output directory holds and whose it is (output_dir.cpp; docs/output-safety.md): the
// marker of the files attnres wrote, the listing, which entries are foreign, the staging folders'
// locks, bookkeeping names, the path rules of a record or marker, and durable writes. Private to
// attnres_base; split from output_dir.cpp, which keeps the commit (records, the switch, recovery).
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "attnres/output_dir.hpp"

namespace attnres::output_ownership {

namespace fs = std::filesystem;

// A staging folder's name starts with this; the commit record (docs/output-safety.md): while it
// exists, a write is being switched in.
inline constexpr const char* kStagingPrefix = ".attnres-staging.";
inline constexpr const char* kCommitName = ".attnres-commit.json";

// The marker: for each set, the relative paths (generic form) attnres wrote.
using Sets = std::map<std::string, std::set<std::string>>;

struct Marker {
  bool present = false;
  bool readable = true;
  Sets sets;
};

// A staging folder's owner holds an exclusive flock on it for as long as it runs (the kernel
// drops it when the process ends, however it ends), so a folder whose lock can be taken was left
// by a process that is gone, even when its pid has been reused since.
class StagingLock {
 public:
  explicit StagingLock(const fs::path& folder)
      : fd_(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) {
    try_lock();
  }
  StagingLock(int root, const std::string& name)
      : fd_(::openat(root, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) {
    try_lock();
  }
  void try_lock() {
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~StagingLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  StagingLock(const StagingLock&) = delete;
  StagingLock& operator=(const StagingLock&) = delete;
  bool held() const { return fd_ >= 0; }

 private:
  int fd_;
};

struct Listing {
  std::vector<std::string> files;  // non-directories, relative generic paths
  std::vector<std::string> directories;
};

struct Ownership {
  Marker marker;
  Listing listing;
  std::vector<std::string> foreign_files, foreign_directories;
};

void sync_path(const fs::path& path, bool directory);
void sync_tree(const fs::path& root);
void write_durably(const fs::path& path, const std::string& content);
std::string quoted(const fs::path& path);
Sets sets_from_json(const nlohmann::json& json);
bool sets_inside(int root, const Sets& sets, const std::set<std::string>* replaceable = nullptr);
nlohmann::json sets_json(const Sets& sets);
Marker read_marker(const fs::path& directory);
void write_marker(const fs::path& directory, const Sets& sets);
bool is_staging_name(const std::string& name);
bool is_bookkeeping_name(const std::string& name);
Listing list_directory(const fs::path& directory);
bool has_prefix_dir(const std::string& file, const std::string& directory);
std::vector<std::string> inputs_inside(const fs::path& directory,
                                       const std::vector<fs::path>& inputs);
bool protects(const std::vector<std::string>& inputs, const std::string& entry);
Ownership inspect(const fs::path& directory);
std::string describe_entries(const std::vector<std::string>& files,
                             const std::vector<std::string>& directories);
void check_ownership(const fs::path& target, const OutputDirectoryOptions& options,
                     const Ownership& o, const std::vector<std::string>& inputs);
bool inside(const std::string& relative);

}  // namespace attnres::output_ownership
