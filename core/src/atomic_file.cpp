#include "attnres/atomic_file.hpp"

#include <fstream>
#include <random>
#include <sstream>

#include "attnres/error.hpp"

namespace attnres {

namespace fs = std::filesystem;

void write_file_atomically(const fs::path& path, std::string_view content) {
  std::random_device entropy;
  const fs::path temporary =
      path.parent_path() / (path.filename().string() + ".tmp" + std::to_string(entropy() % 1000000));
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write '" + path.string() + "': cannot create a temporary file");
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      out.close();
      std::error_code ignored;
      fs::remove(temporary, ignored);
      throw Error("cannot write '" + path.string() + "': write failed (disk full?)");
    }
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw Error("cannot write '" + path.string() + "': " + error.message());
  }
}

void write_directory_atomically(const fs::path& target_path,
                                const std::function<void(const fs::path&)>& build) {
  const fs::path target = target_path.lexically_normal();
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code made;
  fs::create_directories(parent, made);
  if (made || !fs::is_directory(parent)) {
    throw Error("cannot write '" + target_path.string() + "': cannot create directory '" +
                parent.string() + "'" + (made ? " (" + made.message() + ")" : ""));
  }
  if (fs::exists(target) && !fs::is_directory(target)) {
    throw Error("cannot write '" + target_path.string() + "': it exists and is not a directory");
  }
  std::random_device entropy;
  const std::string suffix = std::to_string(entropy() % 1000000);
  const std::string name = target.filename().string();
  const fs::path staging = parent / std::string(".").append(name).append(".partial").append(suffix);
  const fs::path previous = parent / std::string(".").append(name).append(".old").append(suffix);
  auto clean_up = [&] {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    if (fs::exists(previous) && !fs::exists(target)) fs::rename(previous, target, ignored);
  };
  try {
    fs::create_directories(staging);
    build(staging);
    if (fs::exists(target)) fs::rename(target, previous);
    fs::rename(staging, target);
  } catch (const fs::filesystem_error& error) {
    clean_up();
    throw Error("cannot write '" + target_path.string() + "': " + error.what());
  } catch (...) {
    clean_up();
    throw;
  }
  std::error_code ignored;
  fs::remove_all(previous, ignored);
}

std::string read_file(const fs::path& path) {
  std::error_code error;
  if (!fs::is_regular_file(path, error)) {
    throw Error("cannot read '" + path.string() + "': no such file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path.string() + "': cannot open it");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error("cannot read '" + path.string() + "': read failed");
  return buffer.str();
}

}  // namespace attnres
