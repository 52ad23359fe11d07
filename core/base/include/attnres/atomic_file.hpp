// Writing output files so that a reader never sees half of one.
//
// Content goes to a temporary file in the same directory, is flushed, and is renamed over the
// target: either the old file or the complete new one is there, never a partial write.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace attnres {

// Writes `content` to `path` atomically (temporary file + rename). Throws attnres::Error naming
// the path on failure, and leaves no temporary file behind. The temporary is
// `.NAME.attnres-tmp.PID.N` beside the target (hidden, and naming the process that writes it);
// temporaries of the same target whose process is no longer running (it was killed outright)
// are removed first.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);

// The temporary file write_file_atomically uses for `path` in this process (a new N each call).
std::filesystem::path temporary_path_for(const std::filesystem::path& path);
// Removes the temporaries of `path` left by processes that are not running; returns how many.
std::size_t remove_stale_temporaries(const std::filesystem::path& path);
// Whether the directory entry `entry` is a temporary of the file named `target_name` beside it:
// write_file_atomically's `.NAME.attnres-tmp.PID.N`, or attnres 0.1's `NAME.tmpDIGITS`.
bool is_temporary_of(const std::string& entry, const std::string& target_name);

// Checks, before any work, that the file `path` (given to `flag`, named in the message) can be
// written by write_file_atomically: its directory exists and a temporary file can be made there,
// and `path` is not a directory, a device or anything else that is not a regular file. Throws
// attnres::Error otherwise.
void check_output_file(const std::filesystem::path& path, const std::string& flag);

// What is at `path` when it is not a regular file, in words: "no such file", "is a directory",
// "is a device", "is a FIFO (named pipe)", "is not a regular file"; empty for a regular file.
std::string not_a_regular_file(const std::filesystem::path& path);

// Directories of outputs are written by write_output_directory (output_dir.hpp).

// Reads a whole file; throws attnres::Error naming the path when it cannot be read, and saying
// what is there instead of a file ("is a directory, expected `expected`" when it is given).
std::string read_file(const std::filesystem::path& path, std::string_view expected = {});

}  // namespace attnres
