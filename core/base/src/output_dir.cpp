#include "attnres/output_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/json_reading.hpp"
#include "attnres/version.hpp"
#include "no_follow.hpp"
#include "output_ownership.hpp"

namespace attnres {

namespace fs = std::filesystem;
using namespace no_follow;         // NOLINT: the walk below the directory (no_follow.hpp)
using namespace output_ownership;  // NOLINT: marker, listing, ownership (output_ownership.hpp)

namespace {

// ---- Test hook: deterministic kills inside a commit.
//
// ATTNRES_TEST_KILL_AT=N makes the process SIGKILL itself at the N-th step of its directory
// commits (counted over the whole process: staging synced, commit record written, each file
// moved, the files removed, the marker written, the record removed). The kill tests
// (tests/cli/test_kill.cpp) run a command for N = 1, 2, ... until it completes, so every window
// between two steps is hit exactly once, without sleeps or luck.
void commit_step() {
  const char* text = std::getenv("ATTNRES_TEST_KILL_AT");
  if (text == nullptr) return;
  static std::atomic<long> steps{0};
  static std::atomic<pid_t> counted_for{0};
  if (counted_for.exchange(::getpid()) != ::getpid()) steps = 0;  // a forked child counts anew
  if (++steps == std::atol(text)) ::raise(SIGKILL);
}

std::atomic<unsigned> staging_counter{0};

void remove_quietly(const fs::path& path) {
  std::error_code ignored;
  fs::remove_all(path, ignored);
}

// A lock on the directory: exclusive for a commit or a recovery, shared while a reader reads
// (several commands may share a directory). flock, so the kernel drops it when a process dies.
class DirectoryLock {
 public:
  DirectoryLock(const fs::path& directory, int operation)
      : fd_(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_ >= 0) {
      while (::flock(fd_, operation) != 0 && errno == EINTR) {
      }
    }
  }
  ~DirectoryLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  void share() {
    if (fd_ >= 0) ::flock(fd_, LOCK_SH);
  }

