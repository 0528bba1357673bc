// A deterministic mutation fuzzer over chat templates, which come from untrusted checkpoints: templates written
// like real ones are mutated (byte edits, Jinja tokens inserted, spans deleted or duplicated) and each result must
// render or throw TemplateError, never crash, hang or throw anything else. Seeded, so a failure names an
// iteration that reproduces. Longer runs: ATTNZOO_FUZZ_ITERATIONS=1000000 ATTNZOO_FUZZ_SECONDS=600.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <random>

#include "chat/chat_template.h"
#include "chat/error.h"

namespace attnzoo::chat {
namespace {

int env_or(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

const char* kSeeds[] = {
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
    "{{- bos_token }}\n{%- set ns = namespace(first=true, sys='') %}\n{%- for m in messages %}\n"
    "  {%- if m.role == 'system' %}{% set ns.sys = m.content | trim %}{% continue %}{% endif %}\n"
    "  {{- '<|start_header_id|>' ~ m['role'] ~ '<|end_header_id|>\\n\\n' }}\n"
    "  {%- if m.tool_calls is defined %}{% for c in m.tool_calls %}{{ c.function | tojson(indent=2) }}{% endfor %}\n"
    "  {%- else %}{{ m.content | trim }}{% endif %}{{ '<|eot_id|>' }}\n{%- endfor %}\n"
    "{%- if tools %}{{ tools | map(attribute='function') | map(attribute='name') | join(', ') }}{% endif %}\n"
    "{%- if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
    "{%- macro render(x, depth=0) -%}{%- if x is mapping -%}{ {%- for k, v in x.items() -%}{{ k }}: "
    "{{ render(v, depth + 1) }}{{ ', ' if not loop.last }}{%- endfor -%} }{%- elif x is string -%}'{{ x }}'"
    "{%- elif x is iterable -%}[{{ x | map('string') | join(', ') }}]{%- else -%}{{ x }}{%- endif -%}"
    "{%- endmacro -%}{% for m in messages[::-1] if m.content is defined %}{{ loop.revindex }}:{{ render(m) }}\n"
    "{% else %}{{ raise_exception('no messages') }}{% endfor %}{% set b %}{{ 7 // 2 }}{{ 'x' * 3 }}{% endset %}"
    "{{ b | upper }}{{ range(3) | list }}{{ {'a': [1, 2.5, none]} | tojson }}{# comment #}",
    "{%- if messages[0]['role'] == 'system' -%}{%- set first = messages[0]['content'] + '\\n\\n' -%}"
    "{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first = '' -%}{%- set loop_messages = messages -%}"
    "{%- endif -%}{%- for message in loop_messages -%}{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    "{{ raise_exception('roles must alternate') }}{%- endif -%}{{ '<start_of_turn>' + message['role'] + '\\n' + "
    "(first if loop.first else '') }}{{ message['content'] | trim }}{{ '<end_of_turn>\\n' }}{%- endfor -%}"
    "{% raw %}{{ not parsed }}{% endraw %}{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}x{% endcall %}",
};

const char* kTokens[] = {"{{", "}}", "{%", "%}", "{#", "#}", "-", "+", "for ", " endfor", "if ", "elif", "else",
                         "endif", "set ", "endset", "macro", "endmacro", "call", "endcall", "filter", "raw", "endraw",
                         " in ", " not ", " and ", " or ", " is ", "loop.index", "namespace(", "range(99)", "(", ")",
                         "[", "]", "{", "}", ",", ":", "|", "~", "**", "//", "'", "\"", "\\", ".", "tojson", "join",
                         "map", "selectattr", "messages", "caller()", "break", "continue", "none", "1e9", "-1",
                         "[::-1]", "\n", " ", "x", "=", "==", "%", "*", "\xc3\xa9", "\xff"};

const char* kContext =
    R"({"messages": [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
        {"role": "user", "content": "Bye"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})";

std::string mutate(const std::string& seed, std::mt19937_64& rng) {
  std::string s = seed;
  const int edits = 1 + int(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
    switch (rng() % 4) {
      case 0:
        if (at < s.size()) s[at] = char(rng() % 256);
        break;
      case 1: s.insert(at, kTokens[rng() % std::size(kTokens)]); break;
      case 2: s.erase(at, 1 + rng() % 8); break;
      default: {
        const size_t from = s.empty() ? 0 : rng() % s.size();
        s.insert(at, s.substr(from, 1 + rng() % 32));
      }
    }
  }
  return s;
}

TEST(ChatTemplateFuzz, MutatedTemplatesRenderOrRaiseTemplateError) {
  const int iterations = env_or("ATTNZOO_FUZZ_ITERATIONS", 20000);
  const double seconds = env_or("ATTNZOO_FUZZ_SECONDS", 2);
  Limits limits;
  limits.max_output_bytes = 1 << 16;
  limits.max_steps = 200000;
  limits.max_loop_iterations = 10000;
  limits.max_list_items = 10000;
  for (const char* seed : kSeeds) {  // the seeds themselves must render
    EXPECT_NO_THROW(ChatTemplate(seed, limits).render_json(kContext)) << seed;
  }
  std::mt19937_64 rng(12345);
  const auto start = std::chrono::steady_clock::now();
  int rendered = 0, refused = 0, i = 0;
  for (; i < iterations; ++i) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) break;
    const std::string source = mutate(kSeeds[rng() % std::size(kSeeds)], rng);
    try {
      ChatTemplate(source, limits).render_json(kContext);
      ++rendered;
    } catch (const TemplateError&) {
      ++refused;
    } catch (const std::exception& e) {
      FAIL() << "iteration " << i << ": " << e.what() << "\ntemplate:\n" << source;
    }
  }
  RecordProperty("iterations", i);
  RecordProperty("rendered", rendered);
  EXPECT_GT(i, 100);
  EXPECT_GT(rendered, i / 20);  // mutations that keep a template valid still render
  EXPECT_GT(refused, i / 20);
}

}  // namespace
}  // namespace attnzoo::chat
