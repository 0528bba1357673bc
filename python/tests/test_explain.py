"""attnzoo explain: the formulas, the paged cache, the tile-grid binding, the sections' facts (numbers drawn
from real kernel runs) and the rendered page in headless Chromium (no console errors, every section drawn)."""
import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import attnzoo
from attnzoo import _core
from attnzoo.explain import memory
from attnzoo.explain import Context, build_page, resolve_sections
from attnzoo.explain.__main__ import main as explain_main
from attnzoo.explain.paging import BlockAllocator, OutOfBlocks, PagedKVCache

SECTION_IDS = ["who-sees-whom", "flash-tiles", "memory-per-token", "paged-attention", "memory-interference",
               "measured", "inside-a-model", "s4-two-views"]


# --- attnzoo.explain.memory -----------------------------------------------------------------------------------

def test_memory_formulas():
    gqa = memory.softmax_kv(8, 128, dtype="bfloat16")
    assert gqa.bytes_per_token == 2 * 8 * 128 * 2 and gqa.bytes_at(1000) == 4096 * 1000
    assert memory.softmax_kv(2, 64, dtype="float32").bytes_per_token == 2 * 2 * 64 * 4
    # the paged part rounds up to whole pool blocks, as the pool holds it
    assert gqa.bytes_at(17, block_tokens=16) == 32 * 4096 and memory.mla_latent(512, 64).bytes_at(1, 16) == 16 * 576 * 2
    swa = memory.softmax_kv(8, 128, window=100)
    assert swa.bytes_at(50) == 50 * 4096 and swa.bytes_at(10_000) == 100 * 4096
    assert memory.mla_latent(512, 64).bytes_at(10) == 10 * 576 * 2
    lin = memory.linear_state(16, 128, 128, conv_channels=6144, conv_width=4)
    assert lin.bytes_at(0) == lin.bytes_at(10 ** 6) == 16 * 128 * 128 * 4 + 6144 * 3 * 4
    # the conv tail is padded to a cache line inside the pool slot (5 * 3 = 15 floats -> 16)
    assert memory.linear_state(1, 4, 4, conv_channels=5, conv_width=4).fixed_bytes == (16 + 16) * 4
    stack = memory.hybrid_stack(lin, gqa, 8)
    assert [s is gqa for s in stack] == [False, False, False, True] * 2
    assert memory.stack_bytes(stack, 100) == 6 * lin.fixed_bytes + 2 * 100 * gqa.bytes_per_token


def test_memory_errors_name_the_argument():
    with pytest.raises(ValueError, match="num_kv_heads"):
        memory.softmax_kv(0, 128)
    with pytest.raises(ValueError, match="dtype"):
        memory.softmax_kv(1, 128, dtype="float13")
    with pytest.raises(ValueError, match="window"):
        memory.softmax_kv(1, 128, window=0)
    with pytest.raises(ValueError, match="tokens"):
        memory.mla_latent(512, 64).bytes_at(-1)


# --- attnzoo.explain.paging -----------------------------------------------------------------------------------

def test_allocator_reference_counts():
    a = BlockAllocator(3, 4)
    b0, b1 = a.allocate(), a.allocate()
    a.share(b0)
    a.release(b0)
    assert a.ref_counts[b0] == 1 and a.used_blocks == 2
    a.release(b1)
    assert a.allocate() == b1  # freed blocks are reused
    a.allocate()
    with pytest.raises(OutOfBlocks):
        a.allocate()
    with pytest.raises(ValueError, match="block_size"):
        BlockAllocator(3, 0)


def test_fork_shares_and_copy_on_write_copies_once():
    rng = np.random.default_rng(0)
    c = PagedKVCache(16, 4, 2, 8)
    c.add_sequence("a")
    prompt = rng.standard_normal((6, 2, 8)).astype(np.float32)
    c.append("a", prompt, prompt * 2)
    c.fork("a", "b")
    assert c.tables["a"] == c.tables["b"] and all(c.allocator.ref_counts[b] == 2 for b in c.tables["a"])
    tok = rng.standard_normal((1, 2, 8)).astype(np.float32)
    c.append("b", tok, tok)
    cows = [e for e in c.events if e.kind == "copy-on-write"]
    assert len(cows) == 1 and c.tables["a"][0] == c.tables["b"][0] and c.tables["a"][1] != c.tables["b"][1]
    kb, vb = c.gather("b")
    np.testing.assert_array_equal(kb[:6], prompt)
    np.testing.assert_array_equal(vb[6], tok[0])
    ka, _ = c.gather("a")
    assert ka.shape[0] == 6  # a is untouched by b's write
    c.append("a", tok, tok)  # a's last block now has refcount 1: written in place
    assert len([e for e in c.events if e.kind == "copy-on-write"]) == 1
    c.free("b")
    assert c.allocator.used_blocks == 2
    with pytest.raises(ValueError, match="seq"):
        c.append("zzz", tok, tok)
    with pytest.raises(ValueError, match="k, v"):
        c.append("a", tok[:, :1], tok[:, :1])


