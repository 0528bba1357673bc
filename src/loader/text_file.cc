#include "loader/text_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "core/utf8.h"

namespace attnzoo {

std::string read_text_stream(std::FILE* f, const std::string& what, uint64_t max_bytes) {
  std::string out;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) {
    // Checked before appending, so the string never holds (nor reserves) much more than the limit.
    if (out.size() + n > max_bytes) {
      const std::string limit = max_bytes % (1u << 20) == 0 ? std::to_string(max_bytes >> 20) + " MiB"
                                                             : std::to_string(max_bytes) + " bytes";
      throw ArgumentError(what + ": more than the " + limit + " a text input may hold");
    }
    out.append(buf, n);
  }
  if (std::ferror(f)) throw ArgumentError(what + ": read failed (" + std::strerror(errno) + ")");
  return out;
}

std::string read_text_file(const std::string& flag, const std::string& path, uint64_t max_bytes) {
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Closer> f(std::fopen(path.c_str(), "rb"));
  if (!f) throw ArgumentError(flag + ": cannot open '" + path + "' (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(::fileno(f.get()), &st) == 0 && S_ISDIR(st.st_mode))
    throw ArgumentError(flag + ": '" + path + "' is a directory, not a text file");
  return read_text_stream(f.get(), flag + ": '" + path + "'", max_bytes);
}

void require_utf8(std::string_view text, const std::string& what) {
  if (utf8::is_valid(text)) return;
  size_t i = 0;
  for (uint32_t cp; i < text.size();) {
    const size_t n = utf8::decode(text, i, &cp);
    if (n == 0) break;
    i += n;
  }
  throw ArgumentError(what + ": not valid UTF-8 (byte " + std::to_string(i) + ")");
}

}  // namespace attnzoo