 private:
  int fd_;
};

// What a commit switches in, written to kCommitName before the first file moves. Applying it is
// idempotent (a file moves only if it is still in the staging folder), so a commit cut short at
// any point is completed by applying it again.
struct CommitRecord {
  std::string owner;
  std::string staging;                   // folder name inside the target
  std::uint64_t staging_device = 0;      // the staging folder its writer made (stat's st_dev,
  std::uint64_t staging_inode = 0;       // st_ino): a copied or crafted record names no such folder
  std::vector<std::string> files;        // staged files, moved to the same relative path
  std::vector<std::string> remove;       // files removed (the set's old files, --force)
  std::vector<std::string> directories;  // folders removed when empty, deepest first
  Sets sets;                             // the marker after the commit
};

nlohmann::json record_json(const CommitRecord& r) {
  return {{"tool", "attnres"},
          {"about", "a write of this directory being switched in (see docs/output-safety.md)"},
          {"owner", r.owner},
          {"staging", r.staging},
          {"staging_id", {r.staging_device, r.staging_inode}},
          {"files", r.files},
          {"remove", r.remove},
          {"directories", r.directories},
          {"sets", sets_json(r.sets)}};
}

// A record that is not valid JSON of this shape throws (a torn record).
CommitRecord record_from_json(const nlohmann::json& j) {
  CommitRecord r;
  r.owner = j.at("owner").get<std::string>();
  r.staging = j.at("staging").get<std::string>();
  if (const auto id = j.find("staging_id"); id != j.end()) {
    r.staging_device = id->at(0).get<std::uint64_t>();
    r.staging_inode = id->at(1).get<std::uint64_t>();
  }
  r.files = j.at("files").get<std::vector<std::string>>();
  r.remove = j.at("remove").get<std::vector<std::string>>();
  r.directories = j.at("directories").get<std::vector<std::string>>();
  r.sets = sets_from_json(j.at("sets"));
  return r;
}

// Before a record is applied (the one a writer is about to write, or one found on disk), every
// path in it is checked: inside the directory as text, and reachable without passing through a
// link or a file; the staging folder a real folder, the one its writer made. Throws
// attnres::Error saying what is wrong; nothing has changed.
void check_record(int root, const fs::path& target, const CommitRecord& r, bool found) {
  auto refuse = [&](const std::string& why) {
    if (!found) {
      throw Error(quoted(target) + ": this write " + why + "; attnres changed nothing in it");
    }
    throw Error(quoted(target) + ": its " + kCommitName + " (a write attnres records before it " +
                "moves files in) " + why +
                "; attnres changed nothing in it. A directory that came from elsewhere (a "
                "download, an archive, a copy) cannot complete a write made in another place: "
                "delete the record if you trust the files, or the directory");
  };
  if (!is_staging_name(r.staging) || r.staging.find('/') != std::string::npos)
    refuse("names " + printable_text(r.staging) + ", which is not a staging folder");
  struct stat st {};
  if (::fstatat(root, r.staging.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
    refuse("names the staging folder " + printable_text(r.staging) +
           ", which is not a folder there");
  if (static_cast<std::uint64_t>(st.st_dev) != r.staging_device ||
      static_cast<std::uint64_t>(st.st_ino) != r.staging_inode)
    refuse("names the staging folder " + printable_text(r.staging) +
           ", but not the one its writer made (the record was copied or written by hand)");
  for (const auto* list : {&r.files, &r.remove, &r.directories}) {
    for (const auto& path : *list) {
      if (!inside(path))
        refuse("names " + printable_text(path) + ", which is not a path inside the directory");
    }
  }

  const std::set<std::string> replaceable(r.remove.begin(), r.remove.end());
  try {
    for (const auto& file : r.files) {
      place_of(root, r.staging + "/" + file, Walk::check);
      place_of(root, file, Walk::check, &replaceable);
    }
    for (const auto* list : {&r.remove, &r.directories}) {
      for (const auto& path : *list) place_of(root, path, Walk::check);
    }
  } catch (const UnsafePath& unsafe) {
    refuse("names " + printable_text(unsafe.path) + ", which passes through " +
           printable_text(unsafe.entry) + ", " + unsafe.what +
           " (attnres never writes, moves or removes anything through one)");
  }
  if (!sets_inside(root, r.sets, &replaceable))
    refuse("lists files that are not plain paths inside the directory");
}

// Moves, removals, marker, then the record goes; every path walked from `root` without
// following a link (check_record has checked them). Returns the files removed.
std::vector<std::string> apply_commit(int root, const fs::path& target, const CommitRecord& r) {
  const std::set<std::string> replaceable(r.remove.begin(), r.remove.end());
  try {
    for (const auto& file : r.files) {
      const Place source = place_of(root, r.staging + "/" + file, Walk::open);
      if (!source.parent.valid() ||
          kind_at(source.parent.get(), source.name, file) == Kind::missing)
        continue;  // moved before the cut
      const Place destination = place_of(root, file, Walk::create, &replaceable);
      if (kind_at(destination.parent.get(), destination.name, file) == Kind::folder)
        remove_tree_at(destination.parent.get(), destination.name, file);  // --force only
      if (::renameat(source.parent.get(), source.name.c_str(), destination.parent.get(),
                     destination.name.c_str()) != 0)
        throw_errno("rename", file, errno);
      // The folder's new entry reaches the disk before the record goes.
      if (file.find('/') != std::string::npos) ::fsync(destination.parent.get());
      commit_step();
    }
    std::vector<std::string> removed;
    for (const auto& file : r.remove) {
      const Place place = place_of(root, file, Walk::open);
      if (!place.parent.valid()) continue;
      const Kind kind = kind_at(place.parent.get(), place.name, file);
      if (kind == Kind::missing || kind == Kind::folder) continue;
      if (::unlinkat(place.parent.get(), place.name.c_str(), 0) == 0) removed.push_back(file);
    }
    for (const auto& dir : r.directories) {
      const Place place = place_of(root, dir, Walk::open);
      if (place.parent.valid() && kind_at(place.parent.get(), place.name, dir) == Kind::folder &&
          ::unlinkat(place.parent.get(), place.name.c_str(), AT_REMOVEDIR) == 0)
        removed.push_back(dir + "/");  // only when empty (ENOTEMPTY otherwise)
    }
    commit_step();
    write_marker(target, r.sets);
    commit_step();
    if (::unlinkat(root, kCommitName, 0) != 0) throw_errno("remove", kCommitName, errno);
    ::fsync(root);
    commit_step();
    remove_tree_at(root, r.staging, r.staging);
    return removed;
  } catch (const UnsafePath& unsafe) {
    // A link swapped in after check_record (another process at work in the directory).
    throw Error(quoted(target) + ": " + printable_text(unsafe.path) + " passes through " +
                printable_text(unsafe.entry) + ", " + unsafe.what +
                "; attnres never writes through one (the write stopped there)");
  }
}

// The commit record found in `target` (nullopt when there is none). A torn one (a power cut
// before it reached the disk: no file had moved) is nullopt with `torn` set.
std::optional<CommitRecord> find_record(int root, const fs::path& target, bool& torn) {
  torn = false;
  std::optional<std::string> text;
  try {
    text = read_bookkeeping(root, kCommitName);
  } catch (const UnsafePath& unsafe) {
    throw Error(quoted(target) + ": its " + kCommitName + " is " + unsafe.what +
                ", never one attnres wrote; attnres changed nothing in it (delete it if you "
                "trust the directory's files)");
  }
  if (!text) return std::nullopt;
  try {
    // Depth-capped, duplicate keys refused (json_reading.hpp): a crafted record cannot exhaust the
    // stack; one that is not attnres's JSON is treated as torn.
    return record_from_json(parse_json_document(*text, (target / kCommitName).string()));
  } catch (const std::exception&) {
    torn = true;
    return std::nullopt;
  }
}

// Under the exclusive lock: completes a commit that a killed process left (its record is there),
// removes abandoned staging folders and temporary files of the bookkeeping. `notes` gets what
// was done, in words. A record that names anything but entries really inside the directory is
// refused (attnres::Error) before anything changes.
void recover_entries(const fs::path& target, std::vector<std::string>& stale,
                     std::vector<std::string>& notes);

void recover(const fs::path& target, std::vector<std::string>& stale,
             std::vector<std::string>& notes) {
  try {
    recover_entries(target, stale, notes);
  } catch (const fs::filesystem_error& failure) {
    throw Error(printable_text(target.string()) + ": cannot complete the interrupted write " +
                "recorded in " + kCommitName + ": " + printable_text(failure.path1().string()) +
                ": " + failure.code().message());
  }
}

void recover_entries(const fs::path& target, std::vector<std::string>& stale,
                     std::vector<std::string>& notes) {
  const Fd root = open_target(target);
  std::string keep;  // the staging folder of the record being completed
  bool torn = false;
  const std::optional<CommitRecord> record = find_record(root.get(), target, torn);
  if (torn) {
    // Torn by a power cut before it was synced: no file had moved yet; the write is dropped.
    ::unlinkat(root.get(), kCommitName, 0);
    notes.push_back("dropped an interrupted write of " + printable_text(target.string()) +
                    " (its commit record was incomplete; no file had been replaced)");
  }
  if (record) {
    check_record(root.get(), target, *record, /*found=*/true);
    apply_commit(root.get(), target, *record);
    notes.push_back("completed the interrupted write of '" + printable_text(record->owner) +
                    "' in " + printable_text(target.string()) + " (" +
                    std::to_string(record->files.size()) + " files)");
    keep = record->staging;
  }
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(target, error)) {
    const std::string name = entry.path().filename().string();
    if (is_staging_name(name)) {
      if (name != keep && kind_at(root.get(), name, name) == Kind::folder &&
          StagingLock(root.get(), name).held()) {
        try {
          remove_tree_at(root.get(), name, name);
          stale.push_back(name);
        } catch (const fs::filesystem_error&) {
          // Left for the next command (a folder it cannot remove is reported by the listing).
        }
      }
    } else if (name != kOutputMarkerName && name != kCommitName && is_bookkeeping_name(name) &&
               kind_at(root.get(), name, name) != Kind::folder) {
      ::unlinkat(root.get(), name.c_str(), 0);  // a temporary of a marker or record being written
    }
  }
}

}  // namespace

std::vector<std::string> output_directory_notes(const OutputDirectoryResult& result) {
  std::vector<std::string> notes = result.recovered;
  for (const auto& name : result.stale_staging) {
    notes.push_back("removed " + printable_text((result.directory / name).string()) +
                    ", a staging folder left by an interrupted run");
  }
  for (const auto& path : result.legacy_staging) {
    notes.push_back(printable_text(path.string()) +
                    " looks like a staging folder left by an older attnres "
                    "run; remove it if no attnres command is running");
  }
  return notes;
}

fs::path clean_output_path(const std::string& text, const std::string& flag) {
  if (text.empty()) throw Error(flag + ": an empty path was given (expected a directory)");
  fs::path path = fs::path(text).lexically_normal();
  while (path.has_parent_path() && path.filename().empty()) path = path.parent_path();
  if (path.empty()) path = ".";
  return path;
}

void validate_output_name(const std::string& name, const std::string& flag) {
  auto fail = [&](const std::string& why) {
    throw Error(flag + " '" + printable_text(name) + "': " + why +
                " (expected a plain file-name stem such as 'io' or 'blocks-sweep')");
  };
  if (name.empty()) fail("is empty");
  if (name == "." || name == "..") fail("is not a file name");
  if (name.find('/') != std::string::npos || name.find('\\') != std::string::npos)
    fail("contains a path separator");
  if (name.front() == '.') fail("starts with '.' (hidden files are attnres's own)");
  for (const unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) fail("contains a control character");
  }
  if (name.size() > 200) fail("is longer than 200 characters");
}

