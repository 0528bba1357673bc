// Bindings for the serving engine (engine/engine.h): _core.Engine runs the scheduler on its own thread;
// _core.OutputQueue hands each request's outputs to Python, waiting with the GIL released. Python wraps them in
// attnzoo/engine.py (Engine, LLM, SamplingParams).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>

#include "bindings.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/json_constraint.h"
#include "engine/json_recognizer.h"
#include "engine/json_schema_recognizer.h"
#include "loader/json.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::py {
namespace {

// A schema given as JSON text (Python's json.dumps of the dict), compiled; ArgumentError (ValueError) naming
// response_format when it is not JSON or not a supported schema.
std::shared_ptr<const JsonSchema> schema_from_text(const std::string& text) {
  json::Value v;
  try {
    v = json::parse(text);
  } catch (const json::ParseError& e) {
    throw ArgumentError(std::string("response_format: the json_schema is not JSON: ") + e.what());
  }
  return compile_json_schema(v);
}

// The per-step mask of JSON mode / structured outputs over one vocabulary, for `bench kernels` (bench/json_mask.py)
// and the mask-cost figures: prepare() takes the recognizer states at every byte of a document, mask() computes
// the allowed set from each, read() makes the plain pass over a row of V logits that any mask costs at least.
class JsonMaskBench {
 public:
  explicit JsonMaskBench(std::vector<std::string> token_bytes)
      : bytes_(std::move(token_bytes)), trie_(bytes_), row_(bytes_.size(), 0.5f) {}
  int64_t prepare(const std::string& schema, nb::bytes doc) {
    const std::string_view text(static_cast<const char*>(doc.data()), doc.size());
    objects_.clear();
    schemas_.clear();
    if (schema.empty()) {
      JsonRecognizer r;
      for (char c : text) {
        objects_.push_back(r);
        require(r.push(uint8_t(c)), "doc", "is not a JSON object");
      }
    } else {
      compiled_ = schema_from_text(schema);
      JsonSchemaRecognizer r(*compiled_);
      for (char c : text) {
        schemas_.push_back(r);
        require(r.push(uint8_t(c)), "doc", "does not follow the schema");
      }
    }
    return int64_t(text.size());
  }
  // Tokens allowed, summed over the prepared states.
  int64_t mask() {
    int64_t total = 0;
    for (const auto& s : objects_) total += trie_.allowed(s, allowed_);
    for (const auto& s : schemas_) total += trie_.allowed(s, allowed_);
    return total;
  }
  // Seconds of each state's mask, one pass (where the cost lies: in strings, keys, enum values...).
  std::vector<double> mask_each() {
    std::vector<double> out;
    const auto time = [&](const auto& s) {
      const auto t0 = std::chrono::steady_clock::now();
      trie_.allowed(s, allowed_);
      mask_row(row_, allowed_);
      out.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    };
    for (const auto& s : objects_) time(s);
    for (const auto& s : schemas_) time(s);
    return out;
  }
  void read() {
    allowed_.resize(row_.size(), 1);
    for (size_t i = 0; i < objects_.size() + schemas_.size(); ++i) mask_row(row_, allowed_);
  }
  int64_t vocab_size() const { return trie_.vocab_size(); }
  int64_t string_plain_tokens() const { return trie_.string_plain_tokens(); }
  void use_pattern_sets(bool on) { trie_.use_pattern_sets(on); }
  size_t pattern_set_bytes() const { return trie_.pattern_set_bytes(); }
  // Each prepared state's flags, one after another (states x vocabulary bytes).
  nb::bytes masks() {
    std::string out;
    const auto add = [&](const auto& s) {
      trie_.allowed(s, allowed_);
      out.append(reinterpret_cast<const char*>(allowed_.data()), allowed_.size());
    };
    for (const auto& s : objects_) add(s);
    for (const auto& s : schemas_) add(s);
    return nb::bytes(out.data(), out.size());
  }