def test_paged_decode_matches_contiguous():
    rng = np.random.default_rng(1)
    c = PagedKVCache(32, 5, 2, 16)
    hist = {}
    c.add_sequence(0)
    k0 = rng.standard_normal((12, 2, 16)).astype(np.float32)
    c.append(0, k0, -k0)
    hist[0] = (k0, -k0)
    for s in (1, 2):
        c.fork(0, s)
        extra = rng.standard_normal((3 * s, 2, 16)).astype(np.float32)
        c.append(s, extra, extra * 0.5)
        hist[s] = (np.concatenate([k0, extra]), np.concatenate([-k0, extra * 0.5]))
    seqs = [0, 1, 2]
    lens = c.seqlens(seqs)
    q = rng.standard_normal((3, 4, 16)).astype(np.float32)
    paged = attnzoo.attention_decode(q, c.k_pages, c.v_pages, lens, block_table=c.block_table(seqs))
    kc = np.zeros((3, int(lens.max()), 2, 16), np.float32)
    vc = np.zeros_like(kc)
    for r in seqs:
        kc[r, :lens[r]], vc[r, :lens[r]] = hist[r]
    np.testing.assert_allclose(paged, attnzoo.attention_decode(q, kc, vc, lens), atol=1e-6)


# --- the tile grid binding -----------------------------------------------------------------------------------

def test_tile_grid_binding_accounts_for_every_visible_pair():
    bm = attnzoo.block_mask(640, block=32, local_blocks=1, global_tokens=32, stride=5, random_blocks=1, seed=4)
    for kw in ({}, {"window": 150}, {"block_mask": bm}):
        g = _core.prefill_tile_grid(640, 640, True, kw.get("window"), kw.get("block_mask"))
        bq, bk, grid = g["block_q"], g["block_k"], g["grid"]
        visible = _core.count_visible_pairs(640, 640, True, kw.get("window") or 0, kw.get("block_mask"))
        assert (grid == 2).sum() * bq * bk <= visible <= ((grid >= 2).sum()) * bq * bk
        assert sorted(g["task_order"]) == list(range(grid.shape[0]))
    with pytest.raises(ValueError, match="Tq"):
        _core.prefill_tile_grid(0, 10)
    with pytest.raises(ValueError, match="window"):
        _core.prefill_tile_grid(10, 10, True, 0)


# --- the page ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def page():
    html, sections = build_page(None, Context(prompt="the cat sat on the mat"))
    return html, {s.id: s for s in sections}


def test_sections_report_numbers_from_the_runs(page):
    html, s = page
    assert list(s) == SECTION_IDS
    v = s["who-sees-whom"].facts
    assert v["causal_visible_pairs"] == 24 * 25 // 2 and v["window_visible_pairs"] == sum(min(i + 1, 6) for i in range(24))
    assert v["gqa_kv_head_of_q_head"] == [0] * 4 + [1] * 4 and v["mqa_kv_head_of_q_head"] == [0] * 8
    assert v["block_sparse_agrees_with_blocks"] and v["linear_causal_agrees"]
    assert v["linear_carried_state_max_abs_diff"] < 1e-5
    t = s["flash-tiles"].facts
    assert t["dense causal"]["computed (full)"] == 16 * 15 // 2 and t["dense causal"]["computed, masked (partial)"] == 16
    assert t["block-sparse"]["visited, skipped"] > 0
    assert t["online_softmax"]["score_readback_max_abs_err"] < 1e-3
    assert all(b >= a - 1e-4 for a, b in zip(t["online_softmax"]["m"], t["online_softmax"]["m"][1:]))  # m never drops
    kinds = s["memory-per-token"].facts["kinds"]
    gqa_4096 = kinds["GQA (8 kv heads)"]["4096"]
    assert gqa_4096["formula"] == memory.softmax_kv(8, 128, dtype="float16").bytes_at(4096) == 2 * 8 * 128 * 2 * 4096
    for name, by_t in kinds.items():
        for T, d in by_t.items():
            assert d["measured"] == d["formula"], (name, T)
    # the page prints the same numbers it measured
    cells = re.findall(r'data-formula="(\d+)" data-measured="(\d+)"', html)
    assert len(cells) == 7 * 3 and all(a == b for a, b in cells)
    p = s["paged-attention"].facts
    assert p["paged_vs_contiguous_max_abs_diff"] < 1e-5 and len(p["copy_on_write"]) >= 2
    assert p["fragmentation"]["paged"] < p["fragmentation"]["contiguous_exact"] < p["fragmentation"]["contiguous_reserved"]
    for name, f in s["memory-interference"].facts.items():
        if isinstance(f, dict):
            assert f["chunk_vs_steps_max_abs_diff"] < 1e-4 and len(f["accuracy"]) == 26
    m = s["measured"].facts
    assert m["Ts"] == [256, 512, 1024, 2048] and all(r["time_ms"] and r["time_ms"] > 0 for r in m["rows"])
    assert m["peak_gflops"] > 0 and s["measured"].facts["seconds"] < 20
    assert s["inside-a-model"].facts["status"] == "needs -m"
    s4 = s["s4-two-views"].facts
    assert s4["kernel_vs_impulse_max_abs_diff"] < 1e-5 and s4["conv_vs_recurrent_rel_rms"] < 1e-5
    assert s4["final_state_rel_rms"] < 1e-5 and s4["conv_ms"] > 0 and s4["recurrent_ms"] > 0
    assert len(html.encode()) < 5 * 1024 * 1024


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _render(path, tmp_path):
    """Runs headless Chromium on a file: returns (DOM after scripts ran, console lines)."""
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0",
           f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", f"file://{path}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout, [line for line in r.stderr.splitlines() if ":CONSOLE" in line]


