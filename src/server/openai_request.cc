#include "server/openai_request.h"

#include <cstdint>
#include <map>
#include <semaphore>
#include <string>

#include "answers/harmony.h"
#include "core/error.h"
#include "engine/chat_turns.h"
#include "engine/json_schema.h"
#include "loader/json_writer.h"
#include "server/api_error.h"
#include "server/request_fields.h"
#include "server/tool_request.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::server {

using answers::ReasoningParser;
using answers::ToolFormat;
using answers::ToolMode;
using answers::detect_tool_format;
using answers::harmony_end_ids;
using answers::kHarmonyFinalHeader;
using answers::kThinkClose;
using answers::kThinkOpen;
using answers::reads_harmony;
using answers::tool_call_marker;

namespace {

using json::Value;

std::vector<std::string> stop_strings(const Value& v, const ApiLimits& limits) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.as_string());
  } else if (v.is_array()) {
    // Each sample keeps its own copy and looks for every one after each token: bounded before anything is copied.
    if (int64_t(v.as_array().size()) > limits.max_stop)
      throw bad_request("stop: at most " + std::to_string(limits.max_stop) + " stop strings, got " +
                            std::to_string(v.as_array().size()),
                        "stop");
    for (const Value& s : v.as_array()) {
      if (!s.is_string()) throw bad_request("stop: must be a string or a list of strings", "stop");
      out.push_back(s.as_string());
    }
  } else {
    throw bad_request("stop: must be a string or a list of strings", "stop");
  }
  for (const std::string& s : out) {
    if (s.empty()) throw bad_request("stop: empty stop strings are not allowed", "stop");
    if (int64_t(s.size()) > limits.max_stop_bytes)
      throw bad_request("stop: a stop string may be at most " + std::to_string(limits.max_stop_bytes) + " bytes, got " +
                            std::to_string(s.size()),
                        "stop");
  }
  return out;
}

std::vector<int32_t> token_ids(const Value& v, const char* key, int64_t vocab) {
  std::vector<int32_t> out;
  for (const Value& id : v.as_array()) {
    if (!id.is_integer() || id.as_int() < 0 || id.as_int() >= vocab)
      throw bad_request(std::string(key) + ": token ids must be integers in [0, " + std::to_string(vocab) + ")", key);
    out.push_back(int32_t(id.as_int()));
  }
  return out;
}

std::vector<int32_t> completion_prompt(const Value& body, const tok::Tokenizer& tokenizer) {
  const Value* p = field(body, "prompt");
  if (!p) throw bad_request("prompt: required", "prompt");
  const Value* one = p;
  // A list holding one prompt is the same request; several prompts in one call are not supported (send one
  // request per prompt: the engine batches them anyway).
  if (p->is_array() && p->as_array().size() == 1 && !p->as_array()[0].is_integer()) one = &p->as_array()[0];
  if (one->is_string()) return tokenizer.encode(one->as_string(), /*add_special_tokens=*/true);
  if (one->is_array() && !one->as_array().empty() && one->as_array()[0].is_integer())
    return token_ids(*one, "prompt", int64_t(tokenizer.vocab_size()));
  throw bad_request("prompt: must be a string or a list of token ids (one prompt per request)", "prompt");
}

// vLLM's chat_template_kwargs: extra variables for the template (enable_thinking, ...), as transformers'
// apply_chat_template(**kwargs) passes them.
chat::Dict template_kwargs(const Value& body) {
  chat::Dict out;
  const Value* v = field(body, "chat_template_kwargs");
  if (!v) return out;
  if (!v->is_object())
    throw bad_request("chat_template_kwargs: must be an object of template variables", "chat_template_kwargs");
  for (const json::Member* m : v->members_in_source_order()) {
    // The ones the server sets itself (transformers refuses them twice as a duplicate keyword argument).
    for (const char* own : {"messages", "tools", "documents", "add_generation_prompt"})
      if (m->first == own)
        throw bad_request("chat_template_kwargs." + m->first + ": set by the request itself, not a template kwarg",
                          "chat_template_kwargs");
    out.set(m->first, chat::Value::from_json(m->second));
  }
  return out;
}

