// The interpreter's error paths and limits (rendering itself is compared against Python jinja2 in
// python/tests/test_chat_template.py), and the checkpoint lookup of templates and special tokens.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "chat/chat_template.h"
#include "chat/error.h"
#include "loader/load_error.h"

namespace attnzoo::chat {
namespace {

std::string render(const std::string& source, const std::string& context_json = "{}", const Limits& limits = {}) {
  return ChatTemplate(source, limits).render_json(context_json);
}

// The TemplateError a template raises (parse or render), or a failure when it raises none.
TemplateError error_of(const std::string& source, const std::string& context_json = "{}", const Limits& limits = {}) {
  try {
    render(source, context_json, limits);
  } catch (const TemplateError& e) {
    return e;
  }
  ADD_FAILURE() << "no error from: " << source;
  return TemplateError(TemplateError::Kind::runtime, 0, 0, "none");
}

TEST(ChatTemplate, RendersChatMl) {
  const std::string tpl =
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
  const Value messages = Value::from_json(json::parse(R"([{"role": "user", "content": "Hi"}])"));
  EXPECT_EQ(ChatTemplate(tpl).render(chat_context(messages, true, {})),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(ChatTemplate(tpl).render(chat_context(messages, false, {})), "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, JsonObjectsKeepTheirOrderAndFloats) {
  EXPECT_EQ(render("{{ d | tojson }} {{ d.x }} {{ d.i }}", R"({"d": {"z": 1, "a": [2.0, 3], "x": 1.5, "i": 2}})"),
            R"({"z": 1, "a": [2.0, 3], "x": 1.5, "i": 2} 1.5 2)");
}

TEST(ChatTemplate, SyntaxErrorsNameLineAndColumn) {
  TemplateError e = error_of("ok\n  {% frob %}");
  EXPECT_EQ(e.kind, TemplateError::Kind::syntax);
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.column, 6);
  EXPECT_NE(std::string(e.what()).find("unknown or unsupported tag 'frob'"), std::string::npos);

  e = error_of("a\nb\n{% if x %}\nno endif");
  EXPECT_EQ(e.line, 3);
  EXPECT_NE(e.detail.find("'endif'"), std::string::npos);

  EXPECT_EQ(error_of("{{ 'open }}").kind, TemplateError::Kind::syntax);
  EXPECT_EQ(error_of("{{ x | nofilter }}").detail, "no filter named 'nofilter'");
  EXPECT_EQ(error_of("{{ (1 }}").kind, TemplateError::Kind::syntax);
  EXPECT_EQ(error_of("{{ 1 ]}}").kind, TemplateError::Kind::syntax);
  EXPECT_EQ(error_of("{# never closed").kind, TemplateError::Kind::syntax);
  EXPECT_EQ(error_of("{% raw %} never closed").kind, TemplateError::Kind::syntax);
  EXPECT_EQ(error_of("{% break %}").detail, "'break' outside of a loop");
  EXPECT_EQ(error_of("{{ 99999999999999999999 }}").kind, TemplateError::Kind::syntax);
  EXPECT_EQ(error_of(std::string("{{ \"\xff\" }}")).detail, "the template is not valid UTF-8");
}

TEST(ChatTemplate, RuntimeErrorsNameThePlace) {
  TemplateError e = error_of("line1\n{{ 1 + missing.attr }}");
  EXPECT_EQ(e.kind, TemplateError::Kind::runtime);
  EXPECT_EQ(e.line, 2);
  EXPECT_NE(e.detail.find("'missing' is undefined"), std::string::npos);

  EXPECT_NE(error_of("{{ 1 + 'a' }}").detail.find("unsupported operand type(s) for +: 'int' and 'str'"), std::string::npos);
  EXPECT_NE(error_of("{{ 5 // 0 }}").detail.find("by zero"), std::string::npos);
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").detail.find("overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ [].append(1) }}").detail.find("unsafe"), std::string::npos);
  EXPECT_NE(error_of("{% for x in 3 %}{% endfor %}").detail.find("not iterable"), std::string::npos);
  EXPECT_NE(error_of("{{ nope() }}").detail.find("'nope' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns._x = 1 %}").detail.find("'_'"), std::string::npos);
}

TEST(ChatTemplate, RaiseExceptionCarriesTheTemplatesMessage) {
  const TemplateError e = error_of("{% if messages|length == 0 %}\n  {{ raise_exception('Need ' ~ 1 ~ ' message') }}\n{% endif %}",
                                   R"({"messages": []})");
  EXPECT_EQ(e.kind, TemplateError::Kind::raised);
  EXPECT_EQ(e.detail, "Need 1 message");
  EXPECT_EQ(e.line, 2);
  EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos);
}