 private:
  std::vector<std::string> bytes_;
  TokenTrie trie_;
  std::vector<float> row_;
  std::vector<uint8_t> allowed_;
  std::shared_ptr<const JsonSchema> compiled_;
  std::vector<JsonRecognizer> objects_;
  std::vector<JsonSchemaRecognizer> schemas_;
};

double seconds(EngineClock::time_point t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }

nb::list logprob_list(const std::vector<TokenLogprob>& v) {
  nb::list l;
  for (const auto& t : v) l.append(nb::make_tuple(t.token, t.logprob));
  return l;
}

// One output as a dict; times are seconds on the monotonic clock (time.monotonic()'s clock on Linux).
nb::dict output_dict(const RequestOutput& o) {
  nb::dict d;
  d["request_id"] = o.request_id;
  d["finished"] = o.finished;
  d["error"] = o.error;
  nb::list samples;
  for (const auto& s : o.samples) {
    nb::dict sd;
    sd["index"] = s.index;
    sd["token_ids"] = s.token_ids;
    sd["text"] = s.text;
    nb::list times;
    for (auto t : s.token_times) times.append(seconds(t));
    sd["token_times"] = times;
    sd["logprobs"] = logprob_list(s.logprobs);
    nb::list top;
    for (const auto& t : s.top_logprobs) top.append(logprob_list(t));
    sd["top_logprobs"] = top;
    sd["finish_reason"] = s.finish_reason ? nb::object(nb::str(finish_reason_name(*s.finish_reason))) : nb::none();
    samples.append(sd);
  }
  d["samples"] = samples;
  nb::dict usage;
  usage["prompt_tokens"] = o.usage.prompt_tokens;
  usage["completion_tokens"] = o.usage.completion_tokens;
  usage["cached_tokens"] = o.usage.cached_tokens;
  d["usage"] = usage;
  d["arrival"] = seconds(o.arrival);
  d["first_token"] = o.first_token ? nb::object(nb::float_(seconds(*o.first_token))) : nb::none();
  d["finish"] = o.finish ? nb::object(nb::float_(seconds(*o.finish))) : nb::none();
  d["preemptions"] = o.preemptions;
  return d;
}

nb::dict stats_dict(const EngineStats& s) {
  nb::dict d;
  d["running_requests"] = s.running_requests;
  d["waiting_requests"] = s.waiting_requests;
  d["running_sequences"] = s.running_sequences;
  d["preemptions"] = s.preemptions;
  d["num_blocks"] = s.num_blocks;
  d["free_blocks"] = s.free_blocks;
  d["kv_cache_usage"] = s.kv_cache_usage;
  d["prefix_cache_queries"] = s.prefix_cache_queries;
  d["prefix_cache_hits"] = s.prefix_cache_hits;
  d["prompt_tokens"] = s.prompt_tokens;
  d["generation_tokens"] = s.generation_tokens;
  d["finished_requests"] = s.finished_requests;
  d["aborted_requests"] = s.aborted_requests;
  d["failed_requests"] = s.failed_requests;
  d["steps"] = s.steps;
  d["spec_decode_num_drafts"] = s.speculative.drafts;
  d["spec_decode_num_draft_tokens"] = s.speculative.draft_tokens;
  d["spec_decode_num_accepted_tokens"] = s.speculative.accepted_tokens;
  d["spec_decode_num_accepted_tokens_per_pos"] = s.speculative.accepted_per_position;
  // What vLLM's spec-decode log line reports: guesses kept / verified, tokens per verification pass.
  d["spec_decode_acceptance_rate"] = s.speculative.acceptance_rate();
  d["spec_decode_mean_acceptance_length"] = s.speculative.mean_acceptance_length();
  return d;
}

}  // namespace