void refuse_overwriting_inputs(const fs::path& output, const std::vector<fs::path>& inputs,
                               const std::string& flag) {
  std::error_code error;
  const fs::path out = fs::weakly_canonical(output, error);
  if (error) return;
  for (const auto& input : inputs) {
    const fs::path in = fs::weakly_canonical(input, error);
    if (error) continue;
    if (in == out ||
        (!out.lexically_relative(in).empty() && *out.lexically_relative(in).begin() != "..")) {
      throw Error(flag + " " + quoted(output) + " would overwrite " + quoted(input) +
                  ", an input of this command; choose another path");
    }
  }
}

namespace {

// Whether a directory can be made in `directory`: one is made and removed again (permission bits
// do not tell: root ignores them, and /proc or a read-only mount refuse anyway). The error
// message, empty when it can.
std::string probe_directory(const fs::path& directory) {
  // A staging folder's name: bookkeeping, never a foreign entry to another writer.
  const fs::path probe = directory / (kStagingPrefix + std::to_string(::getpid()) + "." +
                                      std::to_string(staging_counter.fetch_add(1)));
  std::error_code error;
  fs::create_directory(probe, error);
  if (error) return error.message();
  fs::remove(probe, error);
  return {};
}

// Before any work: `target` (which does not exist) can be created. The nearest existing
// ancestor must be a directory in which a directory can be made.
void check_creatable(const fs::path& target, const std::string& flag) {
  // As the user wrote it ("ok.toml", not /tmp/.../ok.toml); "." when nothing of it exists.
  fs::path ancestor = target.lexically_normal().parent_path();
  std::error_code error;
  while (!ancestor.empty() && !fs::exists(fs::status(ancestor, error)) &&
         ancestor != ancestor.root_path()) {
    ancestor = ancestor.parent_path();
  }
  if (ancestor.empty()) ancestor = ".";
  const auto status = fs::status(ancestor, error);
  if (!fs::is_directory(status)) {
    throw Error("cannot create " + flag + " directory " + quoted(target) + ": " + quoted(ancestor) +
                " is " + (fs::exists(status) ? "a file, not a directory" : "missing"));
  }
  if (const std::string problem = probe_directory(ancestor); !problem.empty()) {
    throw Error("cannot create " + flag + " directory " + quoted(target) + ": " + problem +
                " (in " + quoted(ancestor) + ")");
  }
}

}  // namespace

