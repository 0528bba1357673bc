// Bindings for the tokenizer: attnzoo._core.Tokenizer and StreamDecoder (wrapped by attnzoo/tokenizer.py).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::py {

void bind_tokenizer(nb::module_& m) {
  using tok::Tokenizer;
  nb::class_<Tokenizer>(m, "Tokenizer")
      .def_static("load", &Tokenizer::load, nb::arg("path"), nb::call_guard<nb::gil_scoped_release>())
      .def_static("from_json", &Tokenizer::from_json, nb::arg("text"), nb::arg("name"))
      .def_static(
          "from_gguf_vocab",
          [](std::string model, std::string pre, std::vector<std::string> tokens, std::vector<float> scores,
             std::vector<int32_t> token_types, std::vector<std::string> merges, int64_t bos, int64_t eos, int64_t eot,
             int64_t unk, int64_t pad, std::optional<bool> add_bos, std::optional<bool> add_eos,
             std::optional<bool> add_space_prefix) {
            tok::GgufVocab v{std::move(model), std::move(pre), std::move(tokens), std::move(scores),
                             std::move(token_types), std::move(merges), bos, eos, eot, unk, pad, add_bos, add_eos,
                             add_space_prefix};
            return tok::tokenizer_from_gguf_vocab(v);
          },
          nb::arg("model"), nb::arg("pre"), nb::arg("tokens"), nb::arg("scores"), nb::arg("token_types"),
          nb::arg("merges"), nb::arg("bos"), nb::arg("eos"), nb::arg("eot"), nb::arg("unk"), nb::arg("pad"),
          nb::arg("add_bos").none(), nb::arg("add_eos").none(), nb::arg("add_space_prefix").none(),
          nb::call_guard<nb::gil_scoped_release>())
      .def_static(
          "train_bpe",
          [](const std::vector<std::string>& files, size_t vocab_size, uint64_t min_frequency,
             std::vector<std::string> special_tokens, bool add_prefix_space) {
            tok::BpeTrainerOptions o;
            o.vocab_size = vocab_size;
            o.min_frequency = min_frequency;
            o.special_tokens = std::move(special_tokens);
            o.add_prefix_space = add_prefix_space;
            tok::WordCounter counter(add_prefix_space);
            for (const std::string& f : files) counter.add_file(f);
            return tok::trained_tokenizer_json(tok::train_bpe(counter.take(), o));
          },
          nb::arg("files"), nb::arg("vocab_size"), nb::arg("min_frequency"), nb::arg("special_tokens"),
          nb::arg("add_prefix_space"), nb::call_guard<nb::gil_scoped_release>(),
          "tokenizer.json text of byte-level BPE trained on the files as tokenizers' BpeTrainer trains it.")
      .def("encode", &Tokenizer::encode, nb::arg("text"), nb::arg("add_special_tokens") = true,
           nb::call_guard<nb::gil_scoped_release>())
      .def(
          "decode",
          [](const Tokenizer& t, const std::vector<int32_t>& ids, bool skip) { return t.decode(ids, skip); },
          nb::arg("ids"), nb::arg("skip_special_tokens") = false, nb::call_guard<nb::gil_scoped_release>())
      .def(
          "decode_bytes",
          [](const Tokenizer& t, const std::vector<int32_t>& ids, bool skip) {
            const std::string s = t.decode_bytes(ids, skip);
            return nb::bytes(s.data(), s.size());
          },
          nb::arg("ids"), nb::arg("skip_special_tokens") = false)
      .def("token_to_id", &Tokenizer::token_to_id, nb::arg("token"))
      .def("id_to_token", &Tokenizer::id_to_token, nb::arg("id"))
      .def("is_special", &Tokenizer::is_special, nb::arg("id"))
      .def_prop_ro("vocab_size", &Tokenizer::vocab_size)
      .def_prop_ro("eos_token_ids", [](const Tokenizer& t) { return t.eos_token_ids(); });

  nb::class_<tok::StreamDecoder>(m, "StreamDecoder")
      .def(nb::init<std::shared_ptr<const Tokenizer>, bool>(), nb::arg("tokenizer"),
           nb::arg("skip_special_tokens") = false)
      .def("push", &tok::StreamDecoder::push, nb::arg("id"))
      .def("finish", &tok::StreamDecoder::finish);
}

}  // namespace attnzoo::py