TEST(ChatTemplate, LimitsAreNamedErrors) {
  Limits small;
  small.max_loop_iterations = 1000;
  TemplateError e = error_of("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", "{}", small);
  EXPECT_EQ(e.kind, TemplateError::Kind::limit);
  EXPECT_NE(e.detail.find("loop iterations"), std::string::npos);

  e = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(e.kind, TemplateError::Kind::limit);
  EXPECT_NE(e.detail.find("macro calls nested deeper than 64"), std::string::npos);

  small = Limits{};
  small.max_output_bytes = 1000;
  EXPECT_EQ(error_of("{% for i in range(2000) %}x{% endfor %}", "{}", small).kind, TemplateError::Kind::limit);
  EXPECT_EQ(error_of("{{ 'ab' * 600 }}", "{}", small).kind, TemplateError::Kind::limit);
  EXPECT_EQ(error_of("{% set s %}{% for i in range(2000) %}x{% endfor %}{% endset %}", "{}", small).kind,
            TemplateError::Kind::limit);

  e = error_of("{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}");
  EXPECT_EQ(e.kind, TemplateError::Kind::syntax);
  EXPECT_NE(e.detail.find("nested deeper"), std::string::npos);
  std::string nested_blocks;
  for (int i = 0; i < 300; ++i) nested_blocks += "{% if 1 %}";
  EXPECT_NE(error_of(nested_blocks).detail.find("nested deeper"), std::string::npos);

  e = error_of("{% set ns = namespace(x=[]) %}{% for i in range(300) %}{% set ns.x = [ns.x] %}{% endfor %}");
  EXPECT_EQ(e.kind, TemplateError::Kind::limit);
  EXPECT_NE(e.detail.find("nested deeper than 256"), std::string::npos);

  small = Limits{};
  small.max_list_items = 100;
  EXPECT_EQ(error_of("{{ range(1000) | length }}", "{}", small).kind, TemplateError::Kind::limit);
  EXPECT_EQ(error_of("{{ ([1] * 1000) | length }}", "{}", small).kind, TemplateError::Kind::limit);
}

TEST(ChatTemplate, LongChainsAreRefusedNotRecursedInto) {
  // Operator, attribute and filter chains are parsed by loops; their trees must still stay shallow.
  std::string sum = "{{ 1";
  for (int i = 0; i < 100000; ++i) sum += " + 1";
  EXPECT_NE(error_of(sum + " }}").detail.find("nested deeper than 128"), std::string::npos);
  std::string path = "{{ x";
  for (int i = 0; i < 100000; ++i) path += ".a";
  EXPECT_EQ(error_of(path + " }}").kind, TemplateError::Kind::syntax);
  std::string filters = "{{ x";
  for (int i = 0; i < 100000; ++i) filters += "|trim";
  EXPECT_EQ(error_of(filters + " }}").kind, TemplateError::Kind::syntax);
  std::string chain = "{{ 1";
  for (int i = 0; i < 100; ++i) chain += " + 1";
  EXPECT_EQ(render(chain + " }}"), "101");  // a long but reasonable chain is fine
}

