"""attnzoo.apply_chat_template against transformers' own rendering (Python jinja2 in transformers' sandboxed
environment) on real chat templates (python/tests/data/chat_templates/, taken from the models' Hugging Face
tokenizer configs) and on hand-written templates that exercise each language feature."""
import copy
import os

import pytest

import attnzoo

jinja2 = pytest.importorskip("jinja2")
ctu = pytest.importorskip("transformers.utils.chat_template_utils")

DATA = os.path.join(os.path.dirname(__file__), "data", "chat_templates")
TEMPLATES = sorted(f for f in os.listdir(DATA) if f.endswith(".jinja"))

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
            },
            "required": ["city"],
        },
    },
}

SYSTEM = {"role": "system", "content": "You are a terse assistant. Use <b>tags</b> & \"quotes\"."}
CONVERSATIONS = {
    "user_only": [{"role": "user", "content": "Hello!  How are you?\n"}],
    "system_multi_turn": [
        SYSTEM,
        {"role": "user", "content": "What's 2+2?"},
        {"role": "assistant", "content": " It is 4. "},
        {"role": "user", "content": "Und auf Deutsch? Grüße, 日本語 too."},
    ],
    "no_system_two_turns": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Bye"},
        {"role": "assistant", "content": "Goodbye.", "tool_calls": None},
    ],
    "tool_call_dict_arguments": [
        SYSTEM,
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "abc123def", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "tool_call_id": "abc123def", "name": "get_weather", "content": "{\"temp\": 21.5}"},
        {"role": "assistant", "content": "It is 21.5 °C in Paris."},
    ],
    "tool_call_string_arguments": [
        {"role": "user", "content": "Weather in Oslo and Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call00001", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
            {"id": "call00002", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
        {"role": "tool", "tool_call_id": "call00001", "content": "cold"},
        {"role": "tool", "tool_call_id": "call00002", "content": "warm"},
    ],
    "reasoning": [
        {"role": "user", "content": "Think first: 3*7?"},
        {"role": "assistant", "content": "<think>\n3*7 is 21.\n</think>\n\n21"},
        {"role": "user", "content": "And 6*7?"},
        {"role": "assistant", "content": "42", "reasoning_content": "6*7 = 42"},
        {"role": "user", "content": "Thanks"},
    ],
    "content_parts": [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "  Describe it. "}]},
    ],
}
# Extra template variables some conversations are also rendered with.
EXTRAS = [
    {},
    {"tools": [WEATHER_TOOL]},
    {"enable_thinking": False, "date_string": "26 Jul 2024", "tools": [WEATHER_TOOL], "tools_in_user_message": False},
    # Cohere's tool_use template takes flat tool definitions
    {"tools": [{"name": "internet_search", "description": "Search the web.",
                "parameter_definitions": {"query": {"description": "Query", "type": "str", "required": True}}}]},
]
SPECIAL = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}


def _reference(template, messages, add_generation_prompt, kwargs):
    messages = ctu._normalize_chat_messages(copy.deepcopy(messages))
    rendered, _ = ctu.render_jinja_template(conversations=[messages], chat_template=template,
                                            add_generation_prompt=add_generation_prompt,
                                            **copy.deepcopy({**SPECIAL, **kwargs}))
    return rendered[0]


def _compare(template, messages, add_generation_prompt=False, **kwargs):
    """Returns "rendered" or "raised"; fails when attnzoo and transformers disagree."""
    try:
        want = _reference(template, messages, add_generation_prompt, kwargs)
    except Exception as e:  # noqa: BLE001: whatever jinja2 raises, attnzoo must raise too
        with pytest.raises(ValueError) as got:
            attnzoo.apply_chat_template(template, messages, add_generation_prompt, **SPECIAL, **kwargs)
        if isinstance(e, jinja2.TemplateError) and type(e) is jinja2.TemplateError:  # raise_exception(message)
            assert str(e) in str(got.value)
        return "raised"
    got = attnzoo.apply_chat_template(template, messages, add_generation_prompt, **SPECIAL, **kwargs)
    assert got == want
    return "rendered"


