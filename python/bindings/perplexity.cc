// Bindings for perplexity (engine/perplexity.h): _core.perplexity over token ids, _core.perplexity_tokens for a
// text. Python wraps them as attnzoo.Model.perplexity.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "core/error.h"
#include "engine/perplexity.h"

namespace attnzoo::py {

void bind_perplexity(nb::module_& m) {
  m.def(
      "perplexity",
      [](const Model& model, const AnyArray& ids, int64_t n_ctx, int64_t n_batch, int64_t n_chunks,
         std::optional<int32_t> bos, const std::string& source) {
        const TensorView v = as_view(ids, "ids");
        require(v.ndim == 1, "ids", "must be 1-D, got " + v.shape_str());
        const std::span<const int32_t> tokens(as_int32(ids, "ids"), size_t(v.shape[0]));
        PerplexityOptions o;
        o.n_ctx = n_ctx;
        o.n_batch = n_batch;
        o.n_chunks = n_chunks;
        o.bos = bos;
        o.source = source;
        PerplexityResult r;
        {
          KernelScope scope;  // the windows' sequences are private and freed on the way out: safe to cancel
          r = perplexity(model, tokens, o);
        }
        nb::dict d;
        d["ppl"] = r.ppl;
        d["ppl_error"] = r.ppl_error;
        d["running_ppl"] = r.running_ppl;
        d["chunk_nll"] = r.chunk_nll;
        d["n_tokens"] = r.n_tokens;
        d["n_scored"] = r.n_scored;
        return d;
      },
      nb::arg("model"), nb::arg("ids"), nb::arg("n_ctx") = int64_t(512), nb::arg("n_batch") = int64_t(2048),
      nb::arg("n_chunks") = int64_t(-1), nb::arg("bos") = nb::none(), nb::arg("source") = "ids",
      "llama.cpp's perplexity of ids: windows of n_ctx tokens from an empty state, first token replaced by bos "
      "(None: kept), second half scored. A dict: ppl, ppl_error, running_ppl, chunk_nll, n_tokens, n_scored.");
  m.def(
      "perplexity_tokens",
      [](const tok::Tokenizer& tokenizer, const std::string& text) {
        PerplexityTokens t = perplexity_tokens(tokenizer, text);
        return std::make_pair(std::move(t.tokens), t.bos);
      },
      nb::arg("tokenizer"), nb::arg("text"),
      "(ids with special tokens, the BOS id the tokenizer puts before a text or None).");
  m.def(
      "added_bos", [](const tok::Tokenizer& tokenizer) { return added_bos(tokenizer); }, nb::arg("tokenizer"),
      "The BOS id the tokenizer puts before a text, or None.");
}

}  // namespace attnzoo::py