TEST(ChatTemplate, WorkIsBounded) {
  // Exponentially many macro calls within the depth limit, and quadratic work hidden in filters.
  Limits small;
  small.max_steps = 1000000;
  TemplateError e = error_of("{% macro f(n) %}{% if n < 40 %}{{ f(n + 1) }}{{ f(n + 1) }}{% endif %}{% endmacro %}{{ f(0) }}",
                             "{}", small);
  EXPECT_EQ(e.kind, TemplateError::Kind::limit);
  EXPECT_NE(e.detail.find("steps of work"), std::string::npos);
  e = error_of("{% set big = range(100000) | list %}{% for i in range(1000) %}{{ big | length }}{% endfor %}", "{}", small);
  EXPECT_NE(e.detail.find("steps of work"), std::string::npos);
  e = error_of("{% set s = 'x' * 1000000 %}{% for i in range(1000) %}{{ s.strip() | length }}{% endfor %}", "{}", small);
  EXPECT_NE(e.detail.find("steps of work"), std::string::npos);
  // Deep values built through builtins that wrap their input are refused where they are kept.
  e = error_of("{% set ns = namespace(x=1) %}{% for i in range(300) %}{% set ns.x = dict(a=ns.x) %}{% endfor %}");
  EXPECT_NE(e.detail.find("nested deeper than 256"), std::string::npos);
  e = error_of("{% set ns = namespace(x=[1]) %}{% for i in range(300) %}{% set ns.x = ns.x | batch(1) | list %}{% endfor %}");
  EXPECT_NE(e.detail.find("nested deeper than 256"), std::string::npos);
}

// Large but legitimate renders: building a string piece by piece costs its bytes once, not once per piece.
// Expected lengths are jinja2's (transformers' tojson).
TEST(ChatTemplate, LargeJoinsAndJsonStayLinear) {
  std::string tools = "[";
  for (int i = 0; i < 1000; ++i) {
    tools += std::string(i ? "," : "") + R"({"type": "function", "function": {"name": "tool_)" + std::to_string(i) +
             R"(", "description": "Does thing number )" + std::to_string(i) +
             R"( with care and precision, returning a result.", "parameters": {"type": "object", "properties": )"
             R"({"query": {"type": "string", "description": "what to look up"}, "limit": {"type": "integer"}}, )"
             R"("required": ["query"]}}})";
  }
  const std::string tools_json = R"({"tools": )" + tools + "]}";
  EXPECT_EQ(render("{{ tools|tojson|length }}|{{ tools|tojson(indent=2)|length }}", tools_json), "306780|486782");
  std::string xs = R"({"xs": [)";
  for (int i = 0; i < 20000; ++i) xs += std::string(i ? "," : "") + "\"s" + std::to_string(i) + "\"";
  xs += "]}";
  EXPECT_EQ(render("{{ xs|join(',')|length }}|{{ ','.join(xs)|length }}|{{ (xs|join(','))[-12:] }}", xs),
            "128889|128889|19998,s19999");
  // The size cap still holds for each of them.
  Limits small;
  small.max_output_bytes = 100000;
  for (const char* t : {"{{ tools|tojson|length }}", "{{ xs|join(',')|length }}", "{{ ','.join(xs)|length }}"}) {
    const TemplateError e = error_of(t, std::string(t).find("tools") != std::string::npos ? tools_json : xs, small);
    EXPECT_EQ(e.kind, TemplateError::Kind::limit) << t;
    EXPECT_NE(e.detail.find("exceeds the output limit"), std::string::npos) << t << ": " << e.detail;
  }
}