@pytest.mark.parametrize("name", TEMPLATES)
def test_real_templates_match_transformers(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        template = f.read()
    outcomes = []
    for conv_name, messages in CONVERSATIONS.items():
        for extra in EXTRAS:
            for gen in (False, True):
                try:
                    outcomes.append(_compare(template, messages, gen, **extra))
                except AssertionError as e:
                    raise AssertionError(f"{name}: conversation {conv_name}, kwargs {sorted(extra)}, "
                                         f"add_generation_prompt={gen}: {e}") from None
    # Every template renders most of these conversations; a template that only ever raised would prove little.
    assert outcomes.count("rendered") >= 8, outcomes


FEATURES = [
    # whitespace control, trim_blocks / lstrip_blocks, comments, raw, trailing newline
    "{# c #}\n  {% if true %}\n    yes\n  {% endif %}\n{{- ' a ' -}}\n   {%+ if true %}plus{% endif %}\n"
    "{% raw %}{{ raw }}{% endraw %}\n  {#- x -#}  z  {% if 1 +%}\nkeep{% endif %}\n",
    "a\r\nb {%- if true -%} \r\n c {% endif %}\n\n",
    # loops: loop.*, else, filters on the iterable, unpacking, break / continue, nested loops
    "{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/"
    "{{ loop.first }}/{{ loop.last }}/{{ loop.length }}/{{ loop.previtem is defined }}/{{ loop.cycle('a','b') }};"
    "{% endfor %}{% for x in [] %}no{% else %}empty{% endfor %}",
    "{% for m in messages if m.role != 'system' %}{% for c in m.content %}{% if c == ' ' %}{% continue %}{% endif %}"
    "{% if loop.index > 3 %}{% break %}{% endif %}{{ c }}{% endfor %}|{% endfor %}",
    "{% for k, v in {'b': 1, 'a': [1, 2], 'c': {'d': none}}.items() %}{{ k }}={{ v }};{% endfor %}"
    "{% for a, b in [(1, 2), [3, 4]] %}{{ a + b }}{% endfor %}{% for ch in 'héllo' %}{{ ch }}.{% endfor %}",
    # scoping: set in a loop does not leak, namespace does
    "{% set x = 1 %}{% for i in range(3) %}{% set x = i %}{% endfor %}{{ x }}"
    "{% set ns = namespace(total=0, names=[]) %}{% for i in range(4) %}{% set ns.total = ns.total + i %}"
    "{% set ns.names = ns.names + [i|string] %}{% endfor %}{{ ns.total }} {{ ns.names|join(',') }}",
    "{% set a, b = 1, 'two' %}{{ a }}{{ b }}{% set block %}  inner {{ a }}\n{% endset %}[{{ block }}]"
    "{% set up | upper %}shout{% endset %}{{ up }}",
    # macros and call blocks
    "{% macro tag(name, body='x', close=true) %}<{{ name }}>{{ body }}{% if close %}</{{ name }}>{% endif %}"
    "{% endmacro %}{{ tag('a') }}{{ tag('b', 'y') }}{{ tag('c', close=false) }}"
    "{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}called {{ 1 + 1 }}{% endcall %}",
    "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * (fact(n - 1) | int) }}{% endif %}{% endmacro %}{{ fact(10) }}",
    # expressions: arithmetic, precedence, comparisons, membership, conditionals, literals
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 3 ** 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ -7.5 % 2 }} "
    "{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} "
    "{{ 1 == 1.0 }} {{ 'a' in 'cat' }} {{ 2 not in [1, 3] }} {{ 'x' in {'x': 1} }} {{ not 1 == 2 }} "
    "{{ 1 if none else 2 }} {{ 'y' if 0 }}|{{ true and 'z' }} {{ 0 or '' or 'last' }} {{ 1e-5 }} {{ 1.5e10 }} "
    "{{ 1e16 }} {{ 0.1 + 0.2 }} {{ 1_000 }} {{ -(3) }} {{ 'a' ~ 1 ~ none ~ true }} {{ 'con' 'cat' }}",
    "{{ [1, 'a', none, true, 2.5, [], {}] }} {{ {'k': 'v', 'n': [1, {'m': 'it\\'s'}]} }} {{ (1,) }} {{ (1, 2) }} "
    "{{ none }} {{ messages[0] }}",
    # attribute / subscript / slices
    "{{ messages[0].role }} {{ messages[-1]['content'] }} {{ messages[5] is defined }} {{ messages[0].nope is defined }} "
    "{{ messages|length }} {{ messages[1:][0].role }} {{ messages[::-1][0].role }} {{ 'abcdef'[1:4] }} "
    "{{ 'abcdef'[::-2] }} {{ 'héllo'[1] }} {{ [1, 2, 3, 4][-2:] }} {{ [1, 2, 3][5:] }} {{ 'abc'[-10:2] }}",
    # tests
    "{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 'a' is string }} {{ 1 is number }} "
    "{{ 1.5 is float }} {{ 1 is integer }} {{ true is boolean }} {{ {} is mapping }} {{ [] is iterable }} "
    "{{ 'a' is iterable }} {{ 1 is iterable }} {{ [] is sequence }} {{ 4 is even }} {{ 3 is odd }} "
    "{{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 'ab' is lower }} {{ 'AB' is upper }} "
    "{{ 1 is eq 1 }} {{ 2 is gt 1 }} {{ 1 is lt 2 }} {{ 'a' is in 'abc' }} {{ true is sameas true }} "
    "{{ raise_exception is callable }} {{ x is not defined }} {{ 2 is ne 2 }} {{ 1 is ge 1 }} {{ 1 is le 0 }}",
    # filters
    "{{ '  x y  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'hello world-wide (x)'|title }}|{{ 'hELLO'|capitalize }}|"
    "{{ 'a'|upper }}{{ 'B'|lower }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ [1, 2]|join('-') }}|{{ [3, 1, 2]|first }}|"
    "{{ [3, 1, 2]|last }}|{{ 'abc'|list }}|{{ 3|string ~ 'x' }}|{{ '42'|int + 1 }}|{{ ' 7 '|int }}|{{ '4.7'|int }}|"
    "{{ 'x'|int(5) }}|{{ 3.99|int }}|{{ '2.5'|float }}|{{ 'q'|float }}|{{ x|default('dv') }}|{{ none|default('dv') }}|"
    "{{ ''|default('dv', true) }}|{{ {'a': 1, 'b': 2}|items|list }}|{{ [3, 1, 2]|sort }}|{{ ['b', 'A', 'a']|sort }}|"
    "{{ [3, 1, 2]|sort(reverse=true) }}|{{ [1, 2, 3]|sum }}|{{ [1, 2, 2, 1]|unique|list }}|{{ [4, 9, 1]|max }}|"
    "{{ [4, 9, 1]|min }}|{{ 'abc'|reverse }}|{{ [1, 2]|reverse|list }}|{{ -3|abs }}|{{ 2.5|round }}|{{ 3.5|round }}|"
    "{{ 3.14159|round(2) }}|{{ 2.7|round(0, 'floor') }}|{{ 2.1|round(1, 'ceil') }}|{{ 5|round }}|"
    "{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|"
    "{{ 'one two  three'|wordcount }}|{{ 'ab'|center(6) }}|{{ '<&>'|e }}|{{ '%s=%d'|format('n', 3) }}|"
    "{{ {'b': 2, 'a': 1}|dictsort }}|{{ [1, 2, 3, 4, 5]|batch(2)|list }}|{{ 'x'|safe }}|{{ messages|count }}",
    "{{ messages|map(attribute='role')|join(', ') }}|{{ messages|selectattr('role', 'equalto', 'user')|list|length }}|"
    "{{ messages|rejectattr('role', 'equalto', 'user')|map(attribute='role')|list }}|"
    "{{ messages|selectattr('content')|list|length }}|{{ [1, 2, 3, 4]|select('odd')|list }}|"
    "{{ [1, 2, 3, 4]|reject('gt', 2)|list }}|{{ ['a', 'b']|map('upper')|list }}|"
    "{{ messages|map(attribute='missing', default='d')|list }}|{{ messages|sort(attribute='role')|map(attribute='role')|join }}",
    "{{ messages|tojson }}|{{ messages[0]|tojson(indent=2) }}|{{ {'z': 1, 'a': [1.0, 2.5e-7, none, true]}|tojson }}|"
    "{{ {'z': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ 'é\"\\\\\\n\\t<>'|tojson }}|{{ []|tojson(indent=4) }}|"
    "{{ {'a': {}}|tojson(indent=4) }}|{{ [1, 2]|tojson(separators=(',', ':')) }}",
    # str / dict / list methods
    "{{ '  x  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ '  x'.lstrip() }}|{{ 'x  '.rstrip() }}|{{ 'a,b,,c'.split(',') }}|"
    "{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'abc'.startswith('ab') }}|"
    "{{ 'abc'.endswith(('x', 'c')) }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}|{{ 'hello wORLD'.title() }}|"
    "{{ 'hello'.capitalize() }}|{{ 'aXbXc'.replace('X', '-') }}|{{ 'abcb'.find('b') }}|{{ 'abcb'.rfind('b') }}|"
    "{{ 'abcb'.count('b') }}|{{ '-'.join(['a', 'b']) }}|{{ 'a\\nb\\r\\nc'.splitlines() }}|{{ '12'.isdigit() }}|"
    "{{ 'think>x'.removeprefix('think>') }}|{{ messages[0].get('role') }}|{{ messages[0].get('nope') }}|"
    "{{ messages[0].get('nope', 'd') }}|{{ messages[0].keys()|list }}|{{ messages[0].values()|list|length }}|"
    "{{ messages[0].items()|list|length }}|{{ [1, 2, 2].count(2) }}|{{ [1, 2].index(2) }}",
    # globals
    "{{ range(3)|list }}{{ range(1, 7, 2)|list }}{{ range(3, 0, -1)|list }}{{ dict(a=1, b='x') }}"
    "{{ namespace(a=1).a }}{{ strftime_now('%Y') | length }}",
]


