"""Structured outputs end to end under the keywords pydantic's models send (test_json_schema_keywords.py has the
exhaustive checks): additionalProperties beside properties with maxProperties (extra="allow" and a typed
__pydantic_extra__), pattern with minLength / maxLength, a decimal multipleOf. test_json_mode's tiny random Llama
samples at temperature 1.0, through the Python engine and `attnzoo serve` driven by the openai client; every
answer that ends "stop" is one pydantic validates (and the exact decimal steps and key rules it does not check hold),
every "length" one a prefix the recognizer takes; the same requests without the schema validate never."""
import json
from fractions import Fraction

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
pydantic = pytest.importorskip("pydantic")

from pydantic import BaseModel, ConfigDict, Field, constr  # noqa: E402

from attnzoo import _core  # noqa: E402
from attnzoo.engine import SamplingParams  # noqa: E402
from test_chat_cli import needs_cli  # noqa: E402
from test_json_mode import PROMPT, checkpoint, llm, server  # noqa: E402,F401 (fixtures)
from test_json_schema_keywords import listed_in_order  # noqa: E402

SEEDS = 40

class Animal(BaseModel):
    model_config = ConfigDict(extra="allow", json_schema_extra={"maxProperties": 2})
    __pydantic_extra__: dict[str, int]
    name: constr(pattern=r"^[a-z]+$", min_length=2, max_length=5) = "fox"
    age: float = Field(default=1, multiple_of=0.5, ge=0, le=20)


def _animal_ok(text):
    """pydantic validates the model (pattern, lengths, multiple_of, typed extras); the key count and the listed
    keys' order are checked here (pydantic reads maxProperties as an annotation only)."""
    try:
        Animal.model_validate_json(text)
    except pydantic.ValidationError:
        return False
    value = json.loads(text)
    return len(value) <= 2 and listed_in_order(value, Animal)


class Reading(BaseModel):
    code: constr(pattern=r"^[a-z]{2}\d*$", min_length=3, max_length=5)
    price: float = Field(multiple_of=0.01, ge=0, le=50)
    half: float = Field(default=0, multiple_of=0.5, gt=-5, lt=5)


def _reading_ok(text):
    try:
        Reading.model_validate_json(text)
    except pydantic.ValidationError:
        return False
    value = json.loads(text)  # and exactly, beside pydantic's tolerance: hundredths and halves
    return ((Fraction(repr(value["price"])) * 100).denominator == 1 and
            (Fraction(repr(value.get("half", 0))) * 2).denominator == 1)


def _format(model):
    return {"type": "json_schema", "json_schema": {"name": model.__name__, "schema": model.model_json_schema()}}


def _model_prefix(model, text):
    n, complete, _ = _core.json_schema_prefix(json.dumps(model.model_json_schema()), text.encode())
    return n == len(text.encode()) and not complete


@pytest.mark.parametrize("model,ok", [(Animal, _animal_ok), (Reading, _reading_ok)], ids=["extra", "pattern"])
def test_sampled_answers_validate_with_pydantic(llm, model, ok):
    params = [SamplingParams(temperature=1.0, seed=s, max_tokens=160, response_format=_format(model))
              for s in range(SEEDS)]
    stops = 0
    for o in (out.outputs[0] for out in llm.generate([PROMPT] * SEEDS, params)):
        if o.finish_reason == "stop":
            stops += 1
            assert ok(o.text), o.text
        else:
            assert o.finish_reason == "length" and _model_prefix(model, o.text), o.text
    assert stops >= SEEDS // 4, f"only {stops} of {SEEDS} samples closed their document"
    # The same requests without the schema: no answer validates, so the checks above can fail.
    free = [SamplingParams(temperature=1.0, seed=s, max_tokens=160) for s in range(SEEDS)]
    assert not any(ok(o.outputs[0].text) for o in llm.generate([PROMPT] * SEEDS, free))


@needs_cli
def test_server_response_format_with_these_keywords(server):
    pytest.importorskip("openai")
    client = server.client()
    done = 0
    for model, ok in [(Animal, _animal_ok), (Reading, _reading_ok)]:
        for seed in range(4):
            r = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=160, temperature=1.0, seed=seed,
                                          n=2, extra_body={"response_format": _format(model)})
            for c in r.choices:
                assert ok(c.text) if c.finish_reason == "stop" else _model_prefix(model, c.text), c.text
                done += c.finish_reason == "stop"
            chat = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "JSON"}],
                                                  max_tokens=160, temperature=1.0, seed=seed,
                                                  response_format=_format(model))
            c = chat.choices[0]
            assert ok(c.message.content) if c.finish_reason == "stop" else _model_prefix(model, c.message.content)
            done += c.finish_reason == "stop"
    assert done >= 6
