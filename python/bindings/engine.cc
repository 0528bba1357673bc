// Bindings for the engine: the sampler (one-shot over a batch of rows, or stateful across steps), stop-string
// matching and the checkpoint's EOS ids. The generation loop itself is Python (attnzoo/generate.py) over the
// model's Python API; the C++ loop (engine/generate.h) serves the CLI.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <span>

#include "bindings.h"
#include "core/error.h"
#include "engine/draft_proposer.h"
#include "engine/generate.h"
#include "engine/model_adapters.h"
#include "engine/sampler.h"
#include "engine/sampling_defaults.h"
#include "engine/stop.h"

namespace attnzoo::py {

SamplingParams make_params(float temperature, int64_t top_k, float top_p, float min_p, float repetition_penalty,
                           float presence_penalty, float frequency_penalty, uint64_t seed) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repetition_penalty = repetition_penalty;
  p.presence_penalty = presence_penalty;
  p.frequency_penalty = frequency_penalty;
  p.seed = seed;
  p.validate();
  return p;
}

namespace {

// Logits as [rows, vocab] f32, contiguous along the vocabulary.
struct Rows {
  const float* data;
  int64_t rows, vocab, row_stride;
};

Rows logits_rows(const AnyArray& logits) {
  const TensorView v = as_view(logits, "logits");
  if (v.dtype != DType::f32) throw DTypeError(std::string("logits: expected float32, got ") + dtype_name(v.dtype));
  require(v.ndim == 1 || v.ndim == 2, "logits", "must be [vocab] or [batch, vocab], got " + v.shape_str());
  require(v.size(-1) > 0, "logits", "has an empty vocabulary dimension");
  require(v.stride(-1) == 1 || v.numel() == 0, "logits", "must be contiguous along the vocabulary");
  return {v.ptr<float>(), v.ndim == 2 ? v.shape[0] : 1, v.size(-1), v.ndim == 2 ? v.strides[0] : v.shape[0]};
}

std::span<const int32_t> context_span(const std::optional<AnyArray>& ids) {
  if (!ids) return {};
  const TensorView v = as_view(*ids, "context_ids");
  if (v.numel() == 0) return {};
  return {as_int32(*ids, "context_ids"), size_t(v.shape[0])};
}

}  // namespace

