#pragma once
// A piece of the input on its way through the pipeline: text still to be split and tokenized, or an added token
// already recognized (id >= 0), which later stages pass through untouched.
#include <cstdint>
#include <string>
#include <vector>

namespace attnzoo::tok {

struct Piece {
  std::string text;
  int32_t id = -1;        // an added token's id, or -1
  bool at_start = false;  // begins at offset 0 of the original input (Metaspace's "first" scheme needs it)
};

using Pieces = std::vector<Piece>;

}  // namespace attnzoo::tok
