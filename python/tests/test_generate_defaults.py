"""The three generation entry points (the CLI, Model.generate, attnzoo.generate.generate) resolve sampling the
same way (the checkpoint's generation_config.json, then the caller's values), and Model.generate takes a list of
prompts, each answered as it would be alone (the reference: the same call made per prompt)."""
import json
import os
import shutil
import subprocess

import pytest

pytest.importorskip("torch")
pytest.importorskip("tokenizers")
pytest.importorskip("transformers")

import attnzoo  # noqa: E402
from attnzoo.generate import generate, sampling_params  # noqa: E402
from test_cli import CLI, write_tiny_model  # noqa: E402

pytestmark = pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"attnzoo CLI not built at {CLI}")


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    greedy = write_tiny_model(str(tmp_path_factory.mktemp("greedy_model")))
    sampling = str(tmp_path_factory.mktemp("sampling_model"))
    shutil.copytree(greedy, sampling, dirs_exist_ok=True)
    with open(os.path.join(sampling, "generation_config.json"), "w") as f:
        json.dump({"do_sample": True, "temperature": 0.9, "top_k": 7, "top_p": 0.95, "eos_token_id": 2}, f)
    return greedy, sampling


def cli(model, *args):
    r = subprocess.run([CLI, "generate", "-m", model, "-p", "hello world", "-n", "8", *args], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.rstrip("\n"), r.stderr


def test_defaults_come_from_generation_config(dirs):
    greedy, sampling = (attnzoo.Model.load(d) for d in dirs)
    assert sampling_params(greedy)["temperature"] == 0.0  # transformers: greedy unless do_sample
    s = sampling_params(sampling)
    assert (s["temperature"], s["top_k"], s["top_p"]) == (pytest.approx(0.9), 7, pytest.approx(0.95))
    assert sampling_params(sampling, do_sample=False)["temperature"] == 0.0
    assert sampling_params(sampling, temperature=0)["temperature"] == 0.0
    assert sampling_params(greedy, temperature=0.5)["temperature"] == pytest.approx(0.5)  # a temperature samples
    assert sampling_params(greedy, do_sample=True)["temperature"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="top_p"):
        sampling_params(greedy, top_p=0)


def test_cli_and_python_draw_the_same_tokens(dirs):
    for d in dirs:
        m = attnzoo.Model.load(d)
        text, summary = cli(d, "--seed", "3")
        assert text == m.generate("hello world", max_new_tokens=8, seed=3)
        assert text == generate(m, m.tokenizer, "hello world", max_new_tokens=8, seed=3)
        assert ("temperature 0.9 top_k 7" in summary) == (d == dirs[1])
    sampled = attnzoo.Model.load(dirs[1])
    greedy_text, _ = cli(dirs[1], "--temp", "0")
    assert greedy_text == sampled.generate("hello world", max_new_tokens=8, do_sample=False)
    assert greedy_text == attnzoo.Model.load(dirs[0]).generate("hello world", max_new_tokens=8)


@pytest.mark.parametrize("kw", [{"seed": 0}, {"temperature": 1.0, "top_k": 20, "seed": 5}])
def test_a_list_of_prompts_answers_each_as_alone(dirs, kw):
    m = attnzoo.Model.load(dirs[1])
    texts = ["hello world", "the quick brown fox", "a"]
    assert m.generate(texts, max_new_tokens=10, **kw) == [m.generate(t, max_new_tokens=10, **kw) for t in texts]
    ids = [[5, 6, 7], [9, 10, 11, 12, 13], [4]]
    assert m.generate(ids, max_new_tokens=10, **kw) == [m.generate(p, max_new_tokens=10, **kw) for p in ids]


def test_list_of_prompts_errors_name_the_argument(dirs):
    m = attnzoo.Model.load(dirs[0])
    with pytest.raises(ValueError, match="stream"):
        m.generate(["a", "b"], stream=print)
    with pytest.raises(ValueError, match=r"prompt_or_ids\[1\]: is empty"):
        m.generate([[1, 2], []])
    with pytest.raises(ValueError, match=r"prompt_or_ids\[0\]: has 300 tokens"):
        m.generate([[5] * 300])
    with pytest.raises(TypeError, match="num_beams"):
        m.generate("hello", num_beams=4)