@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (apt-get install chromium)")
def test_page_renders_without_errors_in_chromium(page, tmp_path):
    html, sections = page
    path = tmp_path / "explain.html"
    path.write_text(html, encoding="utf-8")
    dom, console = _render(path, tmp_path)
    assert console == []
    root = re.search(r"<html[^>]*>", dom).group(0)
    assert 'data-ready="yes"' in root and "data-js-errors" not in root
    for sid in SECTION_IDS:
        assert f'<section id="{sid}"' in dom
    for sid, s in sections.items():
        if sid == "inside-a-model":
            continue
        start = dom.index(f'<section id="{sid}"')
        chunk = dom[start:dom.index("</section>", start)]
        assert chunk.count("<figure") == s.figures >= 1 and chunk.count("<svg") >= 1, sid
        assert re.search(r"<(rect|path|polyline)", chunk), sid
    figures = int(re.search(r'data-figures="(\d+)"', dom).group(1))
    assert figures == sum(s.figures for s in sections.values())
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html


@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (apt-get install chromium)")
def test_error_detection_works(tmp_path, page):
    """The checks above would catch a broken script: a page with the same script plus a failing one."""
    html, _ = page
    bad = html.replace("</body>", "<script>undefinedFunction();</script></body>")
    path = tmp_path / "bad.html"
    path.write_text(bad, encoding="utf-8")
    dom, console = _render(path, tmp_path)
    assert console and "data-js-errors" in re.search(r"<html[^>]*>", dom).group(0)


def test_command_line_writes_a_page(tmp_path, capsys):
    out, facts = tmp_path / "one.html", tmp_path / "facts.json"
    assert explain_main(["--section", "visibility", "--section", "paged", "-o", str(out), "--facts", str(facts)]) == 0
    text = out.read_text()
    assert 'id="who-sees-whom"' in text and 'id="paged-attention"' in text and 'id="measured"' not in text
    assert set(json.loads(facts.read_text())) == {"who-sees-whom", "paged-attention"}
    with pytest.raises(SystemExit):
        explain_main(["--section", "nope", "-o", str(out)])
    with pytest.raises(SystemExit):
        explain_main(["-m", str(tmp_path / "missing"), "-o", str(out)])
    with pytest.raises(ValueError, match="section"):
        resolve_sections(["nope"])



def test_command_line_refuses_a_directory_and_a_prompt_not_utf8_in_one_line(tmp_path, capsys):
    """Both checked before any section runs; argparse's usage and one error naming the flag, no traceback."""
    out = tmp_path / "page.html"
    for args, message in [(["-o", str(tmp_path)], f"-o: {str(tmp_path)!r} is a directory"),
                          (["--facts", str(tmp_path), "-o", str(out)], f"--facts: {str(tmp_path)!r} is a directory"),
                          # argv as Python decodes the bytes ff fe (surrogateescape)
                          (["--prompt", "\udcff\udcfe bad", "-o", str(out)], "--prompt: not valid UTF-8 (byte 0)")]:
        with pytest.raises(SystemExit) as e:
            explain_main(["--section", "visibility", *args])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert f"attnzoo explain: error: {message}" in err, err
    assert not out.exists()

def test_model_section_without_runtime_says_so(tmp_path):
    from attnzoo.explain import inside_model
    s = inside_model.build(Context(model_dir=str(tmp_path)))
    assert s.facts["status"] in ("no attnzoo.model", "hook not written", "ok", "load failed")
    assert str(tmp_path) in s.body or s.facts["status"] != "no attnzoo.model"