// Builtins whose work grows with an argument rather than with their input are charged for it.
TEST(ChatTemplate, WorkProportionalToArgumentsIsCharged) {
  Limits small;
  small.max_steps = 1000000;
  const char* templates[] = {
      "{% for i in range(100) %}{% set x = range(100000) %}{% endfor %}",
      "{% for i in range(100) %}{% set x = 'a'|center(1000000) %}{% endfor %}",
      "{% for i in range(100) %}{% set x = [1]|batch(100000, 0) %}{% endfor %}",
      "{% for i in range(100) %}{% set x = ('x' * 10000)|list %}{% endfor %}",
      "{% set xs = range(10000)|list %}{% set x = xs|unique|list %}",
  };
  for (const char* t : templates) {
    const TemplateError e = error_of(t, "{}", small);
    EXPECT_EQ(e.kind, TemplateError::Kind::limit) << t;
    EXPECT_NE(e.detail.find("steps of work"), std::string::npos) << t << ": " << e.detail;
  }
}

// Stripping a set of characters looks each one up in the set: a long set must not make it quadratic.
TEST(ChatTemplate, StripWithLongCharacterSetIsFast) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(render("{% set s = 'a' * 1000000 %}{% set c = 'b' * 1000000 ~ 'a' %}{{ s.strip(c)|length }}|"
                   "{{ ('xay' * 3)|trim('yx') }}"),
            "0|ayxayxa");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// A value built from shared lists stands for far more items than it took to build: [[[0] * 100] * 100] * 100 is
// a million. Printing, comparing, searching, sorting and serializing it walk every one of them, so each is
// charged per item (a couple of hundred steps under the old per-list charge, here a limit error).
TEST(ChatTemplate, WalksOverSharedListsAreChargedPerItem) {
  Limits small;
  small.max_steps = 100000;
  const std::string build = "{% set a = [0] * 100 %}{% set b = [a] * 100 %}{% set c = [b] * 100 %}"
                            "{% set d = [[[0] * 100] * 100] * 100 %}";
  EXPECT_EQ(render(build + "{{ c|length }}", "{}", small), "100");
  const char* walks[] = {
      "{% set r = c|string %}",          "{% set r = c == d %}",    "{% set r = c != d %}",
      "{% set r = c in [d] %}",          "{% set r = [c, d]|unique|list %}",
      "{% set r = [c, d]|sort %}",       "{% set r = [c, d]|max %}", "{% set r = c.count(b) %}",
      "{% set r = [c] < [d] %}",         "{% set r = c is eq d %}",  "{% set r = {}[c] is defined %}",
      "{% set r = c|tojson %}",          "{% set r = [c, d]|min %}",
  };
  for (const char* t : walks) {
    const TemplateError e = error_of(build + t, "{}", small);
    EXPECT_EQ(e.kind, TemplateError::Kind::limit) << t;
    EXPECT_NE(e.detail.find("steps of work"), std::string::npos) << t << ": " << e.detail;
  }
  // The walks themselves are unchanged (jinja2's output).
  EXPECT_EQ(render("{{ [{'a': [1, (2,)]}, {'b': none}, (1,)] }}|{{ {'a': 1, 'b': [2]} == {'b': [2], 'a': 1} }}|"
                   "{{ [[1, 2], [1, 3]] < [[1, 2], [1, 4]] }}|{{ namespace(a=[1, 'x']) }}|{{ {'a': 1} == {'b': 1} }}|"
                   "{{ [(1, 2)] != [[1, 2]] }}"),
            "[{'a': [1, (2,)]}, {'b': None}, (1,)]|True|True|<Namespace {'a': [1, 'x']}>|False|True");
}

// With the default limits, printing or comparing a billion shared items ends within a second or two.
TEST(ChatTemplate, WalksOverABillionSharedItemsEndQuickly) {
  const std::string build = "{% set a = [0] * 1000 %}{% set b = [a] * 1000 %}{% set c = [b] * 1000 %}";
  for (const char* t : {"{{ c }}", "{{ c == c }}", "{{ c|string|length }}", "{{ [c, c]|sort|length }}",
                        "{{ c in [c] }}", "{{ c|tojson|length }}"}) {
    const auto start = std::chrono::steady_clock::now();
    const TemplateError e = error_of(build + t);
    EXPECT_EQ(e.kind, TemplateError::Kind::limit) << t;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << t;
  }
}

