// Paths and whole-file writes for the few places that touch the file system (the autotune
// cache, traces, sharded safetensors): POSIX calls on strings. <filesystem> would be parsed in
// every file that includes solder.hpp for these few calls (0.05 to 0.1 s of its 2 s).
#pragma once
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace solder::detail {

// dir/name ("name" where dir is empty).
inline std::string join_path(std::string const& dir, std::string const& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// The directory of a file's path: "" for a bare name (relative to the working directory).
inline std::string parent_dir(std::string const& path) {
  auto const slash = path.find_last_of('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The directory for temporary files: $TMPDIR, else /tmp.
inline std::string temp_dir() {
  char const* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

// Creates dir and the directories above it that are missing (mkdir -p); whether it exists now.
inline bool make_dirs(std::string const& dir) {
  if (dir.empty()) return true;
  for (std::size_t at = dir.find('/', 1);; at = dir.find('/', at + 1)) {
    std::string const part = dir.substr(0, at);
    if (::mkdir(part.c_str(), 0777) != 0 && errno != EEXIST) return false;
    if (at == std::string::npos) break;
  }
  struct stat s{};
  return ::stat(dir.c_str(), &s) == 0 && S_ISDIR(s.st_mode);
}

// Writes `text` to `path` whole or not at all: a temporary beside it, then a rename (atomic on
// POSIX). Whether it was written.
inline bool write_whole(std::string const& path, std::string const& text) {
  std::string const tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out.good()) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) == 0) return true;
  std::remove(tmp.c_str());
  return false;
}

}  // namespace solder::detail