std::vector<std::string> check_output_directory(const fs::path& target,
                                                const OutputDirectoryOptions& options) {
  std::error_code error;
  const auto status = fs::status(target, error);
  if (!fs::exists(status)) {
    check_creatable(target, options.flag);
    return {};
  }
  if (!fs::is_directory(status)) {
    throw Error(options.flag + " " + quoted(target) + ": exists and is not a directory");
  }
  // Under the lock, so that a commit in flight is never half-seen (it would look foreign).
  const DirectoryLock lock(target, LOCK_EX);
  if (const std::string problem = probe_directory(target); !problem.empty()) {
    throw Error("cannot write into " + options.flag + " directory " + quoted(target) + ": " +
                problem);
  }
  OutputDirectoryResult recovered;
  recovered.directory = target;
  recover(target, recovered.stale_staging, recovered.recovered);
  check_ownership(target, options, inspect(target), inputs_inside(target, options.inputs));
  return output_directory_notes(recovered);
}

namespace {

// The directories this process holds a read lock on: a second reader of the same directory (a
// checkpoint's reader calling load_model) shares the first one's lock, since a second flock of
// the same directory from this process would wait for the first.
struct HeldReadLocks {
  std::mutex mutex;
  std::map<fs::path, std::weak_ptr<DirectoryLock>> held;
};

HeldReadLocks& held_read_locks() {
  static HeldReadLocks locks;
  return locks;
}

}  // namespace