// Slicing a string walks it once, charged per code point it copies one by one: repeated slices of a large string
// end quickly, in a result or the step limit, instead of building a vector of its characters each time.
TEST(ChatTemplate, StringSlicesAreChargedPerCodePoint) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(render("{% set s = 'ab\u00e9' * 4000000 %}"
                   "{{ s[::1]|length }}|{{ s[1:7] }}|{{ s[-1:-7:-2] }}|{{ s[::-4][:6] }}|{{ s[2::3][:3] }}|"
                   "{{ (s|reverse)[:3] }}"),
            "12000000|b\u00e9ab\u00e9a|\u00e9ab|\u00e9ba\u00e9ba|\u00e9\u00e9\u00e9|\u00e9ba");
  for (const char* t : {"{% set s = 'ab' * 8000000 %}{% for i in range(100) %}{% set t = s[::1] %}{% endfor %}",
                        "{% set s = 'ab' * 8000000 %}{% for i in range(100) %}{% set t = s[::-1] %}{% endfor %}",
                        "{% set s = 'ab' * 8000000 %}{% for i in range(100) %}{% set t = s[::2] %}{% endfor %}",
                        "{% set s = 'ab' * 8000000 %}{% for i in range(100) %}{% set t = s|reverse %}{% endfor %}"}) {
    const TemplateError e = error_of(t);
    EXPECT_EQ(e.kind, TemplateError::Kind::limit) << t;
    EXPECT_NE(e.detail.find("steps of work"), std::string::npos) << t << ": " << e.detail;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(8));
}

// Memory a builtin would need is checked against the limits before it is allocated: each of these would need
// gigabytes to terabytes, and must end in the named limit error rather than std::bad_alloc.
TEST(ChatTemplate, OversizedResultsAreRefusedBeforeAllocation) {
  Limits small;
  small.max_list_items = 100;
  ASSERT_EQ(error_of("{{ [1]|batch(1000, 'x')|length }}", "{}", small).kind, TemplateError::Kind::limit);
  ASSERT_EQ(error_of("{{ ('x' * 1000)|list|length }}", "{}", small).kind, TemplateError::Kind::limit);
  ASSERT_EQ(error_of("{% for c in 'x' * 1000 %}{% endfor %}", "{}", small).kind, TemplateError::Kind::limit);
  ASSERT_EQ(error_of("{{ (',' * 1000).split(',')|length }}", "{}", small).kind, TemplateError::Kind::limit);
  const char* huge[] = {
      "{{ [1]|batch(1000000000000, 'x')|length }}",
      "{{ 'a\\nb'|indent(100000000000) }}",
      "{% set s = 'a' * 1000000 %}{{ s.replace('a', s)|length }}",
      "{% set s = 'a' * 1000000 %}{{ s|replace('a', s)|length }}",
      "{% set s = 'a' * 1000000 %}{{ s.replace('', s)|length }}",
      "{% set s = 'a' * 16000000 %}{{ s|list|length }}",
      "{% set s = 'a' * 16000000 %}{% for c in s %}{% endfor %}",
      "{% set s = 'a' * 1000000 %}{{ ('%s' * 17)|format(s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s)|length }}",
      "{{ 'a'|center(100000000000) }}",
  };
  for (const char* t : huge) {
    try {
      const TemplateError e = error_of(t);
      EXPECT_EQ(e.kind, TemplateError::Kind::limit) << t << ": " << e.detail;
    } catch (const std::bad_alloc&) {
      ADD_FAILURE() << "std::bad_alloc from " << t;
    }
  }
}