std::vector<int32_t> chat_prompt(const Value& body, const ChatFormat* chat, const ToolRequest& tools, bool harmony,
                                 const std::string& prefix, int64_t max_values) {
  if (!chat) throw bad_request("this model has no chat template: use /v1/completions", "messages");
  const Value* m = field(body, "messages");
  if (!m || !m->is_array() || m->as_array().empty())
    throw bad_request("messages: required, a non-empty list of {role, content}", "messages");
  const chat::Value messages = chat_messages(*m, tools.format, harmony, max_values);
  const chat::Dict kwargs = template_kwargs(body);
  std::string text;
  try {
    text = chat->render(messages, /*add_generation_prompt=*/true, tools.tools, kwargs);
  } catch (const std::exception& e) {  // raise_exception in the template, a render limit
    throw bad_request(std::string("messages: the chat template refused them: ") + e.what(), "messages");
  }
  // A forced call starts inside its block, as if the model had written the opening tag itself.
  return chat->encode(text + prefix);
}

// vLLM's _MAX_TEMP: a smaller positive temperature is raised to it, so no client value overflows the scaled logits.
constexpr double kMinTemperature = 0.01;

void sampling_fields(const Value& body, SamplingParams& s) {
  if (const Value* v = field(body, "temperature")) {
    const double t = number_field(*v, "temperature", 0, 2);
    s.temperature = float(t > 0 && t < kMinTemperature ? kMinTemperature : t);
  }
  if (const Value* v = field(body, "top_p")) s.top_p = float(number_field(*v, "top_p", 1e-9, 1));
  if (const Value* v = field(body, "top_k")) {
    const int64_t k = int_field(*v, "top_k", -1, INT64_MAX);
    s.top_k = k < 0 ? 0 : k;  // vLLM: -1 (or 0) turns it off
  }
  if (const Value* v = field(body, "min_p")) s.min_p = float(number_field(*v, "min_p", 0, 1));
  if (const Value* v = field(body, "presence_penalty"))
    s.presence_penalty = float(number_field(*v, "presence_penalty", -2, 2));
  if (const Value* v = field(body, "frequency_penalty"))
    s.frequency_penalty = float(number_field(*v, "frequency_penalty", -2, 2));
  if (const Value* v = field(body, "repetition_penalty"))
    s.repetition_penalty = float(number_field(*v, "repetition_penalty", 1e-6, 100));
  // No seed (or vLLM's -1): a fresh one for this request, as vLLM and OpenAI draw; its n samples use seed + i.
  const Value* seed = field(body, "seed");
  const int64_t given = seed ? int_field(*seed, "seed", -1, INT64_MAX) : -1;
  s.seed = given < 0 ? fresh_seed() : uint64_t(given);
}

// vLLM's sampling extras that attnzoo does not implement: refused by name unless their value asks for what it does
// anyway, so that no client believes they took effect.
void unimplemented_vllm_fields(const Value& body) {
  const auto refuse = [](const char* name, const std::string& accepted) {
    throw bad_request(std::string(name) + ": not supported by this server (" + accepted + ")", name);
  };
  if (field(body, "allowed_token_ids")) refuse("allowed_token_ids", "null or absent only");
  if (const Value* v = field(body, "bad_words"); v && !(v->is_array() && v->as_array().empty()))
    refuse("bad_words", "an empty list, null or absent only");
  if (field(body, "prompt_logprobs")) refuse("prompt_logprobs", "null or absent only");
  if (const Value* v = field(body, "use_beam_search"); v && !(v->is_bool() && !v->as_bool()))
    refuse("use_beam_search", "false only");
  if (const Value* v = field(body, "skip_special_tokens"); v && !(v->is_bool() && v->as_bool()))
    refuse("skip_special_tokens", "true only: special tokens are always left out of the text");
  if (const Value* v = field(body, "include_stop_str_in_output"); v && !(v->is_bool() && !v->as_bool()))
    refuse("include_stop_str_in_output", "false only: the text ends before the stop string");
}

void logprob_fields(Endpoint endpoint, const Value& body, const ApiLimits& limits, RequestParams& p) {
  if (endpoint == Endpoint::completions) {
    // Completions: logprobs is the number of alternatives per token (0: only the chosen token's).
    if (const Value* v = field(body, "logprobs")) {
      p.logprobs = true;
      p.top_logprobs = int_field(*v, "logprobs", 0, limits.max_top_logprobs);
    }
    return;
  }
  if (const Value* v = field(body, "logprobs")) p.logprobs = bool_field(*v, "logprobs");
  if (const Value* v = field(body, "top_logprobs")) {
    p.top_logprobs = int_field(*v, "top_logprobs", 0, limits.max_top_logprobs);
    if (!p.logprobs && p.top_logprobs > 0) throw bad_request("top_logprobs: needs logprobs: true", "top_logprobs");
  }
}

