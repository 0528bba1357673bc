// Bindings for chat templates: attnzoo._core.ChatTemplate and load_chat_template (wrapped by attnzoo/chat.py),
// and the harmony reader that Model.chat reads gpt-oss answers with (the one serve and the CLI use).
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/vector.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include "answers/harmony.h"
#include "answers/tool_calls.h"
#include "bindings.h"
#include "chat/chat_template.h"
#include "engine/chat_turns.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::py {

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
      [](const std::string& source) {
        return answers::reads_harmony(answers::detect_tool_format(source), answers::ReasoningParser::none);
      },
      nb::arg("template_source"), "Whether a chat template's answers are gpt-oss harmony messages.");
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