TEST(ChatTemplate, NamespacesAndContainersHoldOnlyData) {
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.me = ns %}").detail.find("namespace"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set l = [ns] %}").detail.find("cannot hold a Namespace"), std::string::npos);
  // A call block's caller refers to the loop scope it was made in; it must not be callable after the loop.
  const char* escape =
      "{% set ns = namespace() %}{% macro m() %}{% set ns.c = caller %}{% endmacro %}"
      "{% for i in range(1) %}{% call m() %}x{{ i }}{% endcall %}{% endfor %}{{ ns.c() }}";
  EXPECT_NE(error_of(escape).detail.find("cannot hold a macro"), std::string::npos);
  EXPECT_EQ(error_of("{% macro m() %}{% set ns = namespace(c=[caller]) %}{% endmacro %}{% call m() %}{% endcall %}").kind,
            TemplateError::Kind::runtime);
  EXPECT_EQ(error_of("{% macro m() %}{% set d = dict(c=caller) %}{% endmacro %}{% call m() %}{% endcall %}").kind,
            TemplateError::Kind::runtime);
}

class ChatTemplateDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("attnzoo_chat_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name, std::ios::binary) << text; }
  std::filesystem::path dir_;
};

TEST_F(ChatTemplateDir, StringTemplateAndSpecialTokens) {
  write("tokenizer_config.json",
        R"({"chat_template": "{{ bos_token }}hi", "bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>",
            "pad_token": null})");
  const auto info = load_chat_template(dir_.string());
  ASSERT_TRUE(info);
  EXPECT_EQ(info->source, "{{ bos_token }}hi");
  ASSERT_TRUE(info->special_tokens.find("bos_token"));
  EXPECT_EQ(info->special_tokens.find("bos_token")->as_string(), "<s>");
  EXPECT_EQ(info->special_tokens.find("eos_token")->as_string(), "</s>");
  EXPECT_EQ(info->special_tokens.find("pad_token"), nullptr);
  EXPECT_EQ(ChatTemplate(info->source).render(chat_context(Value::list({}), false, info->special_tokens)), "<s>hi");
}

TEST_F(ChatTemplateDir, NamedTemplatesDefaultWinsAndJinjaFileFirst) {
  write("tokenizer_config.json",
        R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  EXPECT_EQ(load_chat_template(dir_.string())->source, "D");
  EXPECT_EQ(load_chat_template(dir_.string(), "tool_use")->source, "T");
  EXPECT_THROW(load_chat_template(dir_.string(), "rag"), LoadError);
  write("chat_template.jinja", "J");
  EXPECT_EQ(load_chat_template(dir_.string())->source, "J");
  EXPECT_EQ(load_chat_template(dir_.string(), "tool_use")->source, "T");
  std::filesystem::create_directories(dir_ / "additional_chat_templates");
  write("additional_chat_templates/tool_use.jinja", "TJ");
  EXPECT_EQ(load_chat_template(dir_.string(), "tool_use")->source, "TJ");
  EXPECT_THROW(load_chat_template(dir_.string(), "../chat_template"), LoadError);  // names are not paths
}

TEST_F(ChatTemplateDir, MissingAndMalformed) {
  EXPECT_FALSE(load_chat_template(dir_.string()));
  write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  EXPECT_FALSE(load_chat_template(dir_.string()));
  write("tokenizer_config.json", R"({"chat_template": 3})");
  EXPECT_THROW(load_chat_template(dir_.string()), LoadError);
  write("tokenizer_config.json", R"({"chat_template": [{"name": "default"}]})");
  EXPECT_THROW(load_chat_template(dir_.string()), LoadError);
  write("tokenizer_config.json", R"({"chat_template": "x", "bos_token": 5})");
  EXPECT_THROW(load_chat_template(dir_.string()), LoadError);
  write("tokenizer_config.json", "{not json");
  EXPECT_THROW(load_chat_template(dir_.string()), LoadError);
}

}  // namespace
}  // namespace attnzoo::chat