std::vector<std::pair<int32_t, float>> logit_bias(const Value& v, int64_t vocab, int64_t max_entries) {
  if (!v.is_object()) throw bad_request("logit_bias: must be an object of token id strings to biases", "logit_bias");
  const json::Object& entries = v.as_object();
  if (int64_t(entries.size()) > max_entries)
    throw bad_request("logit_bias: at most " + std::to_string(max_entries) + " entries, got " +
                          std::to_string(entries.size()),
                      "logit_bias");
  std::vector<std::pair<int32_t, float>> out;
  std::map<int64_t, const std::string*> seen;  // id: its key
  for (const auto& [key, bias] : entries) {
    // OpenAI's keys are token ids written as decimal strings.
    int64_t id = -1;
    if (!key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos) id = std::stoll(key);
    if (id < 0 || id >= vocab)
      throw bad_request("logit_bias: keys must be token ids in [0, " + std::to_string(vocab) + "), got \"" + key + "\"",
                        "logit_bias");
    if (!bias.is_number() || !(bias.as_double() >= -100 && bias.as_double() <= 100))
      throw bad_request("logit_bias: the bias of token " + key + " must be a number in [-100, 100]", "logit_bias");
    // "7" and "07" are distinct JSON keys but one token: the biases would add up past [-100, 100].
    if (const auto [at, fresh] = seen.emplace(id, &key); !fresh)
      throw bad_request("logit_bias: keys \"" + *at->second + "\" and \"" + key + "\" both name token " +
                            std::to_string(id),
                        "logit_bias");
    out.emplace_back(int32_t(id), float(bias.as_double()));
  }
  return out;
}

void response_format(const Value& v, RequestParams& p) {
  const Value* type = v.is_object() ? field(v, "type") : nullptr;
  if (!type || !type->is_string())
    throw bad_request("response_format: must be an object with a string type", "response_format");
  const std::string& t = type->as_string();
  if (t == "text") return;
  if (t == "json_object") {
    p.response_format = ResponseFormat::json_object;
    return;
  }
  if (t != "json_schema")
    throw bad_request("response_format.type: must be text, json_object or json_schema, got \"" + t + "\"",
                      "response_format");
  // OpenAI's shape: {"type": "json_schema", "json_schema": {"name": ..., "schema": {...}, "strict": true}}. strict
  // changes nothing here: the mask holds every sample to the schema either way.
  const Value* spec = field(v, "json_schema");
  if (!spec || !spec->is_object())
    throw bad_request("response_format.json_schema: must be an object with a schema", "response_format");
  for (const auto& [key, value] : spec->as_object())
    if (key != "name" && key != "schema" && key != "strict" && key != "description")
      throw bad_request("response_format.json_schema." + key + ": not supported (name, schema, strict, description)",
                        "response_format");
  if (const Value* name = field(*spec, "name"); name && !name->is_string())
    throw bad_request("response_format.json_schema.name: must be a string", "response_format");
  if (const Value* strict = field(*spec, "strict"); strict && !strict->is_bool() && !strict->is_null())
    throw bad_request("response_format.json_schema.strict: must be a boolean", "response_format");
  const Value* schema = field(*spec, "schema");
  if (!schema) throw bad_request("response_format.json_schema.schema: missing", "response_format");
  try {
    p.json_schema = compile_json_schema(*schema);
  } catch (const ArgumentError& e) {
    throw bad_request(e.what(), "response_format");
  }
  p.response_format = ResponseFormat::json_schema;
}

// A tag the parser reads that the tokenizer marks special would be dropped from the text (skip_special_tokens):
// keep special tokens in the answer then.
void keep_special_tag(const tok::Tokenizer& tokenizer, std::string_view tag, RequestParams& p) {
  const std::vector<int32_t> ids = tokenizer.encode(std::string(tag), false);
  if (ids.size() == 1 && tokenizer.is_special(ids[0])) p.skip_special_tokens = false;
}

}  // namespace

int64_t body_value_limit(const ApiLimits& limits) {
  return (limits.max_model_len > 0 ? limits.max_model_len : int64_t(1) << 20) + limits.max_body_values_beyond_context;
}

