"""Structured outputs (response_format json_schema) end to end, through the Python engine and `attnzoo serve` driven
by the openai client, on test_json_mode's tiny random Llama (byte-level BPE holding every byte and JSON pieces).

At temperature 1.0 over 40 seeds every sample that ends "stop" is a document that test_json_schema's independent
validator passes (json.loads + standard JSON Schema semantics + the subset's key order), every "length" one a
prefix the recognizer takes; the same requests without the schema give no valid document, so the checks can fail.
The server takes OpenAI's shape on both endpoints, n = 2 and streaming, and refuses a schema outside the subset
with a 400 naming response_format, the keyword and its JSON pointer."""
import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from attnzoo import _core  # noqa: E402
from attnzoo.engine import SamplingParams  # noqa: E402
from test_chat_cli import needs_cli  # noqa: E402
from test_json_mode import PROMPT, check_sampled_answers, checkpoint, llm, server  # noqa: E402,F401
from test_json_schema import valid  # noqa: E402

SEEDS = 40
SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"enum": ["quick", "brown", "lazy"]}, "maxItems": 3},
    "pet": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/pet"}]},
    "ok": {"type": "boolean"}},
    "required": ["name", "age"],
    "$defs": {"pet": {"type": "object", "properties": {"kind": {"enum": ["fox", "dog"]}}, "required": ["kind"]}}}
FORMAT = {"type": "json_schema", "json_schema": {"name": "animal", "schema": SCHEMA, "strict": True}}


def _valid(text):
    try:
        return valid(json.loads(text), SCHEMA, SCHEMA)
    except ValueError:
        return False


def _prefix(text):
    n, complete, _ = _core.json_schema_prefix(json.dumps(SCHEMA), text.encode())
    return n == len(text.encode()) and not complete


def test_sampled_json_schema_answers_validate(llm):
    check_sampled_answers(llm, FORMAT, _valid, _prefix)
    free = [SamplingParams(temperature=1.0, seed=s, max_tokens=160) for s in range(SEEDS)]
    assert not any(_valid(o.outputs[0].text) for o in llm.generate([PROMPT] * SEEDS, free))
    json_mode = [SamplingParams(temperature=1.0, seed=s, max_tokens=160, response_format="json_object")
                 for s in range(SEEDS)]
    assert not any(_valid(o.outputs[0].text) for o in llm.generate([PROMPT] * SEEDS, json_mode))


def test_json_schema_forms_n_samples_and_errors(llm):
    for fmt in (FORMAT, {"type": "json_schema", "schema": SCHEMA}):
        out = llm.generate(PROMPT, SamplingParams(temperature=1.0, seed=3, n=2, max_tokens=160,
                                                  response_format=fmt))[0]
        assert len(out.outputs) == 2
        for o in out.outputs:
            assert _valid(o.text) if o.finish_reason == "stop" else _prefix(o.text), o.text
    bad = {"type": "json_schema", "json_schema": {"schema": {"type": "string", "not": {"const": "a"}}}}
    with pytest.raises(ValueError, match=r'response_format: json_schema at #: "not" is not supported'):
        llm.generate(PROMPT, SamplingParams(response_format=bad))
    with pytest.raises(ValueError, match="response_format"):
        llm.generate(PROMPT, SamplingParams(response_format={"type": "json_schema"}))


def test_model_generate_takes_response_format(checkpoint):
    from attnzoo.model import Model
    model = Model.load(checkpoint)
    texts = [model.generate(PROMPT, do_sample=True, temperature=1.0, seed=s, max_new_tokens=160, response_format=FORMAT)
             for s in range(6)]
    assert all(_valid(t) or _prefix(t) for t in texts), texts
    assert sum(_valid(t) for t in texts) >= 2
    batch = model.generate([PROMPT, PROMPT], do_sample=True, temperature=1.0, seed=0, max_new_tokens=160,
                           response_format=FORMAT)
    assert batch[0] == texts[0]  # one prompt alone is the engine's first of a batch
    with pytest.raises(ValueError, match='"not" is not supported'):
        model.generate(PROMPT, response_format={"type": "json_schema", "schema": {"type": "string", "not": {}}})
    with pytest.raises(ValueError, match="native: response_format runs on the C\\+\\+ engine"):
        model.generate(PROMPT, response_format="json_object", native=False)


@needs_cli
def test_server_json_schema_completions_chat_and_stream(server):
    pytest.importorskip("openai")
    client = server.client()
    done = 0
    for seed in range(5):
        r = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=160, temperature=1.0, seed=seed, n=2,
                                      extra_body={"response_format": FORMAT})
        assert len(r.choices) == 2
        for c in r.choices:
            assert _valid(c.text) if c.finish_reason == "stop" else _prefix(c.text), c.text
            done += c.finish_reason == "stop"
        messages = [{"role": "user", "content": "An animal as JSON"}]
        chat = client.chat.completions.create(model="tiny", messages=messages, max_tokens=160, temperature=1.0,
                                              seed=seed, response_format=FORMAT)
        c = chat.choices[0]
        assert _valid(c.message.content) if c.finish_reason == "stop" else _prefix(c.message.content)
        done += c.finish_reason == "stop"
        stream = client.chat.completions.create(model="tiny", messages=messages, max_tokens=160, temperature=1.0,
                                                seed=seed, stream=True, response_format=FORMAT)
        text, reason = "", None
        for chunk in stream:
            for ch in chunk.choices:
                text += ch.delta.content or ""
                reason = ch.finish_reason or reason
        assert text == c.message.content and reason == c.finish_reason
    assert done >= 4


@needs_cli
@pytest.mark.parametrize("schema,message", [
    ({"type": "object", "properties": {"when": {"type": "string", "format": "hostname"}}},
     'json_schema at #/properties/when/format: format "hostname" is not supported'),
    ({"type": "string", "format": "email", "maxLength": 4},
     "json_schema at #: no email address has minLength / maxLength characters"),
    ({"type": "integer", "minimum": 5, "maximum": 4}, "json_schema at #: no integer lies in [5, 4]"),
    ({"anyOf": [{"type": "integer"}, {"type": "number"}]}, "begin with"),
    ({"$ref": "#/$defs/missing"}, "points at nothing"),
])
def test_server_refuses_schemas_outside_the_subset(server, schema, message):
    body = {"model": "tiny", "prompt": "hi", "max_tokens": 2,
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}
    status, text = server.raw("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    assert status == 400, text
    err = json.loads(text)["error"]
    assert err["param"] == "response_format" and message in err["message"], err