OutputDirectoryReadLock::OutputDirectoryReadLock(const fs::path& directory) {
  std::error_code error;
  if (!fs::is_directory(directory, error)) return;
  const fs::path key = fs::weakly_canonical(directory, error);
  HeldReadLocks& locks = held_read_locks();
  const std::lock_guard<std::mutex> guard(locks.mutex);
  if (auto held = locks.held[key].lock()) {
    lock_ = held;
    return;
  }
  // Shared: no write switches files while they are read. A reader never changes the directory:
  // an interrupted write is reported, not completed (docs/output-safety.md).
  auto lock = std::make_shared<DirectoryLock>(directory, LOCK_SH);
  const Fd root = open_target(directory);
  bool torn = false;
  if (const std::optional<CommitRecord> record = find_record(root.get(), directory, torn)) {
    throw Error(quoted(directory) + ": a write of '" + printable_text(record->owner) +
                "' into it was interrupted (" + kCommitName +
                " is there), so its files may be a mix of the old set and the new one; attnres "
                "does not change a directory it only reads: complete the write with `attnres "
                "recover " +
                printable_text(directory.string()) + "` and run this again");
  }
  if (torn) {
    notes_.push_back(printable_text(directory.string()) + " holds the " + kCommitName +
                     " of a write cut short before any file moved; its files are the old set "
                     "(the next attnres command that writes it removes the record)");
  }
  locks.held[key] = lock;
  lock_ = lock;
}

std::vector<std::string> recover_output_directory(const fs::path& target) {
  std::error_code error;
  const auto status = fs::status(target, error);
  if (!fs::exists(status)) throw Error(quoted(target) + ": no such directory");
  if (!fs::is_directory(status)) throw Error(quoted(target) + ": is not a directory");
  const DirectoryLock lock(target, LOCK_EX);
  OutputDirectoryResult result;
  result.directory = target;
  recover(target, result.stale_staging, result.recovered);
  return output_directory_notes(result);
}

