"""vLLM's min_tokens through every front end at once: `attnzoo serve`'s /v1/completions and /v1/chat/completions
(an extra body field, a 400 naming it past max_tokens or below 0), `attnzoo generate --min-tokens` (and a
checkpoint's generation_config.json min_new_tokens without the flag), Model.generate / Model.chat's
min_new_tokens: the same text from each. The checkpoint is test_serve's tiny random Llama, with an EOS id its
generation_config.json names that the model says fourth, so without a minimum every answer ends after three tokens."""
import json
import shutil
import subprocess

import pytest

pytest.importorskip("torch")
openai = pytest.importorskip("openai")

from attnzoo.model import Model  # noqa: E402
from test_chat_cli import CLI, EOS, QUESTION, needs_cli  # noqa: E402
from test_serve import ServerProcess, checkpoint  # noqa: E402,F401  (checkpoint: its session fixture)

pytestmark = needs_cli
MINIMUM, NEW_TOKENS = 8, 12


@pytest.fixture(scope="module")
def ending_early(checkpoint, tmp_path_factory):  # noqa: F811
    """(directory, the same with min_new_tokens in its generation_config.json, the id that ends answers early)."""
    reference = Model.load(checkpoint)
    said = reference.generate(reference.tokenizer.encode(QUESTION), max_new_tokens=NEW_TOKENS, eos_token_id=[])
    stop_id = said[3]
    assert stop_id not in said[:3]
    dirs = []
    for extra in ({}, {"min_new_tokens": MINIMUM}):
        d = tmp_path_factory.mktemp("min_tokens")
        shutil.copytree(checkpoint, d, dirs_exist_ok=True)
        (d / "generation_config.json").write_text(json.dumps({"eos_token_id": [EOS, stop_id], **extra}))
        dirs.append(str(d))
    return dirs[0], dirs[1], stop_id


@pytest.fixture(scope="module")
def server(ending_early):
    s = ServerProcess(ending_early[0])
    yield s
    assert s.stop() == 0


def _cli(*args):
    return subprocess.run([CLI, "generate", *args], capture_output=True, text=True, timeout=120)


def test_every_front_end_gives_the_same_text_past_the_minimum(ending_early, server):
    plain_dir, defaulted_dir, stop_id = ending_early
    m = Model.load(plain_dir)
    short = m.generate(QUESTION, max_new_tokens=NEW_TOKENS)
    text = m.generate(QUESTION, max_new_tokens=NEW_TOKENS, min_new_tokens=MINIMUM)
    ids = m.generate(m.tokenizer.encode(QUESTION), max_new_tokens=NEW_TOKENS, min_new_tokens=MINIMUM)
    assert len(ids) >= MINIMUM and stop_id not in ids[:MINIMUM] and len(text) > len(short)
    chat = m.chat([{"role": "user", "content": QUESTION}], max_new_tokens=NEW_TOKENS, min_new_tokens=MINIMUM)
    # The checkpoint's min_new_tokens is the default of Model.generate and attnzoo generate alike.
    assert Model.load(defaulted_dir).generate(QUESTION, max_new_tokens=NEW_TOKENS) == text
    for args in (["-m", plain_dir, "--min-tokens", str(MINIMUM)], ["-m", defaulted_dir]):
        r = _cli(*args, "-p", QUESTION, "-n", str(NEW_TOKENS))
        assert r.returncode == 0, r.stderr
        assert r.stdout == text + "\n", args
    r = _cli("-m", plain_dir, "--chat", "-p", QUESTION, "-n", str(NEW_TOKENS), "--min-tokens", str(MINIMUM))
    assert r.returncode == 0 and r.stdout == chat + "\n", r.stderr

    client = server.client()
    c = client.completions.create(model="tiny", prompt=QUESTION, max_tokens=NEW_TOKENS, temperature=0,
                                  extra_body={"min_tokens": MINIMUM})
    assert c.choices[0].text == text and c.usage.completion_tokens == len(ids)
    streamed = client.completions.create(model="tiny", prompt=QUESTION, max_tokens=NEW_TOKENS, temperature=0,
                                         stream=True, extra_body={"min_tokens": MINIMUM})
    assert "".join(chunk.choices[0].text for chunk in streamed) == text
    c = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": QUESTION}],
                                       max_tokens=NEW_TOKENS, temperature=0, extra_body={"min_tokens": MINIMUM})
    assert c.choices[0].message.content == chat
    c = client.completions.create(model="tiny", prompt=QUESTION, max_tokens=NEW_TOKENS, temperature=0)
    assert c.choices[0].text == short


@pytest.mark.parametrize("endpoint, body, message", [
    ("/v1/completions", {"prompt": "hello", "max_tokens": 4, "min_tokens": 5}, "must be <= max_tokens (4), got 5"),
    ("/v1/completions", {"prompt": "hello", "min_tokens": 17}, "must be <= max_tokens (16: the default"),
    ("/v1/completions", {"prompt": "hello", "max_tokens": 4, "min_tokens": -1}, "must be in [0, "),
    ("/v1/completions", {"prompt": "hello", "max_tokens": 4, "min_tokens": "2"}, "must be an integer"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "min_tokens": 9},
     "must be <= max_tokens (3), got 9"),
])
def test_min_tokens_past_its_bounds_is_a_400_naming_it(server, endpoint, body, message):
    status, raw = server.raw("POST", endpoint, json.dumps({"model": "tiny", **body}),
                             {"Content-Type": "application/json"})
    err = json.loads(raw)["error"]
    assert status == 400 and err["param"] == "min_tokens" and message in err["message"], err
    assert server.raw("GET", "/health")[0] == 200


def test_cli_min_tokens_is_checked_by_name(ending_early):
    r = _cli("-m", ending_early[0], "-p", QUESTION, "-n", "4", "--min-tokens", "5")
    assert r.returncode != 0 and "--min-tokens: must be <= -n (4), got 5" in r.stderr, r.stderr
    r = _cli("-m", ending_early[0], "-p", QUESTION, "--min-tokens", "-2")
    assert r.returncode != 0 and "--min-tokens: must be >= 0, got -2" in r.stderr, r.stderr
    r = subprocess.run([CLI, "generate", "--help"], capture_output=True, text=True, timeout=60)
    assert "--min-tokens N" in r.stdout
