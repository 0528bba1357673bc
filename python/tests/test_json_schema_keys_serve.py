"""Structured outputs end to end under patternProperties / propertyNames (test_json_schema_keys.py has the
exhaustive checks): test_json_mode's tiny random Llama samples at temperature 1.0 through `attnzoo serve`, driven by
the openai client with a response_format json_schema; every answer that ends "stop" is one the Python restatement
of JSON Schema's key rule (re deciding the patterns) accepts, every "length" one a prefix the recognizer takes; the
same requests without the schema are never accepted."""
import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from attnzoo import _core  # noqa: E402
from test_chat_cli import needs_cli  # noqa: E402
from test_json_mode import PROMPT, checkpoint, server  # noqa: E402,F401 (fixtures)
from test_json_schema_keys import reference  # noqa: E402

SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
          "patternProperties": {"^x_[a-z]+$": {"type": "string"}, "^[0-9]+$": {"type": "boolean"}},
          "propertyNames": {"maxLength": 8}, "additionalProperties": False, "maxProperties": 4}
FORMAT = {"type": "json_schema", "json_schema": {"name": "tagged", "schema": SCHEMA}}


def _ok(text):
    try:
        return isinstance(json.loads(text), dict) and reference(SCHEMA, text)
    except ValueError:
        return False


def _prefix(text):
    n, complete, _ = _core.json_schema_prefix(json.dumps(SCHEMA), text.encode())
    return n == len(text.encode()) and not complete


@needs_cli
def test_server_response_format_with_pattern_properties(server):
    pytest.importorskip("openai")
    client = server.client()
    done, extra = 0, 0
    for seed in range(6):
        r = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=160, temperature=1.0, seed=seed, n=2,
                                      extra_body={"response_format": FORMAT})
        chat = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "JSON"}],
                                              max_tokens=160, temperature=1.0, seed=seed, response_format=FORMAT)
        for text, reason in [(c.text, c.finish_reason) for c in r.choices] + [
                (chat.choices[0].message.content, chat.choices[0].finish_reason)]:
            assert _ok(text) if reason == "stop" else reason == "length" and _prefix(text), text
            if reason == "stop":
                done += 1
                extra += len(json.loads(text)) > 1  # a key some pattern took
    assert done >= 6 and extra >= 1, (done, extra)
    free = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=160, temperature=1.0, seed=0, n=4)
    assert not any(_ok(c.text) for c in free.choices)