OutputDirectoryResult write_output_directory(const fs::path& target,
                                             const OutputDirectoryOptions& options,
                                             const std::function<void(const fs::path&)>& build) {
  OutputDirectoryResult result;
  result.directory = target;
  std::error_code error;
  const auto status = fs::status(target, error);
  if (fs::exists(status) && !fs::is_directory(status)) {
    throw Error(options.flag + " " + quoted(target) + ": exists and is not a directory");
  }
  bool created = false;
  if (!fs::exists(target, error)) {
    created = fs::create_directories(target, error);
    if (error || !fs::is_directory(target)) {
      throw Error("cannot create " + options.flag + " directory " + quoted(target) +
                  (error ? ": " + error.message() : ""));
    }
  }
  auto undo_creation = [&] {
    if (created) {
      std::error_code ignored;
      fs::remove(target, ignored);  // only when still empty
    }
  };

  // Staging folders of attnres 0.1, which staged beside the target (".NAME.partialN"): reported,
  // not removed (their owner cannot be told).
  const std::string legacy =
      "." + fs::absolute(target).lexically_normal().filename().string() + ".partial";
  for (const auto& entry : fs::directory_iterator(fs::absolute(target).parent_path(), error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(legacy, 0) == 0) result.legacy_staging.push_back(entry.path());
  }

  const std::string staging_name = kStagingPrefix + std::to_string(::getpid()) + "." +
                                   std::to_string(staging_counter.fetch_add(1));
  const fs::path staging = target / staging_name;
  std::unique_ptr<StagingLock> staging_lock;
  try {
    {
      // Interrupted writes are finished, abandoned staging folders removed, the directory
      // checked, and this run's staging folder created and locked, all under the lock: another
      // writer never sees the folder unlocked.
      const DirectoryLock lock(target, LOCK_EX);
      recover(target, result.stale_staging, result.recovered);
      check_ownership(target, options, inspect(target), inputs_inside(target, options.inputs));
      fs::create_directory(staging, error);
      if (error) {
        throw Error("cannot write into " + options.flag + " directory " + quoted(target) + ": " +
                    error.message());
      }
      staging_lock = std::make_unique<StagingLock>(staging);
    }
    build(staging);
    report_progress(options.progress, 1, 1, "writing " + target.string());

    const DirectoryLock lock(target, LOCK_EX);
    recover(target, result.stale_staging, result.recovered);
    const Ownership o = inspect(target);
    const std::vector<std::string> inputs = inputs_inside(target, options.inputs);
    check_ownership(target, options, o, inputs);
    const Listing staged = list_directory(staging);
    result.written = staged.files;

    CommitRecord record;
    record.owner = options.owner;
    record.staging = staging_name;
    struct stat staged_folder {};
    if (::lstat(staging.c_str(), &staged_folder) != 0)
      throw fs::filesystem_error("stat", staging, std::error_code(errno, std::generic_category()));
    record.staging_device = staged_folder.st_dev;
    record.staging_inode = staged_folder.st_ino;
    record.files = staged.files;
    Sets sets = o.marker.sets;
    const std::set<std::string> previous =
        sets.count(options.owner) ? sets[options.owner] : std::set<std::string>{};
    // An input that is the directory itself (`forward --model m --chart m`): every file in it
    // outside this command's own previous set is kept, --force or not.
    const bool input_is_target = std::find(inputs.begin(), inputs.end(), ".") != inputs.end();
    for (const auto& file : staged.files) {
      const bool exists = std::binary_search(o.listing.files.begin(), o.listing.files.end(), file);
      if (protects(inputs, file) || (input_is_target && exists && !previous.count(file))) {
        throw Error(options.flag + " " + quoted(target) + ": writing " + printable_text(file) +
                    " would overwrite an input of this command; choose another directory");
      }
      for (const auto& [name, files] : sets) {
        if (name != options.owner && files.count(file) && !options.force) {
          throw Error(options.flag + " " + quoted(target) + ": " + printable_text(file) +
                      " belongs to the output '" + name +
                      "' in that directory; choose another name or directory "
                      "(or pass --force)");
        }
      }
    }
    const std::set<std::string> written(staged.files.begin(), staged.files.end());
    for (const auto& file : previous) {
      if (!written.count(file) && !protects(inputs, file)) record.remove.push_back(file);
    }
    if (options.force && !input_is_target) {
      for (const auto& file : o.foreign_files) {
        if (!protects(inputs, file) && !written.count(file)) record.remove.push_back(file);
      }
    }
    // Directories left empty (of removed files, or foreign ones under --force), deepest first.
    std::vector<std::string> directories = o.listing.directories;
    std::sort(directories.rbegin(), directories.rend());
    for (const auto& dir : directories) {
      const bool foreign = std::find(o.foreign_directories.begin(), o.foreign_directories.end(),
                                     dir) != o.foreign_directories.end();
      if (foreign && !options.force) continue;
      if (protects(inputs, dir)) continue;
      record.directories.push_back(dir);
    }
    for (auto& [name, files] : sets) {
      for (const auto& file : written) files.erase(file);
      for (const auto& file : record.remove) files.erase(file);
    }
    sets[options.owner] = written;
    for (auto it = sets.begin(); it != sets.end();)
      it = it->second.empty() ? sets.erase(it) : std::next(it);
    record.sets = sets;

    // Nothing the record names passes through a link (a marker naming lnk/x, a foreign link
    // where a folder of the set goes without --force): refused before anything moves.
    const Fd root = open_target(target);
    check_record(root.get(), target, record, /*found=*/false);

    // The switch: the staged files are on disk, then the record; from the moment the record is
    // there, the write is done, and a kill from here on is completed by the next command.
    sync_tree(staging);
    commit_step();
    write_durably(target / kCommitName, record_json(record).dump(1) + "\n");
    commit_step();
    for (const auto& removed : apply_commit(root.get(), target, record)) {
      const bool directory = removed.back() == '/';
      const bool foreign_directory =
          directory &&
          std::find(o.foreign_directories.begin(), o.foreign_directories.end(),
                    removed.substr(0, removed.size() - 1)) != o.foreign_directories.end();
      if (!directory || foreign_directory) result.removed.push_back(removed);
    }
  } catch (const fs::filesystem_error& failure) {
    remove_quietly(staging);
    undo_creation();
    throw Error("cannot write " + options.flag + " directory " + quoted(target) + ": " +
                failure.code().message());
  } catch (const Cancelled&) {
    remove_quietly(staging);
    undo_creation();
    throw;
  } catch (const Error& failure) {
    // Messages name the file as the user will see it, never the staging folder.
    remove_quietly(staging);
    undo_creation();
    std::string message = failure.what();
    const std::string hidden = staging.string();
    for (std::size_t at = message.find(hidden); at != std::string::npos;
         at = message.find(hidden, at)) {
      message.replace(at, hidden.size(), target.string());
    }
    throw Error(message);
  } catch (...) {
    remove_quietly(staging);
    undo_creation();
    throw;
  }
  return result;
}

}  // namespace attnres
