#include "server/responses.h"

#include "answers/tool_format_pythonic.h"
#include "loader/json_writer.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::server {

using answers::HarmonyAnswer;
using answers::HarmonyReader;
using answers::ParsedAnswer;
using answers::ReasoningParser;
using answers::ReasoningSplit;
using answers::ReasoningStream;
using answers::ToolCall;
using answers::ToolCallDelta;
using answers::ToolCallStream;
using answers::ToolMode;
using answers::ToolStreamStep;
using answers::read_answer;
using answers::read_harmony;
using answers::split_reasoning;

namespace {

using json::Writer;

const char* object_name(Endpoint e, bool chunk) {
  if (e == Endpoint::completions) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

std::string token_text(const ResponseContext& ctx, int32_t id) {
  const int32_t ids[1] = {id};
  return ctx.tokenizer ? ctx.tokenizer->decode(ids) : std::to_string(id);
}

void header(Writer& w, const ResponseContext& ctx, bool chunk) {
  w.member("id", ctx.id).member("object", object_name(ctx.endpoint, chunk)).member("created", ctx.created);
  w.member("model", ctx.model);
}

void write_usage(Writer& w, const Usage& u) {
  w.begin_object()
      .member("prompt_tokens", u.prompt_tokens)
      .member("completion_tokens", u.completion_tokens)
      .member("total_tokens", u.prompt_tokens + u.completion_tokens);
  w.key("prompt_tokens_details").begin_object().member("cached_tokens", u.cached_tokens).end_object();
  w.end_object();
}

// OpenAI's `bytes`: the token's own bytes, so that a client joining them gets back a character split between
// tokens (each token's `token` string shows such a piece as U+FFFD).
void write_bytes(Writer& w, const ResponseContext& ctx, int32_t id) {
  const int32_t ids[1] = {id};
  const std::string s = ctx.tokenizer ? ctx.tokenizer->decode_bytes(ids) : std::to_string(id);
  w.key("bytes").begin_array();
  for (unsigned char c : s) w.value(int64_t(c));
  w.end_array();
}

// Completions: {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}. As OpenAI's legacy API and
// vLLM, each top_logprobs entry holds the sampled token too, first: up to logprobs + 1 entries.
void completion_logprobs(Writer& w, const ResponseContext& ctx, const std::vector<TokenLogprob>& chosen,
                         const std::vector<std::vector<TokenLogprob>>& top, int64_t& offset) {
  std::vector<std::string> texts;
  for (const TokenLogprob& t : chosen) texts.push_back(token_text(ctx, t.token));
  w.begin_object();
  w.key("tokens").begin_array();
  for (const std::string& s : texts) w.value(s);
  w.end_array().key("token_logprobs").begin_array();
  for (const TokenLogprob& t : chosen) w.value(t.logprob);
  w.end_array().key("top_logprobs").begin_array();
  for (size_t i = 0; i < chosen.size(); ++i) {
    w.begin_object();
    std::vector<std::string> seen = {texts[i]};
    w.member(texts[i], chosen[i].logprob);
    if (i < top.size())
      for (const TokenLogprob& alt : top[i]) {
        std::string s = token_text(ctx, alt.token);
        bool dup = false;
        for (const std::string& k : seen) dup = dup || k == s;
        if (dup) continue;  // two ids with the same text: the likelier one (listed first) stands for both
        w.member(s, alt.logprob);
        seen.push_back(std::move(s));
      }
    w.end_object();
  }
  w.end_array().key("text_offset").begin_array();
  for (const std::string& s : texts) {
    w.value(offset);
    offset += int64_t(s.size());
  }
  w.end_array().end_object();
}

// Chat: {content: [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}.
void chat_logprobs(Writer& w, const ResponseContext& ctx, const std::vector<TokenLogprob>& chosen,
                   const std::vector<std::vector<TokenLogprob>>& top) {
  w.begin_object().key("content").begin_array();
  for (size_t i = 0; i < chosen.size(); ++i) {
    const std::string s = token_text(ctx, chosen[i].token);
    w.begin_object().member("token", s).member("logprob", chosen[i].logprob);
    write_bytes(w, ctx, chosen[i].token);
    w.key("top_logprobs").begin_array();
    if (i < top.size())
      for (const TokenLogprob& alt : top[i]) {
        const std::string a = token_text(ctx, alt.token);
        w.begin_object().member("token", a).member("logprob", alt.logprob);
        write_bytes(w, ctx, alt.token);
        w.end_object();
      }
    w.end_array().end_object();
  }
  w.end_array().end_object();
}

void finish(Writer& w, const std::optional<FinishReason>& r, bool called = false) {
  w.key("finish_reason");
  // OpenAI's "tool_calls" replaces "stop" when the answer called tools; a call cut by max_tokens is no call.
  if (r) w.value(called && *r == FinishReason::stop ? "tool_calls" : finish_reason_name(*r));
  else w.null();
}

// message.tool_calls.
void write_tool_calls(Writer& w, const std::vector<ToolCall>& calls) {
  w.key("tool_calls").begin_array();
  for (size_t i = 0; i < calls.size(); ++i) {
    w.begin_object();
    w.member("id", calls[i].id).member("type", "function");
    w.key("function").begin_object().member("name", calls[i].name).member("arguments", calls[i].arguments);
    w.end_object().end_object();
  }
  w.end_array();
}

// delta.tool_calls as vLLM streams them: a call's first delta names it, the next ones add to its arguments.
void write_call_deltas(Writer& w, const std::vector<ToolCallDelta>& calls) {
  w.key("tool_calls").begin_array();
  for (const ToolCallDelta& c : calls) {
    w.begin_object().member("index", int64_t(c.index));
    if (c.first) w.member("id", c.id).member("type", "function");
    w.key("function").begin_object();
    if (c.first) w.member("name", c.name);
    w.member("arguments", c.arguments).end_object().end_object();
  }
  w.end_array();
}

}  // namespace

void Choices::add(const SampleDelta& d) {
  if (d.index < 0 || size_t(d.index) >= choices_.size()) return;
  Choice& c = choices_[size_t(d.index)];
  c.text += d.text;
  c.logprobs.insert(c.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
  c.top_logprobs.insert(c.top_logprobs.end(), d.top_logprobs.begin(), d.top_logprobs.end());
  if (d.finish_reason) c.finish_reason = d.finish_reason;
}

std::string full_response(const ResponseContext& ctx, const std::vector<Choice>& choices, const Usage& usage,
                          bool logprobs) {
  Writer w;
  w.begin_object();
  header(w, ctx, false);
  w.key("choices").begin_array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const Choice& c = choices[i];
    bool called = false;
    w.begin_object().member("index", int64_t(i));
    if (ctx.endpoint == Endpoint::completions) {
      w.member("text", c.text).key("logprobs");
      int64_t offset = 0;
      if (logprobs) completion_logprobs(w, ctx, c.logprobs, c.top_logprobs, offset);
      else w.null();
    } else {
      // Tool calls are read from the content only: the reasoning may mention <tool_call> freely.
      ReasoningSplit r;
      ParsedAnswer a;
      if (ctx.harmony) {
        HarmonyAnswer h = read_harmony(ctx.harmony_prefix + c.text, c.finish_reason == FinishReason::stop,
                                       ctx.tool_mode != ToolMode::text, ctx.parallel_tool_calls);
        r = {h.has_reasoning, std::move(h.reasoning), std::move(h.content)};
        a = {r.content, std::move(h.calls)};
      } else {
        r = split_reasoning(c.text, ctx.reasoning);
        a = read_answer(r.content, ctx.tool_mode, ctx.parallel_tool_calls, ctx.tool_format,
                        ctx.tool_forced_name);
      }
      const bool reasoning = ctx.reasoning != ReasoningParser::none || ctx.harmony;
      w.key("message").begin_object().member("role", "assistant").key("content");
      // OpenAI: content null beside the calls; vLLM: null beside the reasoning when empty.
      if (!a.content.empty() || (a.calls.empty() && !reasoning)) w.value(a.content);
      else w.null();
      if (reasoning && ctx.include_reasoning) {
        w.key("reasoning_content");
        if (r.has_reasoning) w.value(r.reasoning);
        else w.null();
      }
      if (!a.calls.empty()) write_tool_calls(w, a.calls);
      w.end_object().key("logprobs");
      if (logprobs) chat_logprobs(w, ctx, c.logprobs, c.top_logprobs);
      else w.null();
      called = !a.calls.empty();
    }
    finish(w, c.finish_reason, called);
    w.end_object();
  }
  w.end_array().key("usage");
  write_usage(w, usage);
  w.end_object();
  return w.take();
}

StreamWriter::StreamWriter(const ResponseContext& ctx, int64_t n, bool logprobs, bool include_usage)
    : ctx_(ctx),
      logprobs_(logprobs),
      include_usage_(include_usage),
      started_(size_t(n)),
      text_offset_(size_t(n)),
      reasoning_(size_t(n), ReasoningStream(ctx.reasoning)) {
  if (ctx.harmony) {
    harmony_.assign(size_t(n), HarmonyReader(ctx.tool_mode != ToolMode::text, ctx.parallel_tool_calls));
    // The prefix is a header only (it ends with <|message|>): a forced call's announces the call, which goes out
    // with each choice's first chunk.
    for (HarmonyReader& h : harmony_) harmony_opened_.push_back(h.feed(ctx.harmony_prefix).calls);
  } else if (ctx.tool_mode != ToolMode::text) {
    tools_.assign(size_t(n),
                  ToolCallStream(ctx.tool_format, ctx.tool_mode, ctx.parallel_tool_calls, ctx.tool_forced_name));
  }
}

std::string StreamWriter::chunk(const SampleDelta& d) {
  const size_t i = size_t(d.index);
  Writer w;
  w.begin_object();
  header(w, ctx_, true);
  w.key("choices").begin_array().begin_object().member("index", d.index);
  bool called = false;
  if (ctx_.endpoint == Endpoint::completions) {
    w.member("text", d.text).key("logprobs");
    if (logprobs_) completion_logprobs(w, ctx_, d.logprobs, d.top_logprobs, text_offset_.at(i));
    else w.null();
  } else {
    ReasoningStream::Piece piece{"", d.text};
    std::vector<ToolCallDelta> harmony_calls;
    if (ctx_.harmony) {
      HarmonyReader& h = harmony_.at(i);
      HarmonyReader::Piece p = h.feed(d.text);
      if (!harmony_opened_.at(i).empty()) {
        // The forced call's announcement first; it takes the arguments this chunk brought for it.
        std::vector<ToolCallDelta> calls = std::move(harmony_opened_[i]);
        harmony_opened_[i].clear();
        for (ToolCallDelta& c : p.calls)
          if (!c.first && c.index == calls.back().index) calls.back().arguments += c.arguments;
          else calls.push_back(std::move(c));
        p.calls = std::move(calls);
      }
      if (d.finish_reason) {
        HarmonyReader::Piece rest = h.finish(*d.finish_reason == FinishReason::stop);
        p.reasoning += rest.reasoning;
        p.content += rest.content;
        for (ToolCallDelta& c : rest.calls)  // (the rest of a call's body joins its last delta of this chunk)
          if (!c.first && !p.calls.empty() && p.calls.back().index == c.index) p.calls.back().arguments += c.arguments;
          else p.calls.push_back(std::move(c));
      }
      piece = {std::move(p.reasoning), std::move(p.content)};
      harmony_calls = std::move(p.calls);
    } else if (ctx_.reasoning != ReasoningParser::none) {
      piece = reasoning_.at(i).feed(d.text);
      if (d.finish_reason) {
        ReasoningStream::Piece rest = reasoning_[i].finish();
        piece.reasoning += rest.reasoning;
        piece.content += rest.content;
      }
    }
    ToolStreamStep step{piece.content, {}};
    if (!tools_.empty()) {
      step = tools_.at(i).push(piece.content);
      if (d.finish_reason) {
        ToolStreamStep rest = tools_[i].finish();
        step.content += rest.content;
        step.calls.insert(step.calls.end(), rest.calls.begin(), rest.calls.end());
      }
    }
    step.calls.insert(step.calls.end(), harmony_calls.begin(), harmony_calls.end());
    const std::string& text = step.content;
    w.key("delta").begin_object();
    if (!started_.at(i)) w.member("role", "assistant");
    if (!piece.reasoning.empty() && ctx_.include_reasoning) w.member("reasoning_content", piece.reasoning);
    if (!text.empty() || !started_.at(i)) w.member("content", text);
    if (!step.calls.empty()) write_call_deltas(w, step.calls);
    w.end_object().key("logprobs");
    if (logprobs_) chat_logprobs(w, ctx_, d.logprobs, d.top_logprobs);
    else w.null();
    // "tool_calls" where the answer calls, as its non-streamed response says (ToolStream::called: a call sent early
    // that the whole answer does not make leaves "stop").
    called = harmony_.empty() ? !tools_.empty() && tools_[i].called() : !harmony_[i].calls().empty();
  }
  started_.at(i) = true;
  finish(w, d.finish_reason, called);
  w.end_object().end_array();
  if (include_usage_) w.key("usage").null();
  w.end_object();
  return event(w.take());
}

std::string StreamWriter::usage_chunk(const Usage& usage) const {
  Writer w;
  w.begin_object();
  header(w, ctx_, true);
  w.key("choices").begin_array().end_array().key("usage");
  write_usage(w, usage);
  w.end_object();
  return event(w.take());
}

}  // namespace attnzoo::server
