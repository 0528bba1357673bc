#pragma once
// The tokenizer a GGUF file carries in its `tokenizer.ggml.*` metadata, given as plain values (whoever reads the
// file fills a GgufVocab), built as the tokenizer transformers makes of such a file:
// - `gpt2`: byte-level BPE; the pre-tokenizer regexes are chosen by `tokenizer.ggml.pre` as llama.cpp chooses
//   them (see gguf_pre_tokenizer.h); tokens outside the byte alphabet are respelled into it.
// - `llama`: SentencePiece-style BPE: "▁" for spaces and before the text, byte fallback to <0xNN> tokens, merges
//   from the file or, when it has none, derived from the scores (merges_from_scores.h); decoding turns "▁" back
//   into spaces, fuses byte tokens and drops the leading space.
// Control tokens (type 3) and the named BOS / EOS / UNK / PAD tokens (unless typed as ordinary text) become special
// added tokens, user-defined tokens (type 4) plain added tokens: all are found in the text before the model runs.
// BOS / EOS are added per add_bos / add_eos.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace attnzoo::tok {

// tokenizer.ggml.token_type values.
enum class GgufTokenType : int32_t { undefined = 0, normal, unknown, control, user_defined, unused, byte };

struct GgufVocab {
  std::string model, pre;                 // tokenizer.ggml.model / .pre
  std::vector<std::string> tokens;
  std::vector<float> scores;              // may be empty
  std::vector<int32_t> token_types;       // may be empty
  std::vector<std::string> merges;        // may be empty (llama/SPM)
  int64_t bos = -1, eos = -1, eot = -1, unk = -1, pad = -1;  // -1: the key is absent
  // Absent keys: llama.cpp's default for the vocabulary (true for `llama`, and for `gpt2` with the Llama 3 /
  // Tekken pre-tokenizers; otherwise false). A default BOS is dropped when the file names no BOS token.
  std::optional<bool> add_bos, add_eos;
  // `llama` only (tokenizer.ggml.add_space_prefix; absent: true): each run of text between special tokens gets a
  // leading "▁", as llama.cpp and Llama 2's tokenizer.json (normalizer Prepend("▁") + Replace(" ", "▁")) do.
  std::optional<bool> add_space_prefix;
};

// Throws LoadError naming the metadata key at fault ("tokenizer.ggml.tokens[7]: not valid UTF-8").
// eos_token_ids() of the result holds the EOS and EOT ids the vocabulary names.
std::shared_ptr<const Tokenizer> tokenizer_from_gguf_vocab(const GgufVocab& vocab);

}  // namespace attnzoo::tok
