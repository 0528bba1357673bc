#pragma once
// A Hugging Face `tokenizer.json` tokenizer with a BPE model (byte-level as in GPT-2 / Llama-3 / Qwen, or with
// byte fallback as in Llama-2 style files). Encoding runs the reference pipeline: added tokens matched first,
// normalizer, pre-tokenizer, BPE per piece, post-processor; decoding maps ids to tokens and runs the decoder.
// Token ids match the `tokenizers` library for every component supported here; anything else is refused at load
// time with a LoadError naming the file and the field.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"

namespace attnzoo::tok {

// Ids index dense tables, so a hostile file must not be able to ask for billions of slots.
inline constexpr int64_t kMaxTokenId = int64_t(1) << 24;

// The pieces a tokenizer is assembled from, whatever file described them.
struct TokenizerParts {
  std::unique_ptr<Bpe> model;  // required
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  std::vector<AddedToken> added_tokens;  // special ones are matched first, then each set in this order
  std::vector<int32_t> eos_token_ids;
};

class Tokenizer {
 public:
  // `path` is a tokenizer.json file or a model directory holding one. For a directory the end-of-sequence ids
  // are also read from generation_config.json / config.json / tokenizer_config.json when present.
  static std::shared_ptr<const Tokenizer> load(const std::string& path);
  // Parses tokenizer.json text; `name` stands for the file in error messages.
  static std::shared_ptr<const Tokenizer> from_json(std::string_view text, const std::string& name);
  // Assembles a tokenizer from its pieces (from_json and the GGUF vocabulary reader both end here).
  static std::shared_ptr<const Tokenizer> from_parts(TokenizerParts parts);

  // `text` must be valid UTF-8 (ArgumentError otherwise).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // Unknown ids are skipped, as the reference does. The result is valid UTF-8.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;
  // As decode, but byte-producing decoders keep their bytes as they are: the result may end (or hold) partial
  // UTF-8 sequences. Used by StreamDecoder.
  std::string decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  // Distinct tokens in the model vocabulary and the added tokens together (tokenizers' get_vocab_size(True)).
  size_t vocab_size() const { return vocab_size_; }
  bool is_special(int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  // End-of-sequence ids found in the model directory's configs or the GGUF vocabulary (empty when none).
  const std::vector<int32_t>& eos_token_ids() const { return eos_ids_; }

 private:
  Tokenizer() = default;
  std::vector<std::string> tokens_for(std::span<const int32_t> ids, bool skip_special_tokens) const;
  std::string decode_with(std::span<const int32_t> ids, bool skip_special_tokens, bool raw) const;

  std::unique_ptr<Bpe> model_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;
  std::vector<AddedToken> added_;  // in file order; matchers hold indices into it
  TokenMatcher raw_matcher_, normalized_matcher_;
  Vocab added_by_content_;
  std::unordered_map<int32_t, size_t> added_by_id_;
  size_t vocab_size_ = 0;
  std::vector<int32_t> eos_ids_;
};

}  // namespace attnzoo::tok
