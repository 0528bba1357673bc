"""Explainer section 7 (inside a model) on tiny random transformers checkpoints: the attention maps drawn from
Model.trace equal transformers' output_attentions (eager), the memory figures use the model's CacheSpecs,
and the section renders."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from attnzoo.explain import Context  # noqa: E402
from attnzoo.explain import inside_model  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 200
PROMPT = "the cat sat on the mat and then the cat saw a dog run past the door of the old house"


def _config(kind):
    common = dict(vocab_size=VOCAB, num_hidden_layers=3, max_position_embeddings=128, rms_norm_eps=1e-5,
                  initializer_range=0.2)
    if kind == "llama":
        return transformers.LlamaConfig(hidden_size=64, intermediate_size=96, num_attention_heads=4,
                                        num_key_value_heads=2, **common)
    if kind == "qwen3":
        return transformers.Qwen3Config(hidden_size=64, intermediate_size=96, num_attention_heads=4,
                                        num_key_value_heads=1, head_dim=32, **common)
    if kind == "mistral_swa":
        return transformers.MistralConfig(hidden_size=64, intermediate_size=96, num_attention_heads=4,
                                          num_key_value_heads=2, sliding_window=5, **common)
    raise ValueError(kind)


@pytest.fixture(scope="module", params=["llama", "qwen3", "mistral_swa"])
def case(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    torch.manual_seed(sum(map(ord, request.param)))
    model = transformers.AutoModelForCausalLM.from_config(_config(request.param), attn_implementation="eager")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:  # norms away from 1 so q/k norms matter
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
    model.save_pretrained(directory, safe_serialization=True)
    return request.param, str(directory), model.eval()


def test_attention_maps_match_transformers(case):
    kind, directory, ref = case
    m = Model.load(directory)
    ids, labels = inside_model.prompt_tokens(m, PROMPT)
    assert len(ids) == len(labels) == len(PROMPT.split())
    trace = m.trace(ids)
    with torch.no_grad():
        out = ref(torch.from_numpy(ids.astype(np.int64))[None], output_attentions=True)
    assert len(trace) == len(out.attentions) == 3
    for layer, want in zip(trace, out.attentions):
        assert layer["kind"] == ("sliding_attention" if kind == "mistral_swa" else "attention")
        got = inside_model.attention_maps(layer)
        want = want[0].double().numpy()
        assert got.shape == want.shape == (4, len(ids), len(ids))
        assert np.max(np.abs(got - want)) <= 1e-5
        assert want.std() > 0.01  # the maps are not trivially uniform
    if kind == "mistral_swa":  # the window really hid old keys
        assert np.all(inside_model.attention_maps(trace[0])[:, 10, :6] == 0)


def test_trace_shapes_and_errors(case):
    kind, directory, _ = case
    m = Model.load(directory)
    info = m.inspect()
    layer = m.trace(np.array([1, 2, 3], np.int32))[0]
    assert layer["q"].shape == (3, info["num_attention_heads"], info["head_dim"])
    assert layer["k"].shape == (3, info["num_key_value_heads"], info["head_dim"])
    assert layer["scale"] == pytest.approx(info["head_dim"] ** -0.5)
    assert layer["sinks"] is None and layer["softcap"] == 0
    with pytest.raises(ValueError, match="ids"):
        m.trace(np.array([VOCAB], np.int32))
    with pytest.raises(ValueError, match="ids"):
        m.trace(np.array([], np.int32))


def test_head_statistics_on_known_maps():
    p = np.zeros((2, 3, 3))
    p[0, :, 0] = 1.0                     # head 0: everything on the first token
    p[1] = np.eye(3)                     # head 1: each query on itself
    s = inside_model.head_statistics(p)
    assert s["first_token"] == [1.0, 0.0]
    assert s["look_back"] == [1.5, 0.0]  # queries 1 and 2 look back 1 and 2 tokens
    assert s["entropy"] == [0.0, 0.0]


def test_section_renders_with_memory_facts(case):
    kind, directory, _ = case
    section = inside_model.build(Context(model_dir=directory, prompt=PROMPT))
    f = section.facts
    assert f["status"] == "ok", section.body
    info = Model.load(directory).inspect()
    assert f["layer_kinds"] == [l["kind"] for l in info["layers"]]
    assert f["cache_bytes_at"] == {int(t): b for t, b in info["cache_bytes_at"].items()}
    assert f["weight_bytes"] == info["checkpoint_bytes"]
    assert f["max_row_sum_error"] < 1e-9
    assert set(f["first_token_share"]) == {0, 1, 2}
    assert section.figures == 4 and section.body.count("<svg") >= 3 + 3 * 4 // 2
    if kind == "mistral_swa":  # a window keeps the cache flat past its size
        at = f["cache_bytes_at"]
        assert at[4096] == at[1048576]
    else:
        assert f["cache_bytes_at"][1048576] > f["cache_bytes_at"][4096]


def test_section_reports_a_directory_it_cannot_load(tmp_path):
    section = inside_model.build(Context(model_dir=str(tmp_path)))
    assert section.facts["status"] == "load failed"
    assert str(tmp_path) in section.body
