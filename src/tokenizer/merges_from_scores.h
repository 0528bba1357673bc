#pragma once
// BPE merges for a SentencePiece-style vocabulary that lists none (GGUF `llama` vocabularies): SentencePiece's
// BPE joins the adjacent pair whose result scores highest, so every way of cutting a token into two tokens is a
// merge, ranked by the score of the token it makes (highest first), then by the longer left part, then the longer
// right part; equal keys keep vocabulary order, and a token's cuts are ordered by the ids of their parts. These
// are the merges transformers derives for such a file.
#include <string>
#include <utility>
#include <vector>

namespace attnzoo::tok {

// `tokens` must be valid UTF-8 and `scores` as long as `tokens`, without NaN. A token listed twice counts once,
// where it first appears, with the id and the score of its last appearance.
std::vector<std::pair<std::string, std::string>> merges_from_scores(const std::vector<std::string>& tokens,
                                                                    const std::vector<float>& scores);

}  // namespace attnzoo::tok