@pytest.mark.parametrize("index", range(len(FEATURES)))
def test_language_features_match_transformers(index):
    messages = CONVERSATIONS["system_multi_turn"]
    assert _compare(FEATURES[index], messages) == "rendered"


@pytest.mark.parametrize("template", [
    "{{ raise_exception('custom failure: ' ~ messages|length) }}",
    "{{ undefined_thing.attr }}",
    "{{ messages.append(1) }}",
    "{{ 1 + 'a' }}",
    "{{ 1 // 0 }}",
    "{% for x in 5 %}{% endfor %}",
    "{{ messages[0]['role'] + 1 }}",
    "{{ undefined_fn() }}",
])
def test_runtime_errors_raise_like_transformers(template):
    assert _compare(template, CONVERSATIONS["user_only"]) == "raised"


@pytest.mark.parametrize("template, where", [
    ("line one\n{% if true %}\n  {{ 1 + }}\n{% endif %}", "line 3"),
    ("{% for x in y %}no end", "line 1, column 4"),
    ("ok\n{{ x | nosuchfilter }}", "line 2"),
    ("{% frobnicate %}", "unknown or unsupported tag 'frobnicate'"),
    ("{{ 'unterminated }}", "unterminated string"),
    ("{% endif %}", "unexpected 'endif'"),
    ("{{ x is nosuchtest }}", "no test named 'nosuchtest'"),
])
def test_syntax_errors_name_the_place(template, where):
    with pytest.raises(jinja2.TemplateSyntaxError):
        ctu._compile_jinja_template(template)
    with pytest.raises(ValueError, match="syntax error") as e:
        attnzoo.apply_chat_template(template, [])
    assert where in str(e.value)


