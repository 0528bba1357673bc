#pragma once
// Test helper for the tool-call format tests: the repository's fixture files under python/tests/data (the published
// chat templates, the Python-made call fixtures), found from the repository root or the build folder (ctest).
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace attnzoo::server::tool_test {

// `name` relative to python/tests/data ("chat_templates/X.jinja"); "" when the file is not found.
inline std::string read_test_data(const std::string& name) {
  for (const char* root : {".", ".."}) {
    const std::filesystem::path p = std::filesystem::path(root) / "python/tests/data" / name;
    if (!std::filesystem::exists(p)) continue;
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  return "";
}

}  // namespace attnzoo::server::tool_test
