#pragma once
// The responses_* tests' common set-up (server/responses.h over src/answers/): a chat context, the whole answer's
// first choice, and an answer fed to a StreamWriter in pieces with its SSE chunks read back field by field (one
// chat.completion.chunk per piece, the last piece carrying the finish reason).
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "answers/tool_calls.h"
#include "loader/json.h"
#include "server/responses.h"

namespace attnzoo::testing {

inline server::ResponseContext chat_context(answers::ToolMode mode,
                                            answers::ToolFormat format = answers::ToolFormat::hermes) {
  server::ResponseContext ctx;
  ctx.endpoint = server::Endpoint::chat_completions;
  ctx.id = "chatcmpl-1";
  ctx.model = "m";
  ctx.tool_mode = mode;
  ctx.tool_format = format;
  return ctx;
}

// The non-streamed response's choice 0 for an answer `text`.
inline json::Value whole_choice(const server::ResponseContext& ctx, const std::string& text,
                                attnzoo::FinishReason reason = attnzoo::FinishReason::stop) {
  server::Choice c;
  c.text = text;
  c.finish_reason = reason;
  return json::parse(server::full_response(ctx, {c}, attnzoo::Usage{}, false)).find("choices")->as_array()[0];
}

// One entry of a chunk's delta.tool_calls; id, type and name are there only in a call's first delta.
struct ChunkCall {
  int64_t index = -1;  // -1: no "index"
  std::optional<std::string> id, type, name;
  std::string arguments;
};

struct Chunk {
  std::optional<std::string> content, reasoning;  // delta.content, delta.reasoning_content where present
  std::vector<ChunkCall> calls;
  std::string finish_reason;  // empty while null
};

// Each chunk must be one SSE event, and each tool_calls entry must carry function.arguments (vLLM's shapes).
inline std::vector<Chunk> stream_chunks(const server::ResponseContext& ctx, const std::vector<std::string>& pieces,
                                        attnzoo::FinishReason end = attnzoo::FinishReason::stop) {
  server::StreamWriter w(ctx, 1, false, false);
  std::vector<Chunk> out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    attnzoo::SampleDelta d;
    d.text = pieces[i];
    if (i + 1 == pieces.size()) d.finish_reason = end;
    const std::string e = w.chunk(d);
    EXPECT_TRUE(e.starts_with("data: ") && e.ends_with("\n\n") && e.find("data: ", 6) == std::string::npos) << e;
    const json::Value c = json::parse(e.substr(6));
    const json::Value& choice = c.find("choices")->as_array()[0];
    const json::Value& delta = *choice.find("delta");
    Chunk k;
    if (const json::Value* t = delta.find("content")) k.content = t->as_string();
    if (const json::Value* t = delta.find("reasoning_content")) k.reasoning = t->as_string();
    if (const json::Value* t = delta.find("tool_calls"))
      for (const json::Value& call : t->as_array()) {
        ChunkCall cc;
        if (const json::Value* v = call.find("index")) cc.index = v->as_int();
        if (const json::Value* v = call.find("id")) cc.id = v->as_string();
        if (const json::Value* v = call.find("type")) cc.type = v->as_string();
        const json::Value* f = call.find("function");
        const json::Value* arguments = f ? f->find("arguments") : nullptr;
        if (!arguments) {
          ADD_FAILURE() << "a tool_calls delta without function.arguments: " << e;
          continue;
        }
        if (const json::Value* v = f->find("name")) cc.name = v->as_string();
        cc.arguments = arguments->as_string();
        k.calls.push_back(std::move(cc));
      }
    if (!choice.find("finish_reason")->is_null()) k.finish_reason = choice.find("finish_reason")->as_string();
    out.push_back(std::move(k));
  }
  return out;
}

// What the chunks add up to: content and reasoning per chunk ("" where absent), the calls' ids and names in the
// order they were announced, each chunk's argument fragments, and the finish reason.
struct StreamedAnswer {
  std::vector<std::string> contents, reasonings;
  std::vector<std::string> ids, names;
  std::vector<std::vector<std::string>> fragments;
  std::string reason;
  std::string content() const;
};

inline std::string StreamedAnswer::content() const {
  std::string all;
  for (const std::string& c : contents) all += c;
  return all;
}

inline StreamedAnswer gather(const std::vector<Chunk>& chunks) {
  StreamedAnswer out;
  for (const Chunk& k : chunks) {
    out.contents.push_back(k.content.value_or(""));
    out.reasonings.push_back(k.reasoning.value_or(""));
    out.fragments.emplace_back();
    for (const ChunkCall& c : k.calls) {
      EXPECT_EQ(c.id.has_value(), c.name.has_value()) << "id and name go out together, in a call's first delta";
      if (c.id) {
        out.ids.push_back(*c.id);
        out.names.push_back(c.name.value_or(""));
      }
      out.fragments.back().push_back(c.arguments);
    }
    if (!k.finish_reason.empty()) out.reason = k.finish_reason;
  }
  return out;
}

}  // namespace attnzoo::testing
