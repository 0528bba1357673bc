// Python and Jinja2 semantics of builtins, literals and comparisons where they are easy to get subtly wrong.
// Every expected value is what Python jinja2 (3.1, the ImmutableSandboxedEnvironment) renders for the same template.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "chat/error.h"

namespace attnzoo::chat {
namespace {

std::string render(const std::string& source) { return ChatTemplate(source).render_json("{}"); }

TemplateError error_of(const std::string& source) {
  try {
    render(source);
  } catch (const TemplateError& e) {
    return e;
  }
  ADD_FAILURE() << "no error from: " << source;
  return TemplateError(TemplateError::Kind::runtime, 0, 0, "none");
}

TEST(Builtins, WhitespaceSplitWithMaxsplitKeepsTheRemainder) {
  EXPECT_EQ(render("{{ ' a b c  '.split(none, 1) }}|{{ '  a b c '.rsplit(none, 1) }}|{{ '  a '.split(none, 0) }}|"
                   "{{ '  a  '.rsplit(none, 0) }}|{{ ' a b '.rsplit(none, 5) }}"),
            "['a', 'b c  ']|['  a b', 'c']|['a ']|['  a']|['a', 'b']");
}

TEST(Builtins, StringSearchMethodsTakeStartAndEnd) {
  EXPECT_EQ(render("{{ 'abcabc'.find('a', 1) }}|{{ 'abcabc'.startswith('b', 1) }}|{{ 'abcabc'.count('a', 1) }}|"
                   "{{ 'abc'.find('', 2, 1) }}|{{ 'abc'.find('', 3) }}|{{ 'abc'.find('', 4) }}|"
                   "{{ 'abc'.count('', 2, 1) }}|{{ 'abc'.count('', 1) }}|{{ 'abc'.startswith('', 3) }}|"
                   "{{ 'abc'.startswith('', 4) }}|{{ 'abc'.startswith('', 2, 1) }}|{{ 'abcabc'.rfind('a', 0, -3) }}|"
                   "{{ 'abcabc'.rindex('c', -100, 100) }}|{{ 'abcabc'.endswith('b', 0, -4) }}|"
                   "{{ 'abcabc'.endswith(('x', 'ab'), 0, 2) }}|{{ '\u00e9a\u00e9'.find('\u00e9', 1) }}|"
                   "{{ 'abc'.index('c', none, none) }}"),
            "3|True|1|-1|3|-1|0|3|True|False|False|0|5|True|True|2|2");
  EXPECT_NE(error_of("{{ 'abc'.index('a', 1) }}").detail.find("substring not found"), std::string::npos);
}

TEST(Builtins, ListsAndTuplesAreDifferentTypes) {
  EXPECT_EQ(render("{{ [1] == (1,) }}|{{ (1,) == (1,) }}|{{ [1] != (1,) }}|{{ (1, 2) in [[1, 2]] }}"),
            "False|True|True|False");
  EXPECT_NE(error_of("{{ [1] < (1,) }}").detail.find("'<' not supported between instances of 'list' and 'tuple'"),
            std::string::npos);
}

TEST(Builtins, IntAndFloatFiltersParseAsPython) {
  EXPECT_EQ(render("{{ '0x10'|int }}|{{ '1_000'|int }}|{{ '0x1p3'|float }}|{{ ' 12 '|int }}|{{ '1e3'|int }}|"
                   "{{ '1__0'|int }}|{{ '_1'|int }}|{{ '1_'|int }}|{{ '1_0.5_0'|float }}|{{ '1._5'|float }}|"
                   "{{ 'inf'|float }}|{{ '-Infinity'|float }}|{{ 'nan'|float }}|{{ 'inf'|int }}|{{ '+5'|int }}|"
                   "{{ '007'|int }}|{{ '1e1_0'|float }}|{{ '.5'|float }}|{{ '5.'|float }}|{{ '.'|float }}|"
                   "{{ '12.7'|int }}|{{ 'infinit'|float }}|{{ 'nan(1)'|float }}|{{ '1e'|float }}"),
            "0|1000|0.0|12|1000|0|0|0|10.5|0.0|inf|-inf|nan|0|5|7|10000000000.0|0.5|5.0|0.0|12|0.0|0.0|0.0");
}

TEST(Builtins, SumOverflowIsAnError) {
  // jinja2 gives 9223372036854775808; integers here are 64-bit, where overflow is an error.
  EXPECT_NE(error_of("{{ [9223372036854775807, 1]|sum }}").detail.find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ [-1, -9223372036854775807 - 1]|sum }}").detail.find("integer overflow"), std::string::npos);
  EXPECT_EQ(render("{{ [1, 2, 3]|sum }}|{{ [1, 2.5]|sum }}"), "6|3.5");
  EXPECT_EQ(render("{{ [[1], [2]]|sum(start=[]) }}"), "[1, 2]");  // Python's + on whatever the items are
}

TEST(Builtins, WordcountCountsWordCharacterRuns) {
  EXPECT_EQ(render("{{ 'one-two three'|wordcount }}|{{ 'a_b c.d \u00e9\u2014x'|wordcount }}"), "3|5");
}

TEST(Builtins, ReprEscapesNonPrintableCharactersAsPython) {
  EXPECT_EQ(render("{{ ['\\xa0', '\\u2028', '\\x85', '\\xad', '\u00e9', '\\ufeff', '\\u3000', '\\U000e0001', "
                   "'\\ue000', '\\'\"'] }}"),
            R"(['\xa0', '\u2028', '\x85', '\xad', 'é', '\ufeff', '\u3000', '\U000e0001', '\ue000', '\'"'])");
}

TEST(Builtins, OctalEscapesInStringLiterals) {
  EXPECT_EQ(render("{{ '\\012' }}|{{ '\\0' }}|{{ '\\1234' }}|{{ '\\777' }}|{{ '\\8' }}|{{ '\\08' }}"),
            std::string("\n|") + '\0' + "|S4|\u01ff|\\8|" + '\0' + "8");
}

// A macro closes over the scope it is defined in, as Jinja's macros do: a macro in a loop sees the loop variable
// and the loop's `set`s, a macro in a macro sees the outer one's arguments.
TEST(Builtins, MacrosSeeTheScopeTheyAreDefinedIn) {
  EXPECT_EQ(render("{% for x in [1, 2] %}{% macro m() %}{{ x }}{% endmacro %}{{ m() }}{% endfor %}|"
                   "{% macro outer(a) %}{% set b = a + 1 %}{% macro inner() %}[{{ a }},{{ b }}]{% endmacro %}"
                   "{{ inner() }}{% endmacro %}{{ outer(5) }}|"
                   "{% for x in [1, 2] %}{% set y = x * 10 %}{% macro m() %}{{ x }}-{{ y }}{% endmacro %}{{ m() }};"
                   "{% endfor %}|{% set g = 'G' %}{% macro m() %}{{ g }}{% endmacro %}{% set g = 'H' %}{{ m() }}|"
                   "{% for x in [1, 2] %}{% macro m(y=x) %}{{ y }}{% endmacro %}{{ m() }}{% endfor %}|"
                   "{% for x in [1] %}{% macro k() %}{% endmacro %}{% endfor %}{{ k is defined }}"),
            "12|[5,6]|1-10;2-20;|H|12|False");
  EXPECT_NE(error_of("{% macro outer() %}{% macro inner() %}{{ caller() }}{% endmacro %}{{ inner() }}{% endmacro %}"
                     "{% call outer() %}C{% endcall %}").detail.find("'caller' is undefined"),
            std::string::npos);
}

// lstrip_blocks and `-` strip what jinja2's \s matches: Python's whitespace, not only ASCII (\f and \v were
// already stripped; \r is a line break in both).
TEST(Builtins, BlockStrippingTakesUnicodeWhitespace) {
  EXPECT_EQ(render("a\n\u00a0\u3000{% if true %}x{% endif %}|\u2003{% if true %}y{% endif %}|"
                   "a\n \f\v\t{% if true %}\nx\n\f{% endif %}\nb|a\n\u00a0{# c #}x|a\u00a0{%- if true %}x{% endif %}|"
                   "q\n\u00a0{{ 1 }}"),
            "a\nx|\u2003y|a\nx\nb|a\nx|ax|q\n\u00a01");
  // After `-%}` / `-}}` / `-#}`, and between a tag's tokens, too (jinja2 2026: 'x', '1x', 'x', 'y').
  EXPECT_EQ(render("{% if true -%}\u3000\u00a0 x{% endif %}|{{ 1 -}}\u3000\x1c\u0085x|{# c -#}\u2003x|"
                   "{%\u3000if true %}y{% endif %}"),
            "x|1x|x|y");
}

}  // namespace
}  // namespace attnzoo::chat