void bind_serving(nb::module_& m) {
  // JSON mode's recognizer, for tests against Python's json module: how many leading bytes it accepts (all of them
  // when the text is a prefix of a JSON object) and whether those bytes are a whole object.
  m.def(
      "json_object_prefix",
      [](nb::bytes text) {
        JsonRecognizer r;
        size_t accepted = 0;
        const auto* p = static_cast<const uint8_t*>(text.data());
        while (accepted < text.size() && r.push(p[accepted])) ++accepted;
        return std::make_pair(accepted, r.complete());
      },
      nb::arg("text"));
  // Structured outputs' recognizer, for tests against Python's json and a schema validator: how many leading bytes
  // of `text` it accepts, whether they are a whole document (no byte may follow) and whether the text may end there.
  m.def(
      "json_schema_prefix",
      [](const std::string& schema, nb::bytes text) {
        const auto compiled = schema_from_text(schema);
        JsonSchemaRecognizer r(*compiled);
        size_t accepted = 0;
        const auto* p = static_cast<const uint8_t*>(text.data());
        while (accepted < text.size() && r.push(p[accepted])) ++accepted;
        return nb::make_tuple(accepted, r.complete(), r.can_end());
      },
      nb::arg("schema"), nb::arg("text"));
  // The bytes that may follow `text` (all of it accepted, else an ArgumentError): random walks through the
  // recognizer, whose documents the tests then validate independently.
  m.def(
      "json_schema_next_bytes",
      [](const std::string& schema, nb::bytes text) {
        const auto compiled = schema_from_text(schema);
        JsonSchemaRecognizer r(*compiled);
        require(r.push(std::string_view(static_cast<const char*>(text.data()), text.size())), "text",
                "is not a prefix the schema's recognizer accepts");
        std::string next;
        for (int b = 0; b < 256; ++b) {
          JsonSchemaRecognizer t = r;
          if (t.push(uint8_t(b))) next += char(b);
        }
        return nb::make_tuple(nb::bytes(next.data(), next.size()), r.complete(), r.can_end());
      },
      nb::arg("schema"), nb::arg("text"));
  nb::class_<JsonMaskBench>(m, "JsonMaskBench")
      .def("__init__",
           [](JsonMaskBench* self, const std::vector<nb::bytes>& tokens) {
             std::vector<std::string> bytes;
             for (const auto& t : tokens) bytes.emplace_back(static_cast<const char*>(t.data()), t.size());
             new (self) JsonMaskBench(std::move(bytes));
           },
           nb::arg("token_bytes"))
      .def("prepare", &JsonMaskBench::prepare, nb::arg("schema"), nb::arg("doc"),
           "The states at every byte of `doc` (schema \"\": JSON mode's); how many.")
      .def("mask", &JsonMaskBench::mask, nb::call_guard<nb::gil_scoped_release>())
      .def("read", &JsonMaskBench::read, nb::call_guard<nb::gil_scoped_release>())
      .def("mask_each", &JsonMaskBench::mask_each, "Each state's mask and -inf fill, seconds (one pass).")
      .def("use_pattern_sets", &JsonMaskBench::use_pattern_sets, nb::arg("on"),
           "Off: patterned strings walk the whole trie (the mask before the per-state token sets).")
      .def_prop_ro("pattern_set_bytes", &JsonMaskBench::pattern_set_bytes,
                   "What the per-DFA-state token sets built so far keep, bytes.")
      .def("masks", &JsonMaskBench::masks, "Each prepared state's allowed flags, concatenated.")
      .def_prop_ro("vocab_size", &JsonMaskBench::vocab_size)
      .def_prop_ro("string_plain_tokens", &JsonMaskBench::string_plain_tokens);
  // What each id adds to the text mid-generation (the mask's input), for measuring the mask on a real vocabulary.
  m.def(
      "token_bytes_in_context",
      [](std::shared_ptr<const tok::Tokenizer> tokenizer, int64_t vocab) {
        nb::list out;
        for (const auto& b : token_bytes_in_context(*tokenizer, vocab)) out.append(nb::bytes(b.data(), b.size()));
        return out;
      },
      nb::arg("tokenizer"), nb::arg("vocab_size"));
  m.def(
      "check_json_schema", [](const std::string& schema) { schema_from_text(schema); }, nb::arg("schema"),
      "Raises ValueError naming the keyword and its JSON pointer when the schema is outside the supported subset.");
  nb::exception<EngineStopped>(m, "EngineStoppedError", PyExc_RuntimeError);
  nb::exception<EngineBusy>(m, "EngineBusyError", PyExc_RuntimeError);

  nb::class_<OutputQueue>(m, "OutputQueue")
      .def_static("make", &OutputQueue::make)
      .def("pop",
           [](OutputQueue& q, double timeout) -> nb::object {
             std::optional<RequestOutput> out;
             {
               nb::gil_scoped_release release;
               out = q.pop(std::chrono::milliseconds(int64_t(timeout * 1000)));
             }
             if (!out) return nb::none();
             return output_dict(*out);
           },
           nb::arg("timeout"), "The next output as a dict, or None after `timeout` seconds.")
      .def_prop_ro("finished", &OutputQueue::finished);

  nb::class_<Engine>(m, "Engine")
      .def("__init__",
           [](Engine* self, const Model& model, std::shared_ptr<const tok::Tokenizer> tokenizer,
              int64_t max_num_batched_tokens, int64_t max_num_seqs, int64_t max_model_len, bool enable_chunked_prefill,
              std::vector<int32_t> eos_token_ids, int64_t max_waiting_requests, const std::string& speculative,
              int64_t num_speculative_tokens, int64_t prompt_lookup_min, int64_t prompt_lookup_max,
              const Model* draft_model) {
             EngineOptions o;
             o.max_num_batched_tokens = max_num_batched_tokens;
             o.max_num_seqs = max_num_seqs;
             o.max_model_len = max_model_len;
             o.enable_chunked_prefill = enable_chunked_prefill;
             o.eos_token_ids = std::move(eos_token_ids);
             o.max_waiting_requests = max_waiting_requests;
             o.speculative.method = parse_speculative_method(speculative, "speculative");
             o.speculative.num_speculative_tokens = num_speculative_tokens;
             o.speculative.prompt_lookup_min = prompt_lookup_min;
             o.speculative.prompt_lookup_max = prompt_lookup_max;
             o.draft_model = draft_model;
             new (self) Engine(model, std::move(tokenizer), o);
           },
           nb::arg("model"), nb::arg("tokenizer").none(), nb::arg("max_num_batched_tokens"), nb::arg("max_num_seqs"),
           nb::arg("max_model_len"), nb::arg("enable_chunked_prefill"), nb::arg("eos_token_ids"),
           nb::arg("max_waiting_requests"), nb::arg("speculative") = "none",
           nb::arg("num_speculative_tokens") = int64_t(0), nb::arg("prompt_lookup_min") = int64_t(1),
           nb::arg("prompt_lookup_max") = int64_t(3), nb::arg("draft_model").none() = nb::none(),
           nb::keep_alive<1, 2>(), nb::keep_alive<1, 14>())
      .def("add_request",
           [](Engine& e, std::vector<int32_t> prompt, std::shared_ptr<OutputQueue> queue, float temperature,
              int64_t top_k, float top_p, float min_p, float repetition_penalty, float presence_penalty,
              float frequency_penalty, uint64_t seed, int64_t max_tokens, int64_t n, std::vector<std::string> stop,
              std::vector<int32_t> stop_token_ids, bool ignore_eos, bool logprobs, int64_t top_logprobs,
              std::vector<std::pair<int32_t, float>> logit_bias, const std::string& response_format,
              const std::string& json_schema, bool skip_special_tokens, int64_t min_tokens) {
             Request r;
             r.prompt = std::move(prompt);
             auto& p = r.params;
             p.sampling = make_params(temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty,
                                      frequency_penalty, seed);
             p.max_tokens = max_tokens;
             p.n = n;
             p.stop = std::move(stop);
             p.stop_token_ids = std::move(stop_token_ids);
             p.ignore_eos = ignore_eos;
             p.min_tokens = min_tokens;
             p.logprobs = logprobs;
             p.top_logprobs = top_logprobs;
             p.logit_bias = std::move(logit_bias);
             p.skip_special_tokens = skip_special_tokens;
             if (response_format == "json_object") {
               p.response_format = ResponseFormat::json_object;
             } else if (response_format == "json_schema") {
               p.response_format = ResponseFormat::json_schema;
               p.json_schema = schema_from_text(json_schema);
             } else {
               require(response_format == "text", "response_format",
                       "must be \"text\", \"json_object\" or \"json_schema\", got \"" + response_format + "\"");
             }
             return e.add_request(std::move(r), queue->callback());
           },
           nb::arg("prompt"), nb::arg("queue"), nb::arg("temperature"), nb::arg("top_k"), nb::arg("top_p"),
           nb::arg("min_p"), nb::arg("repetition_penalty"), nb::arg("presence_penalty"), nb::arg("frequency_penalty"),
           nb::arg("seed"), nb::arg("max_tokens"), nb::arg("n"), nb::arg("stop"), nb::arg("stop_token_ids"),
           nb::arg("ignore_eos"), nb::arg("logprobs"), nb::arg("top_logprobs"),
           nb::arg("logit_bias") = std::vector<std::pair<int32_t, float>>(), nb::arg("response_format") = "text",
           nb::arg("json_schema") = "", nb::arg("skip_special_tokens") = true, nb::arg("min_tokens") = int64_t(0))
      .def("abort", &Engine::abort, nb::arg("request_id"))
      .def("stats", [](const Engine& e) { return stats_dict(e.stats()); })
      .def("stop", &Engine::stop, nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("max_model_len", &Engine::max_model_len);
}

}  // namespace attnzoo::py