void bind_engine(nb::module_& m) {
  m.def("sample",
        [](const AnyArray& logits, float temperature, int64_t top_k, float top_p, float min_p,
           float repetition_penalty, float presence_penalty, float frequency_penalty,
           std::optional<AnyArray> context_ids, std::optional<AnyArray> context_offsets, uint64_t seed,
           int64_t prompt_length) {
          Sampler sampler(make_params(temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty,
                                      frequency_penalty, seed),
                          prompt_length);
          const Rows r = logits_rows(logits);
          const std::span<const int32_t> ctx = context_span(context_ids);
          const int32_t* offsets = nullptr;
          if (context_offsets) {
            require(context_ids.has_value(), "context_offsets", "given without context_ids");
            offsets = as_int32(*context_offsets, "context_offsets", r.rows + 1);
            require(offsets[0] == 0 && offsets[r.rows] == int32_t(ctx.size()), "context_offsets",
                    "must start at 0 and end at len(context_ids)");
            for (int64_t b = 0; b < r.rows; ++b)
              require(offsets[b] <= offsets[b + 1], "context_offsets", "must be non-decreasing");
          }
          auto* out = new std::vector<int32_t>(size_t(r.rows));
          nb::capsule owner(out, [](void* p) noexcept { delete static_cast<std::vector<int32_t>*>(p); });
          {
            KernelScope scope(false);
            // Rows draw in order from one generator: the same seed gives the same ids for the same batch.
            for (int64_t b = 0; b < r.rows; ++b) {
              const auto row_ctx = offsets ? ctx.subspan(size_t(offsets[b]), size_t(offsets[b + 1] - offsets[b])) : ctx;
              (*out)[size_t(b)] = sampler.sample({r.data + b * r.row_stride, size_t(r.vocab)}, row_ctx);
            }
          }
          return nb::ndarray<nb::numpy, int32_t, nb::ndim<1>>(out->data(), {size_t(r.rows)}, owner);
        },
        nb::arg("logits"), nb::arg("temperature"), nb::arg("top_k"), nb::arg("top_p"), nb::arg("min_p"),
        nb::arg("repetition_penalty"), nb::arg("presence_penalty"), nb::arg("frequency_penalty"),
        nb::arg("context_ids").none(), nb::arg("context_offsets").none(), nb::arg("seed"),
        nb::arg("prompt_length") = int64_t(0),
        "One token id per row of float32 logits [vocab] or [batch, vocab] (see attnzoo.generate.sample).");

  nb::class_<Sampler>(m, "Sampler", "A sampler whose generator advances across calls (one per generation).")
      .def("__init__",
           [](Sampler* self, float temperature, int64_t top_k, float top_p, float min_p, float repetition_penalty,
              float presence_penalty, float frequency_penalty, uint64_t seed, int64_t prompt_length) {
             new (self) Sampler(make_params(temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty,
                                            frequency_penalty, seed),
                                prompt_length);
           },
           nb::arg("temperature"), nb::arg("top_k"), nb::arg("top_p"), nb::arg("min_p"),
           nb::arg("repetition_penalty"), nb::arg("presence_penalty"), nb::arg("frequency_penalty"), nb::arg("seed"),
           nb::arg("prompt_length") = int64_t(0))
      .def("sample",
           [](Sampler& s, const AnyArray& logits, std::optional<AnyArray> context_ids) {
             const Rows r = logits_rows(logits);
             require(r.rows == 1 && logits.ndim() == 1, "logits", "must be one row [vocab]");
             const auto ctx = context_span(context_ids);
             // The GIL stays held: a Sampler's buffers and position change in sample(), so two threads sharing one
             // must take turns (one row costs well under a millisecond).
             return s.sample({r.data, size_t(r.vocab)}, ctx);
           },
           nb::arg("logits"), nb::arg("context_ids").none());

  nb::class_<StopStringMatcher>(m, "StopStringMatcher")
      .def(nb::init<std::vector<std::string>>(), nb::arg("stops"))
      .def("push",
           [](StopStringMatcher& m, const std::string& piece, bool can_end) {
             auto step = m.push(piece, can_end);
             return std::make_pair(step.text, step.stopped);
           },
           nb::arg("piece"), nb::arg("can_end") = true,
           "Returns (text safe to emit, whether a stop string completed); can_end=False: no stop string may end in "
           "this piece (a minimum length's text), though one may begin there.")
      .def("flush", &StopStringMatcher::flush);

  // The C++ generation loop over a loaded model (and tokenizer, for text and stop strings). `stream` is called
  // with each piece of text, with the GIL held; it needs a tokenizer.
  m.def("generate",
        [](const Model& model, const AnyArray& ids, std::shared_ptr<const tok::Tokenizer> tokenizer,
           float temperature, int64_t top_k, float top_p, float min_p, float repetition_penalty,
           float presence_penalty, float frequency_penalty, uint64_t seed, int64_t max_new_tokens,
           std::vector<int32_t> eos_token_ids, std::vector<std::string> stop, nb::object stream,
           const std::string& speculative, int64_t num_speculative_tokens, int64_t prompt_lookup_min,
           int64_t prompt_lookup_max, const Model* draft_model, bool checkpoint_each_token,
           bool skip_special_tokens, int64_t min_new_tokens) {
          GenerationOptions o;
          o.sampling = make_params(temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty,
                                   frequency_penalty, seed);
          o.max_new_tokens = max_new_tokens;
          o.min_new_tokens = min_new_tokens;
          o.eos_token_ids = std::move(eos_token_ids);
          o.stop = std::move(stop);
          const TensorView v = as_view(ids, "ids");
          const std::span<const int32_t> prompt(v.numel() ? as_int32(ids, "ids") : nullptr, size_t(v.numel()));
          SpeculativeOptions so;
          so.method = parse_speculative_method(speculative, "speculative");
          so.num_speculative_tokens = num_speculative_tokens;
          so.prompt_lookup_min = prompt_lookup_min;
          so.prompt_lookup_max = prompt_lookup_max;
          if (draft_model) so.draft_model = "<loaded>";
          const auto proposer = make_proposer(so, draft_model, model.info().vocab_size);
          o.proposer = proposer.get();
          o.num_speculative_tokens = num_speculative_tokens;
          ModelSequence sequence(model);
          sequence.set_checkpoint_each_token(checkpoint_each_token);
          std::unique_ptr<TokenizerTextStream> text;
          if (tokenizer) text = std::make_unique<TokenizerTextStream>(tokenizer, skip_special_tokens);
          require(stream.is_none() || text, "stream", "needs a tokenizer (the native loop streams text)");
          TextCallback on_text;
          if (!stream.is_none()) {
            on_text = [&](std::string_view piece) {
              nb::gil_scoped_acquire acquire;
              stream(nb::str(piece.data(), piece.size()));
            };
          }
          // Ctrl-C on the main thread ends generation between tokens; the call then raises KeyboardInterrupt.
          if (on_main_thread()) o.cancel = python_signal_pending;
          GenerationResult r;
          {
            KernelScope scope(false);  // a forward pass is not cut midway; the loop checks between tokens
            r = generate(sequence, prompt, o, text.get(), on_text);
          }
          if (r.reason == StopReason::cancelled) throw Interrupted();
          nb::dict out;
          out["tokens"] = r.tokens;
          out["text"] = r.text;
          out["stop_reason"] = std::string(stop_reason_name(r.reason));
          out["prompt_tokens"] = r.prompt_tokens;
          out["prefill_seconds"] = r.prefill_seconds;
          out["decode_seconds"] = r.decode_seconds;
          out["decode_steps"] = r.decode_steps;
          // vLLM's spec-decode counters: num_drafts, num_draft_tokens, num_accepted_tokens.
          out["num_drafts"] = r.speculative.drafts;
          out["num_draft_tokens"] = r.speculative.draft_tokens;
          out["num_accepted_tokens"] = r.speculative.accepted_tokens;
          return out;
        },
        nb::arg("model"), nb::arg("ids"), nb::arg("tokenizer").none(), nb::arg("temperature"), nb::arg("top_k"),
        nb::arg("top_p"), nb::arg("min_p"), nb::arg("repetition_penalty"), nb::arg("presence_penalty"),
        nb::arg("frequency_penalty"), nb::arg("seed"), nb::arg("max_new_tokens"), nb::arg("eos_token_ids"),
        nb::arg("stop"), nb::arg("stream").none(), nb::arg("speculative") = "none",
        nb::arg("num_speculative_tokens") = int64_t(0), nb::arg("prompt_lookup_min") = int64_t(1),
        nb::arg("prompt_lookup_max") = int64_t(3), nb::arg("draft_model").none() = nb::none(),
        nb::arg("checkpoint_each_token") = false, nb::arg("skip_special_tokens") = true,
        nb::arg("min_new_tokens") = int64_t(0));

  m.def("load_eos_token_ids", &load_eos_token_ids, nb::arg("model_dir"),
        "EOS ids from generation_config.json, else config.json (empty list when neither names one).");
  m.def("resolve_sampling",
        [](const std::string& model_path, std::optional<bool> do_sample, std::optional<float> temperature,
           std::optional<int64_t> top_k, std::optional<float> top_p, std::optional<float> min_p,
           std::optional<float> repetition_penalty) {
          const SamplingParams p = resolve_sampling(
              model_path, SamplingOverrides{do_sample, temperature, top_p, min_p, repetition_penalty, top_k});
          nb::dict out;
          out["temperature"] = p.temperature;
          out["top_k"] = p.top_k;
          out["top_p"] = p.top_p;
          out["min_p"] = p.min_p;
          out["repetition_penalty"] = p.repetition_penalty;
          return out;
        },
        nb::arg("model_path"), nb::arg("do_sample").none(), nb::arg("temperature").none(), nb::arg("top_k").none(),
        nb::arg("top_p").none(), nb::arg("min_p").none(), nb::arg("repetition_penalty").none(),
        "The sampling values every front end uses: the checkpoint's generation_config.json (model_path '' for "
        "none), the arguments given winning (engine/sampling_defaults.h).");
  m.def("resolve_min_new_tokens", &resolve_min_new_tokens, nb::arg("model_path"), nb::arg("min_new_tokens").none(),
        nb::arg("prompt_tokens"),
        "The new tokens before which EOS may not be drawn: min_new_tokens when given, else the checkpoint's "
        "generation_config.json min_new_tokens, else its min_length less the prompt (engine/sampling_defaults.h).");
  m.def(
      "default_eos_ids",
      [](const std::string& model_path, const std::shared_ptr<const tok::Tokenizer>& tokenizer,
         const std::vector<int32_t>& end_of_turn) { return default_eos_ids(model_path, tokenizer.get(), end_of_turn); },
      nb::arg("model_path"), nb::arg("tokenizer").none(), nb::arg("end_of_turn"),
      "The ids that end generation by default: the checkpoint's, the tokenizer's and a chat's end of turn.");
}

}  // namespace attnzoo::py