def test_raise_exception_message_and_place():
    template = "{%- for m in messages %}\n  {%- if m.role == 'tool' %}\n    {{- raise_exception('no tools, sorry') }}" \
               "\n  {%- endif %}\n{%- endfor %}"
    with pytest.raises(ValueError, match=r"line 3, column \d+: raise_exception: no tools, sorry"):
        attnzoo.apply_chat_template(template, [{"role": "tool", "content": "x"}])


def test_limits_are_named_errors():
    with pytest.raises(ValueError, match="loop iterations"):
        attnzoo.apply_chat_template("{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(10) %}"
                                    "{% endfor %}{% endfor %}{% endfor %}", [])
    with pytest.raises(ValueError, match="macro calls nested deeper"):
        attnzoo.apply_chat_template("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", [])
    with pytest.raises(ValueError, match="output"):
        attnzoo.apply_chat_template("{% set s = namespace(t='x' * 100000) %}{% for i in range(1000) %}"
                                    "{% set s.t = s.t ~ s.t %}{% endfor %}", [])
    with pytest.raises(ValueError, match="nested deeper"):
        attnzoo.apply_chat_template("{{ " + "(" * 500 + "1" + ")" * 500 + " }}", [])


def test_messages_are_normalised_like_transformers():
    template = "{% for m in messages %}{{ m|tojson }}\n{% endfor %}"
    messages = [{"role": "assistant", "content": "x", "tool_calls": None, "reasoning": "why"}]
    assert _compare(template, messages) == "rendered"
