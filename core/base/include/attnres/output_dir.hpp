// Output directories that never lose a user's files (docs/output-safety.md).
//
// A command that writes a directory (`report --out`, `sweep --out`, `init-model --out`) owns a
// named *set* of files in it ("report", "sweep:io", "model"). attnres records every set it wrote
// in a marker file, `.attnres-output.json`, inside the directory. A command may write into a
// directory only when
//   - the directory is new or empty, or
//   - every entry in it was written by attnres (listed in the marker),
// and otherwise refuses, naming the foreign entries; `force` is the explicit way to replace a
// directory that holds other files (they are removed, except the command's own inputs).
// Files of other sets are left alone, so several sweeps can share one directory; a set is
// replaced as a whole (files of its previous run that the new run does not write are removed).
//
// The new files are built in a staging folder inside the target (`.attnres-staging.PID.N`, locked
// by its owner while it runs). The switch is one step: the staged files are synced to disk, then a
// commit record (`.attnres-commit.json`: what moves, what goes, the new marker) is written and
// synced; only then do the files move into place. A process killed before the record leaves the
// directory exactly as it was; one killed after it leaves a record that the next command writing
// the directory (or `attnres recover`) applies again, so the directory always holds the whole
// old set or the whole new one once attnres has looked at it; a reader refuses a directory with
// such a record rather than change it. The staging folder is removed on every exit we control
// (errors, cancellation); one whose owner died is removed by the next writer (and reported).
//
// Nothing outside the directory, ever: every path a record, the marker or --force names is
// walked from the directory with openat and O_NOFOLLOW, the staging folder must be the one the
// record's writer made (its device and inode are in the record), and a record that names
// anything else is refused before anything changes (docs/output-safety.md).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"

namespace attnres {

inline constexpr const char* kOutputMarkerName = ".attnres-output.json";

struct OutputDirectoryOptions {
  std::string owner;                          // the set of files this command writes
  std::string flag = "--out";                 // named in messages
  bool force = false;                         // replace a directory holding foreign files
  std::vector<std::filesystem::path> inputs;  // never deleted or overwritten
  Progress progress;                          // checked before the files are moved into place
};

struct OutputDirectoryResult {
  std::filesystem::path directory;         // where the files are (as the user wrote it, cleaned)
  std::vector<std::string> written;        // relative paths of the set's files
  std::vector<std::string> removed;        // relative paths removed (previous run or --force)
  std::vector<std::string> stale_staging;  // staging folders of killed runs that were removed
  std::vector<std::filesystem::path> legacy_staging;  // older attnres's ".NAME.partialN" beside it
  std::vector<std::string> recovered;  // interrupted writes completed (or dropped), in words
};

// Lines that tell the user about stale staging folders ("note: ..."), empty when there were none.
std::vector<std::string> output_directory_notes(const OutputDirectoryResult& result);

// "out/r/" -> "out/r", "./x//" -> "x", "." stays ".". Throws attnres::Error on an empty path.
std::filesystem::path clean_output_path(const std::string& text, const std::string& flag);

// Checks, before any work, that `target` may be written with `options` (throws attnres::Error
// with the reason otherwise). write_output_directory checks again when it commits. An interrupted
// write of `target` is completed first; the returned lines say so (output_directory_notes).
std::vector<std::string> check_output_directory(const std::filesystem::path& target,
                                                const OutputDirectoryOptions& options);

// Held while a command reads a directory attnres wrote (a model, a checkpoint): holds a shared
// lock, so that no write switches its files while they are read. A reader changes nothing: a
// directory holding an interrupted write (its commit record) is refused with attnres::Error
// saying how to complete it (`attnres recover DIR`). Release it before writing the same
// directory. A directory that does not exist is not locked (the reader reports it).
class OutputDirectoryReadLock {
 public:
  explicit OutputDirectoryReadLock(const std::filesystem::path& directory);
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  std::shared_ptr<void> lock_;
  std::vector<std::string> notes_;
};

// `attnres recover DIR`: under the exclusive lock, completes an interrupted write of `target`
// (or drops a torn record), removes staging folders of killed runs; returns what was done, in
// words ("note: ..." lines, empty when there was nothing to do). Throws attnres::Error when the
// record names anything but entries inside the directory (nothing is changed then).
std::vector<std::string> recover_output_directory(const std::filesystem::path& target);

// Runs `build` on an empty staging folder and moves what it wrote into `target` under the rules
// above. Throws attnres::Error (or Cancelled) and leaves `target` as it was on failure.
OutputDirectoryResult write_output_directory(
    const std::filesystem::path& target, const OutputDirectoryOptions& options,
    const std::function<void(const std::filesystem::path& staging)>& build);

// Throws attnres::Error when `name` cannot be a file-name stem of an output (empty, a path
// separator, "." or "..", a leading '.', control characters). `flag` is named in the message.
void validate_output_name(const std::string& name, const std::string& flag);

// Throws attnres::Error when writing the file `output` would overwrite one of `inputs`.
void refuse_overwriting_inputs(const std::filesystem::path& output,
                               const std::vector<std::filesystem::path>& inputs,
                               const std::string& flag);

}  // namespace attnres
