#include "server/tool_request.h"

#include <cctype>
#include <set>
#include <string>
#include <vector>

#include "answers/harmony.h"
#include "answers/tool_format_sections.h"
#include "core/error.h"
#include "engine/chat_turns.h"
#include "engine/json_schema_union.h"
#include "loader/json_writer.h"
#include "server/api_error.h"
#include "server/request_fields.h"

namespace attnzoo::server {

using answers::ToolFormat;
using answers::ToolMode;
using answers::forced_call_opening;
using answers::forced_json_opening;
using answers::harmony_call_header;
using answers::kToolCallClose;
using answers::kToolCallOpen;
using answers::names_call_outside_json;
using answers::tool_format_name;

namespace {

using json::Value;

bool valid_function_name(const std::string& name) {
  // OpenAI's rule: ^[a-zA-Z0-9_-]{1,64}$.
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

// `v` with every local "$ref" ("#..." ) moved under `prefix`, for a schema embedded at that pointer of another.
Value rebase_refs(const Value& v, const std::string& prefix) {
  if (v.is_array()) {
    json::Array a;
    for (const Value& x : v.as_array()) a.push_back(rebase_refs(x, prefix));
    return Value::make_array(std::move(a));
  }
  if (!v.is_object()) return v;
  json::Object o;
  for (const json::Member* m : v.members_in_source_order()) {
    if (m->first == "$ref" && m->second.is_string() && m->second.as_string().starts_with("#"))
      o.emplace_back(m->first, Value::make_string("#" + prefix + m->second.as_string().substr(1)));
    else
      o.emplace_back(m->first, rebase_refs(m->second, prefix));
  }
  return Value::make_object(std::move(o));
}

Value object_schema(json::Object properties) {
  json::Array required;
  for (const auto& [k, _] : properties) required.push_back(Value::make_string(k));
  return Value::make_object({{"type", Value::make_string("object")},
                             {"properties", Value::make_object(std::move(properties))},
                             {"required", Value::make_array(std::move(required))}});
}

struct Tool {
  std::string name;
  Value parameters;  // {"type": "object", "properties": {}} when the function has none
};

Tool read_tool(const Value& t, size_t i, SchemaBudget& budget) {
  const std::string at = "tools[" + std::to_string(i) + "]";
  const Value* type = t.is_object() ? field(t, "type") : nullptr;
  if (!type || !type->is_string() || type->as_string() != "function")
    throw bad_request(at + ": must be {\"type\": \"function\", \"function\": {...}}", "tools");
  const Value* fn = field(t, "function");
  if (!fn || !fn->is_object()) throw bad_request(at + ".function: must be an object with a name", "tools");
  for (const auto& [key, _] : fn->as_object())
    if (key != "name" && key != "description" && key != "parameters" && key != "strict")
      throw bad_request(at + ".function." + key + ": not supported (name, description, parameters, strict)", "tools");
  const Value* name = field(*fn, "name");
  if (!name || !name->is_string() || !valid_function_name(name->as_string()))
    throw bad_request(at + ".function.name: must be 1 to 64 letters, digits, '_' or '-'", "tools");
  if (const Value* d = field(*fn, "description"); d && !d->is_string())
    throw bad_request(at + ".function.description: must be a string", "tools");
  if (const Value* s = field(*fn, "strict"); s && !s->is_bool())
    throw bad_request(at + ".function.strict: must be a boolean", "tools");
  Tool tool{name->as_string(), object_schema({})};
  if (const Value* p = field(*fn, "parameters")) {
    if (!p->is_object()) throw bad_request(at + ".function.parameters: must be a JSON Schema object", "tools");
    // Compiled now, so a schema outside the subset is a 400 here rather than when a tool_choice needs it.
    try {
      compile_json_schema(*p, &budget);  // the request's tools share one schema's budget (tool_request.h)
    } catch (const ArgumentError& e) {
      std::string what = e.what();
      const std::string stem = "response_format: json_schema at ";
      if (what.starts_with(stem)) what = what.substr(stem.size());
      throw bad_request(at + ".function.parameters at " + what, "tools");
    }
    tool.parameters = *p;
  }
  return tool;
}

std::shared_ptr<const JsonSchema> compile_call_schema(const Value& schema) {
  try {
    return compile_json_schema(schema);
  } catch (const ArgumentError& e) {  // a parameters schema that only fails one level deeper (kMaxDepth)
    throw bad_request(std::string("tool_choice: the call's schema: ") + e.what(), "tool_choice");
  }
}

std::string message_content(const Value& content) {
  if (content.is_string()) return content.as_string();
  if (!content.is_array()) throw bad_request("messages: content must be a string or a list of text parts", "messages");
  std::string text;
  for (const Value& part : content.as_array()) {
    const Value* type = part.find("type");
    const Value* t = part.find("text");
    if (!type || !type->is_string() || type->as_string() != "text" || !t || !t->is_string())
      throw bad_request("messages: only text content parts are supported", "messages");
    text += t->as_string();
  }
  return text;
}

chat::Value tool_calls_value(const Value& calls, size_t m, bool arguments_as_text, int64_t max_values) {
  const std::string at = "messages[" + std::to_string(m) + "].tool_calls";
  if (!calls.is_array()) throw bad_request(at + ": must be a list of calls", "messages");
  chat::List out;
  for (size_t i = 0; i < calls.as_array().size(); ++i) {
    const Value& c = calls.as_array()[i];
    const std::string here = at + "[" + std::to_string(i) + "]";
    const Value* fn = c.is_object() ? field(c, "function") : nullptr;
    if (!fn || !fn->is_object()) throw bad_request(here + ": needs a function object", "messages");
    if (const Value* t = field(c, "type"); t && !(t->is_string() && t->as_string() == "function"))
      throw bad_request(here + ".type: must be \"function\"", "messages");
    const Value* name = field(*fn, "name");
    if (!name || !name->is_string()) throw bad_request(here + ".function.name: must be a string", "messages");
    const Value* args = field(*fn, "arguments");
    Value parsed = Value::make_object({});
    if (args && args->is_string()) {
      try {
        json::ParseOptions options;
        options.max_values = max_values;
        parsed = json::parse(args->as_string(), options);
      } catch (const json::ParseError& e) {
        if (e.value_limit)
          throw bad_request(here + ".function.arguments: more than " + std::to_string(max_values) +
                                " JSON values, more than any request to this model needs",
                            "messages");
        throw bad_request(here + ".function.arguments: not JSON: " + e.what(), "messages");
      }
    } else if (args) {
      parsed = *args;
    }
    if (!parsed.is_object()) throw bad_request(here + ".function.arguments: must be a JSON object", "messages");
    // Rebuilt as {id?, type, function: {name, arguments}}: the template writes `arguments | tojson`.
    chat::Dict f;
    f.set("name", chat::Value::string(name->as_string()));
    f.set("arguments", arguments_as_text && args && args->is_string() ? chat::Value::string(args->as_string())
                       : arguments_as_text                           ? chat::Value::string(json::Writer().value(parsed).take())
                                                                     : chat::Value::from_json(parsed));
    chat::Dict call;
    if (const Value* id = field(c, "id")) call.set("id", chat::Value::from_json(*id));
    call.set("type", chat::Value::string("function"));
    call.set("function", chat::Value::dict(std::move(f)));
    out.push_back(chat::Value::dict(std::move(call)));
  }
  return chat::Value::list(std::move(out));
}

}  // namespace

JsonSequence required_call_sequence(ToolFormat format) {
  JsonSequence s;
  if (format == ToolFormat::hermes) {
    // As Qwen's and Hermes' templates write several calls: each block closed, the next on its own line.
    s.separator = "\n" + std::string(kToolCallClose) + "\n" + std::string(kToolCallOpen) + "\n";
    s.end = "\n" + std::string(kToolCallClose);
  } else if (format == ToolFormat::mistral) {
    s.separator = ", ";  // the array's next element (Mistral's templates write ", ")
    s.end = "]";
  } else {
    s.separator = "; ";  // vLLM's llama3_json reads calls separated by ';'
  }
  return s;
}

void check_tool_call_parser(ToolFormat format, const ChatFormat* chat, const std::string& model_dir) {
  const std::string flag = std::string("--tool-call-parser ") + tool_format_name(format) + ": ";
  if (!chat) throw ArgumentError(flag + model_dir + " has no chat template to render tools with");
  const std::string probe = "attnzoo_probe_tool";
  const Value tools = json::parse(R"([{"type": "function", "function": {"name": ")" + probe +
                                  R"(", "description": "d", "parameters": {"type": "object", "properties": {}}}}])");
  const Value messages = json::parse(R"([{"role": "user", "content": "hi"}])");
  std::string text;
  try {
    text = chat->render(chat_messages(messages), true, chat::Value::from_json(tools));
  } catch (const std::exception& e) {
    throw ArgumentError(flag + model_dir + "'s chat template fails on a tools list: " + e.what());
  }
  if (text.find(probe) == std::string::npos)
    throw ArgumentError(flag + model_dir + "'s chat template does not render tools (a tool's name never reaches "
                        "the prompt)");
}

