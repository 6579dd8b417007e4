#include "common/files.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/strings.h"

namespace stagecraft {

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw IoError(cat("cannot read '", path, "': it is a directory"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(cat("cannot read '", path, "': ", std::strerror(errno)));
  // One allocation of the file's size where it has one (large models, external weights): a
  // stream copy grows its buffer by doubling and touches every byte several times.
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > 0) {
    std::string text(size, '\0');
    in.read(text.data(), static_cast<std::streamsize>(size));
    text.resize(static_cast<size_t>(in.gcount()));
    if (in.bad()) throw IoError(cat("cannot read '", path, "': read error"));
    if (in.peek() == std::char_traits<char>::eof()) return text;
    std::ostringstream rest;  // the file grew while being read
    rest << in.rdbuf();
    return text + rest.str();
  }
  std::ostringstream text;  // no size (a pipe, /proc): as it comes
  text << in.rdbuf();
  if (in.bad()) throw IoError(cat("cannot read '", path, "': read error"));
  return text.str();
}

void write_text_file(const std::string& path, const std::string& text) {
  // A temporary file of this process and call: processes sharing a cache folder (server replicas)
  // save the same file at once, and one's rename must not take the other's file away.
  static std::atomic<uint64_t> calls{0};
  const std::string temp = cat(path, ".tmp.", ::getpid(), ".", calls.fetch_add(1));
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw IoError(cat("cannot write '", path, "': ", std::strerror(errno)));
    out << text;
    out.flush();
    if (!out) throw IoError(cat("cannot write '", path, "': write error"));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temp.c_str());
    throw IoError(cat("cannot write '", path, "': ", reason));
  }
}

}  // namespace stagecraft
