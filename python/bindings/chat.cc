// Bindings for chat templates: attnzoo._core.ChatTemplate and load_chat_template (wrapped by attnzoo/chat.py),
// and the answer readers Model.chat reads gpt-oss and <think> answers with (the ones serve and the CLI use).
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/vector.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include "answers/harmony.h"
#include "answers/reasoning.h"
#include "answers/tool_calls.h"
#include "bindings.h"
#include "chat/chat_template.h"
#include "engine/chat_turns.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::py {
namespace {

// A reasoning parser's name as Model.chat checked it ("" for none).
answers::ReasoningParser parser_of(const std::string& name) {
  return name.empty() ? answers::ReasoningParser::none : answers::parse_reasoning_parser(name);
}

}  // namespace

void bind_chat(nb::module_& m) {
  using chat::ChatTemplate;
  nb::class_<ChatTemplate>(m, "ChatTemplate")
      .def(nb::init<std::string_view>(), nb::arg("source"))
      .def("render_json", &ChatTemplate::render_json, nb::arg("context_json"), nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "load_chat_template",
      [](const std::string& dir, const std::string& name) -> nb::object {
        const auto info = chat::load_chat_template(dir, name);
        if (!info) return nb::none();
        nb::dict tokens;
        for (const auto& [k, v] : info->special_tokens.items) tokens[k.as_string().c_str()] = v.as_string();
        nb::dict out;
        out["source"] = info->source;
        out["origin"] = info->origin;
        out["special_tokens"] = tokens;
        return out;
      },
      nb::arg("model_dir"), nb::arg("name") = "");
  m.def(
      "end_of_turn_ids",
      [](const std::string& source, const std::map<std::string, std::string>& special_tokens,
         const std::shared_ptr<const tok::Tokenizer>& tokenizer) {
        chat::Dict tokens;
        for (const auto& [k, v] : special_tokens) tokens.set(k, chat::Value::string(v));
        return end_of_turn_ids(ChatTemplate(source), tokens, *tokenizer);
      },
      nb::arg("source"), nb::arg("special_tokens"), nb::arg("tokenizer"));
  m.def(
      "reads_harmony",
      [](const std::string& source, const std::string& parser) {
        return answers::reads_harmony(answers::detect_tool_format(source), parser_of(parser));
      },
      nb::arg("template_source"), nb::arg("parser") = "",
      "Whether a chat template's answers (or those of the parser named) are gpt-oss harmony messages.");
  m.def(
      "knows_reasoning_tag",
      [](const std::string& parser, const std::string& source,
                  const std::shared_ptr<const tok::Tokenizer>& tokenizer) {
        return answers::knows_reasoning_tag(parser_of(parser), source, *tokenizer);
      },
      nb::arg("parser"), nb::arg("template_source"), nb::arg("tokenizer"));
  m.def(
      "split_reasoning",
      [](std::string_view text,
         const std::string& parser) -> std::pair<std::optional<std::string>, std::string> {
        answers::ReasoningSplit r = answers::split_reasoning(text, parser_of(parser));
        return {r.has_reasoning ? std::optional(std::move(r.reasoning)) : std::nullopt, std::move(r.content)};
      },
      nb::arg("text"), nb::arg("parser"), "(reasoning or None, content), as serve's whole chat answers split them.");
  // feed / finish return (reasoning, content) pieces, as serve streams them.
  nb::class_<answers::ReasoningStream>(m, "ReasoningStream")
      .def("__init__",
           [](answers::ReasoningStream* r, const std::string& parser) {
             new (r) answers::ReasoningStream(parser_of(parser));
           },
           nb::arg("parser"))
      .def("feed",
           [](answers::ReasoningStream& r, std::string_view text) {
             auto p = r.feed(text);
             return std::make_pair(std::move(p.reasoning), std::move(p.content));
           },
           nb::arg("text"))
      .def("finish", [](answers::ReasoningStream& r) {
        auto p = r.finish();
        return std::make_pair(std::move(p.reasoning), std::move(p.content));
      });
  m.def(
      "harmony_end_ids",
      [](const std::shared_ptr<const tok::Tokenizer>& tokenizer) { return answers::harmony_end_ids(*tokenizer); },
      nb::arg("tokenizer"));
  // feed / finish return (reasoning, content) pieces; calls are read as content (Model.chat offers no tools).
  nb::class_<answers::HarmonyReader>(m, "HarmonyReader")
      .def("__init__", [](answers::HarmonyReader* r) { new (r) answers::HarmonyReader(/*read_calls=*/false); })
      .def("feed",
           [](answers::HarmonyReader& r, std::string_view text) {
             auto p = r.feed(text);
             return std::make_pair(std::move(p.reasoning), std::move(p.content));
           },
           nb::arg("text"))
      .def("finish",
           [](answers::HarmonyReader& r, bool stopped) {
             auto p = r.finish(stopped);
             return std::make_pair(std::move(p.reasoning), std::move(p.content));
           },
           nb::arg("stopped"))
      .def_prop_ro("has_reasoning", &answers::HarmonyReader::has_reasoning);
}

}  // namespace attnzoo::py