chat::Value chat_messages(const Value& messages, ToolFormat format, bool harmony, int64_t max_values) {
  const bool arguments_as_text = format == ToolFormat::deepseek_v3 || format == ToolFormat::deepseek_v31;
  chat::List out;
  for (size_t i = 0; i < messages.as_array().size(); ++i) {
    const Value& msg = messages.as_array()[i];
    const Value* role = msg.is_object() ? msg.find("role") : nullptr;
    if (!role || !role->is_string()) throw bad_request("messages: every message needs a string role", "messages");
    const Value* calls = field(msg, "tool_calls");
    const Value* content = field(msg, "content");
    const bool assistant = role->as_string() == "assistant";
    chat::Dict m;
    m.set("role", chat::Value::string(role->as_string()));
    // An assistant turn that only called tools has content null, which templates test with `if message.content`;
    // gpt-oss's tests `"<|channel|>..." in message.content` once "content" is there, so there it is left out.
    if (calls && assistant && !content && harmony) {
    } else if (calls && assistant) {
      m.set("content", content ? chat::Value::string(message_content(*content)) : chat::Value::none());
    } else {
      m.set("content", chat::Value::string(content ? message_content(*content) : ""));
    }
    if (calls && role->as_string() != "assistant")
      throw bad_request("messages[" + std::to_string(i) + "].tool_calls: only assistant messages make calls",
                        "messages");
    for (const json::Member* kv : msg.members_in_source_order()) {
      if (kv->first == "role" || kv->first == "content") continue;
      if (kv->first == "tool_calls") {
        if (calls) m.set("tool_calls", tool_calls_value(*calls, i, arguments_as_text, max_values));
        continue;
      }
      // gpt-oss's template takes an assistant's analysis as "thinking" (transformers' name); OpenAI clients send
      // back what this server answered, reasoning_content (vLLM also reads "reasoning").
      if (harmony && assistant && (kv->first == "reasoning_content" || kv->first == "reasoning")) {
        if (kv->second.is_string()) m.set("thinking", chat::Value::string(kv->second.as_string()));
        else if (!kv->second.is_null())
          throw bad_request("messages[" + std::to_string(i) + "]." + kv->first + ": must be a string", "messages");
        continue;
      }
      if (kv->first == "tool_call_id" && !kv->second.is_string())
        throw bad_request("messages[" + std::to_string(i) + "].tool_call_id: must be a string", "messages");
      m.set(kv->first, chat::Value::from_json(kv->second));
    }
    out.push_back(chat::Value::dict(std::move(m)));
  }
  return chat::Value::list(std::move(out));
}

