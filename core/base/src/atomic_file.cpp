#include "attnres/atomic_file.hpp"

#include <fstream>
#include <random>
#include <sstream>

#include "attnres/error.hpp"

namespace attnres {

namespace fs = std::filesystem;

void write_file_atomically(const fs::path& path, std::string_view content) {
  std::random_device entropy;
  const fs::path temporary = path.parent_path() / (path.filename().string() + ".tmp" +
                                                   std::to_string(entropy() % 1000000));
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