namespace {
std::counting_semaphore<BodySlot::kLargeBodySlots> large_bodies(BodySlot::kLargeBodySlots);
}

BodySlot::BodySlot(size_t body_bytes) : held_(body_bytes > kSmallBody) {
  if (held_) large_bodies.acquire();
}

BodySlot::~BodySlot() {
  if (held_) large_bodies.release();
}

ApiRequest parse_request(Endpoint endpoint, const std::string& text, const tok::Tokenizer& tokenizer,
                         const ChatFormat* chat, const ApiLimits& limits) {
  const BodySlot slot(text.size());  // for as long as `body` (and the messages built from it) live
  const int64_t max_values = body_value_limit(limits);
  Value body;
  try {
    json::ParseOptions options;
    options.max_values = max_values;
    body = json::parse(text, options);
  } catch (const json::ParseError& e) {
    // The value limit is this server's, not a flaw of the text: say so.
    if (e.value_limit)
      throw bad_request("the JSON body holds more than " + std::to_string(max_values) +
                        " values, more than any request to this model needs (max_model_len + " +
                        std::to_string(limits.max_body_values_beyond_context) + ")");
    throw bad_request(std::string("malformed JSON body: ") + e.what());
  }
  if (!body.is_object()) throw bad_request("the body must be a JSON object");

  // Fields whose meaning we do not implement are refused rather than silently ignored.
  for (const char* unsupported : {"echo", "suffix", "best_of", "functions", "function_call"}) {
    const Value* v = field(body, unsupported);
    if (v && !(v->is_bool() && !v->as_bool()) && !(v->is_integer() && v->as_int() <= 1) &&
        !(v->is_array() && v->as_array().empty()))
      throw bad_request(std::string(unsupported) + ": not supported by this server", unsupported);
  }

  unimplemented_vllm_fields(body);

  ApiRequest r;
  r.endpoint = endpoint;
  if (const Value* v = field(body, "model")) {
    if (!v->is_string()) throw bad_request("model: must be a string", "model");
    r.model = v->as_string();
  }
  if (const Value* v = field(body, "stream")) r.stream = bool_field(*v, "stream");
  if (const Value* v = field(body, "stream_options")) {
    if (!v->is_object()) throw bad_request("stream_options: must be an object", "stream_options");
    if (!r.stream) throw bad_request("stream_options: only allowed with stream: true", "stream_options");
    if (const Value* u = field(*v, "include_usage")) r.include_usage = bool_field(*u, "stream_options.include_usage");
  }

  RequestParams& p = r.request.params;
  sampling_fields(body, p.sampling);
  if (const Value* v = field(body, "n")) p.n = int_field(*v, "n", 1, limits.max_n);
  if (const Value* v = field(body, "stop")) p.stop = stop_strings(*v, limits);
  if (const Value* v = field(body, "stop_token_ids")) {
    if (!v->is_array()) throw bad_request("stop_token_ids: must be a list of token ids", "stop_token_ids");
    if (int64_t(v->as_array().size()) > limits.max_stop_token_ids)
      throw bad_request("stop_token_ids: at most " + std::to_string(limits.max_stop_token_ids) + " ids, got " +
                            std::to_string(v->as_array().size()),
                        "stop_token_ids");
    p.stop_token_ids = token_ids(*v, "stop_token_ids", int64_t(tokenizer.vocab_size()));
  }
  if (const Value* v = field(body, "ignore_eos")) p.ignore_eos = bool_field(*v, "ignore_eos");
  logprob_fields(endpoint, body, limits, p);
  if (const Value* v = field(body, "logit_bias"))
    p.logit_bias = logit_bias(*v, int64_t(tokenizer.vocab_size()), limits.max_logit_bias);
  if (const Value* v = field(body, "response_format")) response_format(*v, p);

  const bool chat_endpoint = endpoint == Endpoint::chat_completions;
  const ToolFormat format = !chat ? ToolFormat::none
                            : limits.tool_call_parser != ToolFormat::none ? limits.tool_call_parser
                                                                          : detect_tool_format(chat->source());
  const ToolRequest tools = parse_tool_fields(body, chat_endpoint, format, chat ? chat->source() : "");
  r.tool_mode = tools.mode;
  r.tool_format = tools.format;
  r.tool_forced_name = tools.forced_name;
  if (tools.mode == ToolMode::automatic) keep_special_tag(tokenizer, tool_call_marker(tools.format), p);
  r.parallel_tool_calls = tools.parallel;
  if (const Value* v = field(body, "include_reasoning")) r.include_reasoning = bool_field(*v, "include_reasoning");
  r.harmony = chat_endpoint && reads_harmony(format, limits.reasoning_parser);
  // The harmony reader splits the channels itself: no <think> parser beside it.
  if (chat_endpoint && !r.harmony && tools.mode != ToolMode::forced && p.response_format == ResponseFormat::text) {
    r.reasoning = limits.reasoning_parser;
    if (r.reasoning != ReasoningParser::none)
      for (std::string_view tag : {kThinkOpen, kThinkClose}) keep_special_tag(tokenizer, tag, p);
  }
  std::string prefix = tools.forced_prefix;
  if (r.harmony) {
    p.skip_special_tokens = false;  // its markers are special tokens
    // A schema-held answer is the body of a final message: the prompt opens one (a forced call opens its own).
    if (!tools.schema && p.response_format != ResponseFormat::text) prefix = std::string(kHarmonyFinalHeader);
    r.harmony_prefix = prefix;
    // <|return|> ends the answer, <|call|> a tool call: both end the turn (gpt-oss's generation_config lists them as
    // EOS; a checkpoint that does not still stops there).
    if (!p.ignore_eos)
      for (int32_t id : harmony_end_ids(tokenizer)) p.stop_token_ids.push_back(id);
  }
  if (tools.schema) {
    if (p.response_format != ResponseFormat::text)
      throw bad_request("tool_choice: a named or \"required\" tool_choice cannot be combined with response_format",
                        "tool_choice");
    p.response_format = ResponseFormat::json_schema;
    p.json_schema = tools.schema;
    p.json_sequence = tools.sequence;
  }
  r.request.prompt = chat_endpoint ? chat_prompt(body, chat, tools, r.harmony, prefix, max_values)
                                    : completion_prompt(body, tokenizer);
  if (r.request.prompt.empty()) throw bad_request("prompt: encodes to no tokens", "prompt");
  // The template's end of turn is one of the chat's EOS ids (default_eos_ids), so ignore_eos ignores it too.
  if (endpoint == Endpoint::chat_completions && !p.ignore_eos)
    for (int32_t id : chat->end_of_turn()) p.stop_token_ids.push_back(id);

  // OpenAI's defaults: 16 new tokens for a completion; a chat answer may fill the context.
  const Value* max_tokens = field(body, "max_tokens");
  if (!max_tokens && endpoint == Endpoint::chat_completions) max_tokens = field(body, "max_completion_tokens");
  const int64_t room = limits.max_model_len > 0 ? limits.max_model_len - int64_t(r.request.prompt.size()) : 0;
  if (max_tokens) {
    p.max_tokens = int_field(*max_tokens, "max_tokens", 1, limits.max_model_len > 0 ? limits.max_model_len : INT64_MAX);
  } else if (endpoint == Endpoint::chat_completions && limits.max_model_len > 0) {
    // No max_tokens to cite: the prompt alone fills the context.
    if (room <= 0)
      throw bad_request("messages: the prompt is " + std::to_string(r.request.prompt.size()) +
                            " tokens, which leaves no room for an answer within max_model_len " +
                            std::to_string(limits.max_model_len),
                        "messages");
    p.max_tokens = room;
  }
  // vLLM's min_tokens (an extra field of both endpoints): refused past max_tokens, as vLLM does, rather than cut.
  if (const Value* v = field(body, "min_tokens")) {
    p.min_tokens = int_field(*v, "min_tokens", 0, INT64_MAX);
    if (p.min_tokens > p.max_tokens)
      throw bad_request("min_tokens: must be <= max_tokens (" + std::to_string(p.max_tokens) +
                            (max_tokens ? ""
                             : endpoint == Endpoint::chat_completions && limits.max_model_len > 0
                                 ? ": what max_model_len leaves after the prompt"
                                 : ": the default; set max_tokens") +
                            "), got " + std::to_string(p.min_tokens),
                        "min_tokens");
  }
  try {
    p.validate();
  } catch (const ArgumentError& e) {
    throw bad_request(e.what());
  }
  return r;
}

}  // namespace attnzoo::server