ToolRequest parse_tool_fields(const Value& body, bool chat_endpoint, ToolFormat format,
                              std::string_view template_source) {
  ToolRequest r;
  r.format = format;
  const Value* tools = field(body, "tools");
  if (tools && tools->is_array() && tools->as_array().empty()) tools = nullptr;
  const Value* choice = field(body, "tool_choice");
  if (const Value* p = field(body, "parallel_tool_calls")) r.parallel = bool_field(*p, "parallel_tool_calls");
  if (!tools) {
    if (choice && !(choice->is_string() && choice->as_string() == "none"))
      throw bad_request("tool_choice: needs tools", "tool_choice");
    return r;
  }
  if (!chat_endpoint) throw bad_request("tools: only /v1/chat/completions takes tools", "tools");
  if (!tools->is_array()) throw bad_request("tools: must be a list of {\"type\": \"function\", ...}", "tools");
  if (format == ToolFormat::none)
    throw bad_request("tools: this model's chat template has no tool-call format this server reads (Hermes "
                      "<tool_call>, Llama 3.x JSON, Mistral [TOOL_CALLS], gpt-oss harmony, DeepSeek-V3 / V3.1, Kimi-K2, "
                      "pythonic; serve's --tool-call-parser names one)",
                      "tools");
  if (tools->as_array().size() > kMaxTools)
    throw bad_request("tools: at most " + std::to_string(kMaxTools) + " tools, got " +
                          std::to_string(tools->as_array().size()),
                      "tools");
  std::vector<Tool> list;
  std::set<std::string> names;
  SchemaBudget budget;
  for (size_t i = 0; i < tools->as_array().size(); ++i) {
    list.push_back(read_tool(tools->as_array()[i], i, budget));
    if (!names.insert(list.back().name).second)
      throw bad_request("tools[" + std::to_string(i) + "].function.name: \"" + list.back().name + "\" is listed twice",
                        "tools");
  }
  r.tools = chat::Value::from_json(*tools);

  std::string named;
  bool required = false;
  if (!choice || (choice->is_string() && choice->as_string() == "auto")) {
    r.mode = ToolMode::automatic;
    return r;
  }
  if (choice->is_string() && choice->as_string() == "none") return r;
  if (choice->is_string() && choice->as_string() == "required") {
    required = true;
  } else if (choice->is_object()) {
    const Value* type = field(*choice, "type");
    const Value* fn = field(*choice, "function");
    const Value* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
    if (!type || !type->is_string() || type->as_string() != "function" || !name || !name->is_string())
      throw bad_request("tool_choice: must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                        "\"function\": {\"name\": ...}}",
                        "tool_choice");
    named = name->as_string();
    if (!names.count(named)) throw bad_request("tool_choice: no tool is named \"" + named + "\"", "tool_choice");
  } else {
    throw bad_request("tool_choice: must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                      "\"function\": {\"name\": ...}}",
                      "tool_choice");
  }
  if (format == ToolFormat::pythonic)
    throw bad_request("tool_choice: named and \"required\" choices are not supported for the pythonic call format "
                      "(its arguments are Python literals, which the JSON schema machinery cannot hold); use \"auto\"",
                      "tool_choice");
  if (required && list.size() == 1) named = list[0].name;
  if (format == ToolFormat::openai || names_call_outside_json(format)) {
    // The name is written before the arguments, outside the JSON (harmony: in the message header): the prompt's
    // opening names the function and the schema holds its arguments alone; "required" over several tools would
    // have to choose the name outside the schema.
    if (named.empty())
      throw bad_request(std::string("tool_choice: \"required\" with several tools is not supported for the ") +
                            tool_format_name(format) +
                            " call format (the function's name is written outside the JSON); name one tool, or use "
                            "\"auto\"",
                        "tool_choice");
    for (const Tool& t : list)
      if (t.name == named) r.schema = compile_call_schema(t.parameters);
    r.mode = ToolMode::forced;
    r.forced_name = named;
    r.forced_prefix =
        format == ToolFormat::openai ? harmony_call_header(named) : forced_call_opening(format, named);
    return r;
  }
  // One call object per tool, {"name": const, "arguments": parameters} ("parameters" for Llama 3.x, as its
  // template asks): a named choice is its tool's; "required" is their tagged union (anyOf would be refused: every
  // branch begins with '{'), the name choosing the branch.
  const std::string args_key = format == ToolFormat::llama3_json ? "parameters" : "arguments";
  const auto call_schema = [&](const Tool& t) {
    return compile_call_schema(object_schema({{"name", Value::make_object({{"const", Value::make_string(t.name)}})},
                                              {args_key, rebase_refs(t.parameters, "/properties/" + args_key)}}));
  };
  if (!named.empty()) {
    for (const Tool& t : list)
      if (t.name == named) r.schema = call_schema(t);
  } else {
    std::vector<std::shared_ptr<const JsonSchema>> calls;
    for (const Tool& t : list) calls.push_back(call_schema(t));
    try {
      r.schema = tagged_union(calls);
    } catch (const ArgumentError& e) {
      throw bad_request(std::string("tool_choice: ") + e.what(), "tool_choice");
    }
  }
  r.mode = ToolMode::forced;
  // vLLM's "required" is an array of calls with minItems 1; parallel_tool_calls false keeps it to one.
  if (required && r.parallel) r.sequence = std::make_shared<const JsonSequence>(required_call_sequence(format));
  // The prompt ends as if the model had opened its call: Hermes' tag, Mistral's [TOOL_CALLS] and the array's '['
  // (a special token on Mistral's tokenizers, so written into the prompt rather than sampled under a mask; the
  // one-element array is never closed: the sample ends with its object). Llama 3.x's call is the bare object.
  if (format == ToolFormat::hermes) r.forced_prefix = std::string(forced_json_opening(format));
  else if (format == ToolFormat::mistral)
    r.forced_prefix =
        template_source.find("[TOOL_CALLS] [") != std::string_view::npos ? "[TOOL_CALLS] [" : "[TOOL_CALLS][";
  return r;
}

}  // namespace attnzoo::server
