"""Section 7 - inside a model: the real checkpoint given with -m DIR, run on the prompt.

Everything here comes from running the model through attnzoo's runtime: Model.trace(ids) returns, for every
softmax layer, the queries and keys exactly as the attention kernel saw them (after q/k norm and RoPE); the
attention maps are their softmax under that layer's mask (attention_maps below, checked against transformers'
output_attentions in the tests). Recurrent layers report their state's norm per head. The memory figure
uses the layers' own CacheSpecs (the formula `attnzoo inspect` prints).
"""
import importlib.util
import os
import zlib

import numpy as np

from .._units import human_parameters
from .page import Section, animated_figure, figure, table
from .svg import (class_grid, esc, human_bytes, human_tokens, legend, legend_html, line_chart, short_label, svg, text,
                  value_grid)

ID = "inside-a-model"
TITLE = "7. Inside a model"

DEFAULT_PROMPT = "The quick brown fox jumps over the lazy dog because the dog was asleep in the warm sun"
MAX_TOKENS = 32        # attention maps are T x T per head: keep the page small
HEADS_SHOWN = 8        # per layer frame
SOFTMAX_KINDS = ("attention", "sliding_attention")
KIND_CLASS = {"attention": "c1", "sliding_attention": "c2"}
OTHER_CLASSES = ("c3", "c4", "c5", "c7", "c6")
CACHE_POINTS = (4096, 131072, 1048576)


# --- the numbers -------------------------------------------------------------------------------------------

def attention_maps(layer):
    """[heads, T, T] float64 attention probabilities of one traced softmax layer (rows: queries, columns: keys;
    zero where the mask hides a key). Applies the layer's scale, softcap, causal/sliding-window mask and sinks
    in the kernels' order: scale, softcap, mask, softmax."""
    q = np.asarray(layer["q"], np.float64)  # [T, H, D]
    k = np.asarray(layer["k"], np.float64)  # [T, Hkv, D]
    T, H, _ = q.shape
    group = H // k.shape[1]
    k = np.repeat(k, group, axis=1)  # query head h reads kv head h // group
    s = np.einsum("ihd,jhd->hij", q, k) * layer["scale"]
    if layer.get("softcap"):
        c = layer["softcap"]
        s = c * np.tanh(s / c)
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    visible = j <= i
    if layer.get("window"):
        visible &= j > i - layer["window"]
    s = np.where(visible[None], s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    sinks = layer.get("sinks")
    if sinks is not None:
        sinks = np.asarray(sinks, np.float64)[:, None, None]
        m = np.maximum(m, sinks)
    e = np.exp(s - m)
    denominator = e.sum(axis=-1, keepdims=True)
    if sinks is not None:
        denominator = denominator + np.exp(sinks - m)
    return e / denominator


def head_statistics(p):
    """Per head: share of attention on the first token (the 'sink'), mean look-back distance in tokens and
    mean entropy (nats), averaged over queries 1..T-1 (query 0 can only see itself)."""
    T = p.shape[-1]
    if T < 2:
        return {"first_token": [], "look_back": [], "entropy": []}
    rows = p[:, 1:, :]
    i = np.arange(1, T)[:, None]
    j = np.arange(T)[None, :]
    first = rows[:, :, 0].mean(axis=1)
    look_back = (rows * (i - j).clip(min=0)).sum(axis=-1).mean(axis=1)
    entropy = -(rows * np.log(np.where(rows > 0, rows, 1.0))).sum(axis=-1).mean(axis=1)
    return {"first_token": first.tolist(), "look_back": look_back.tolist(), "entropy": entropy.tolist()}


def prompt_tokens(model, prompt, max_tokens=MAX_TOKENS):
    """(ids, labels) for the prompt: the directory's tokenizer when it has one, else one id per word (a stable
    hash into the vocabulary), so a bare checkpoint still gets a deterministic prompt."""
    prompt = prompt or DEFAULT_PROMPT
    tok = model.tokenizer
    if tok is not None:
        ids = [int(x) for x in tok.encode(prompt)][:max_tokens]
        labels = [tok.decode([i]).strip() or tok.id_to_token(i) or str(i) for i in ids]
        return np.array(ids, np.int32), labels
    words = prompt.split()[:max_tokens] or ["."]
    ids = [zlib.crc32(w.encode("utf-8")) % model.vocab_size for w in words]
    return np.array(ids, np.int32), words


def memory_breakdown(info):
    """Weights vs per-sequence cache at 4k / 128k / 1M tokens (cache bytes from the layers' CacheSpecs)."""
    # Copies made at load stand in for the mapped pages they came from, which the loader releases.
    weights = (int(info["checkpoint_bytes"]) - int(info["released_weight_bytes"]) + int(info["owned_weight_bytes"]))
    at = {int(t): int(b) for t, b in info["cache_bytes_at"].items()}
    by_kind = {}
    for layer in info["layers"]:
        c = layer["cache"]
        row = by_kind.setdefault(layer["kind"], {"layers": 0, "bytes_per_token": c["bytes_per_token"],
                                                 "fixed_bytes": c["fixed_bytes"], "max_tokens": c["window"]})
        row["layers"] += 1
    return {"weight_bytes": weights, "cache_bytes_at": at, "by_kind": by_kind}


# --- the figures -------------------------------------------------------------------------------------------

def _kind_classes(kinds):
    classes, others = {}, iter(OTHER_CLASSES)
    for kind in kinds:
        if kind not in classes:
            classes[kind] = KIND_CLASS.get(kind) or next(others, "c6")
    return classes


def _pattern_svg(kinds):
    classes = _kind_classes(kinds)
    order = list(classes)
    cell = max(8, min(22, 640 // max(1, len(kinds))))
    cells = [[order.index(k) for k in kinds]]
    body = class_grid(cells, 6, 6, cell, [classes[k] for k in order], titles=dict(enumerate(order)), gap=2)
    for l in range(0, len(kinds), max(1, len(kinds) // 12 or 1)):
        body += text(6 + l * cell + cell / 2, 6 + cell + 12, str(l), "small", "middle")
    body += legend([(classes[k], k) for k in order], 6, 6 + cell + 32)
    return svg(max(6 + len(kinds) * cell + 6, 360), 6 + cell + 40, body, "layer pattern")


def _heads_frame(maps, labels, heads, cell):
    shown = [short_label(s) for s in labels]
    # Room on the left for the longest label at 6 px type (about 3.6 px a character) so none is clipped.
    pad = max(26, int(6 + 3.6 * max((len(s) for s in shown), default=0)))
    size = maps.shape[-1] * cell
    parts = []
    for h in heads:
        grid = value_grid(maps[h], pad, pad, cell, vmax=1.0)
        for i, s in enumerate(shown):
            grid += text(pad - 2, pad + i * cell + cell * 0.8, s, "small", "end", size=6)
        parts.append(f'<div>{svg(pad + size + 4, pad + size + 4, grid, f"head {h}")}'
                     f'<div class="sub">head {h}</div></div>')
    return '<div class="row">' + "".join(parts) + "</div>"


def _state_chart(norms):
    points = [(l, float(np.mean(n))) for l, n in norms]
    series = [{"name": "mean state norm over heads", "cls": "c3", "points": points}]
    markers = [{"x": l, "y": float(np.max(n)), "cls": "c4", "title": f"layer {l}: largest head {np.max(n):.3g}"}
               for l, n in norms]
    chart = line_chart(series, width=560, height=240, xlabel="layer", ylabel="||state|| after the prompt",
                       markers=markers, label="recurrent state norms")
    return chart + legend_html(series + [{"name": "largest head", "cls": "c4"}])


def _memory_chart(mem):
    at = mem["cache_bytes_at"]
    xs = sorted(at)
    series = [{"name": "weights (fixed)", "cls": "c6", "dash": True,
               "points": [(xs[0], mem["weight_bytes"]), (xs[-1], mem["weight_bytes"])]}]
    if all(at[x] > 0 for x in xs):
        series.append({"name": "cache of one sequence", "cls": "c1", "points": [(x, at[x]) for x in xs]})
    chart = line_chart(series, width=560, height=260, xlabel="tokens in the sequence", ylabel="bytes",
                       xlog=True, ylog=True, xfmt=human_tokens, yfmt=human_bytes, xticks=xs,
                       label="weights vs cache")
    return chart + legend_html(series)


# --- the section -------------------------------------------------------------------------------------------

def explain_model(model_dir, prompt):
    """Runs the model in model_dir on the prompt; returns (html, facts, number_of_figures)."""
    from ..model import Model
    model = Model.load(model_dir, dtype="float32")
    info = model.inspect()
    ids, labels = prompt_tokens(model, prompt)
    trace = model.trace(ids)
    kinds = [t["kind"] for t in trace]
    T = len(ids)
    facts = {"architecture": info["architecture"], "tokens": T, "layer_kinds": kinds}
    body = [f"<p><code>{esc(os.path.basename(os.path.normpath(model_dir)))}</code>: {esc(info['architecture'])}, "
            f"{human_parameters(info['parameter_count'])} parameters, {len(kinds)} layers, run on {T} prompt tokens "
            "through attnzoo's runtime while this page was made.</p>"]
    figures = 0

    counts = {k: kinds.count(k) for k in dict.fromkeys(kinds)}
    body.append("<h3>The layer pattern</h3><p>" + ", ".join(f"{n} &times; {esc(k)}" for k, n in counts.items())
                + ".</p>")
    body.append(figure(_pattern_svg(kinds), "each box is a layer; softmax attention keeps a cache that grows "
                                            "with the sequence, the other kinds keep a fixed-size state."))
    figures += 1

    softmax_layers = [l for l, t in enumerate(trace) if "q" in t]
    if softmax_layers:
        frames, captions, stats = [], [], {}
        cell = max(3, min(9, 220 // T))
        for l in softmax_layers:
            maps = attention_maps(trace[l])
            H = maps.shape[0]
            heads = sorted(set(np.linspace(0, H - 1, min(H, HEADS_SHOWN)).round().astype(int).tolist()))
            stats[l] = head_statistics(maps)
            facts.setdefault("max_row_sum_error", 0.0)
            facts["max_row_sum_error"] = max(facts["max_row_sum_error"],
                                             float(np.abs(maps.sum(-1) - 1).max()) if trace[l].get("sinks") is None
                                             else 0.0)
            frames.append(_heads_frame(maps, labels, heads, cell))
            first = np.mean(stats[l]["first_token"]) if stats[l]["first_token"] else 0.0
            shown = (f"heads {', '.join(map(str, heads))} of {H}" if len(heads) == H else
                     f"{len(heads)} evenly spaced heads of {H} ({', '.join(map(str, heads))}; the page draws at most "
                     f"{HEADS_SHOWN} per layer)")
            captions.append(f"layer {l} ({trace[l]['kind']}): {shown}; {first:.0%} of attention on the first token")
        facts["first_token_share"] = {l: float(np.mean(s["first_token"])) if s["first_token"] else None
                                      for l, s in stats.items()}
        facts["look_back_tokens"] = {l: float(np.mean(s["look_back"])) if s["look_back"] else None
                                     for l, s in stats.items()}
        body.append("<h3>Who each head looks at</h3><p>Rows are queries, columns keys; colour is the attention "
                    "probability (the softmax of the layer's own q&middot;k after RoPE, masked as the kernel "
                    "masks). Step through the layers with the slider.</p>")
        body.append(animated_figure(frames, "early layers spread over recent tokens; deeper heads often park "
                                            "most of their weight on the first token (an attention sink).",
                                    captions))
        figures += 1
        if T >= 2:
            series = [{"name": "share on the first token", "cls": "c4",
                       "points": [(l, facts["first_token_share"][l]) for l in softmax_layers]},
                      {"name": "mean look-back / prompt length", "cls": "c1",
                       "points": [(l, facts["look_back_tokens"][l] / (T - 1)) for l in softmax_layers]}]
            chart = line_chart(series, width=560, height=240, xlabel="layer", ylabel="fraction",
                               ylim=(0.0, 1.0), label="attention statistics per layer")
            body.append(figure(chart + legend_html(series), "a layer whose look-back is short attends locally; "
                                                            "one with a high first-token share is mostly idle."))
            figures += 1

    norms = [(l, np.asarray(t["state_norms"])) for l, t in enumerate(trace) if t.get("state_norms") is not None]
    if norms:
        facts["state_norms"] = {l: n.tolist() for l, n in norms}
        body.append("<h3>What the recurrent layers hold</h3><p>The norm of each head's state after the prompt: "
                    "whatever the prompt length, this is all these layers remember.</p>")
        body.append(figure(_state_chart(norms), "the state stays the same size while it absorbs the prompt; its "
                                                "norm shows how much each layer has written into it."))
        figures += 1
    elif len(softmax_layers) < len(kinds):
        body.append("<p class=\"muted\">This model's non-softmax layers do not report state norms.</p>")
    else:
        body.append("<p class=\"muted\">Every layer is softmax attention: there is no recurrent state to show.</p>")

    mem = memory_breakdown(info)
    facts["weight_bytes"] = mem["weight_bytes"]
    facts["cache_bytes_at"] = mem["cache_bytes_at"]
    rows = [[esc(k), str(r["layers"]), human_bytes(r["bytes_per_token"]) + " / token",
             human_bytes(r["fixed_bytes"]), human_tokens(r["max_tokens"]) if r["max_tokens"] else "all"]
            for k, r in mem["by_kind"].items()]
    at = mem["cache_bytes_at"]
    summary = ", ".join(f"{human_tokens(t)}: {human_bytes(at[t])} ({at[t] / mem['weight_bytes']:.2g}&times; the "
                        "weights)" for t in sorted(at))
    body.append("<h3>Where the memory goes</h3><p>Weights: " + human_bytes(mem["weight_bytes"]) +
                f" ({esc(info['weights_dtype'])} projections as held in memory"
                + (f"; the checkpoint stores {esc(info['checkpoint_dtype'])}"
                   if info.get("checkpoint_dtype") and info["checkpoint_dtype"] != info["weights_dtype"] else "")
                + f"). Cache of one sequence (f32) at {summary}."
                "</p>" + table(["layer kind", "layers", "grows", "fixed", "keeps tokens"], rows))
    body.append(figure(_memory_chart(mem), "the weights are paid once; the cache is paid per sequence and, for "
                                           "softmax layers, per token - at long contexts it is the bigger bill."))
    figures += 1
    return "".join(body), facts, figures


def build(ctx):
    if not ctx.model_dir:
        return Section(ID, TITLE, "<p class=\"muted\">This section needs a model: run "
                                  "<code>attnzoo explain -m DIR</code> with a Hugging Face model directory.</p>",
                       {"status": "needs -m"})
    if importlib.util.find_spec("attnzoo.model") is None:
        return Section(ID, TITLE, f"<p class=\"muted\">Model directory {esc(ctx.model_dir)} given, but the model "
                                  "runtime (attnzoo.model) is not part of this build yet.</p>",
                       {"status": "no attnzoo.model"})
    try:
        body, facts, figures = explain_model(ctx.model_dir, ctx.prompt)
    except NotImplementedError as e:
        return Section(ID, TITLE, f"<p class=\"muted\">{esc(e)}.</p>", {"status": "hook not written"})
    except (OSError, RuntimeError, ValueError) as e:  # not a model directory, unsupported architecture ...
        return Section(ID, TITLE, f"<p class=\"muted\">Could not run the model in {esc(ctx.model_dir)}: "
                                  f"{esc(e)}</p>", {"status": "load failed", "error": str(e)})
    return Section(ID, TITLE, body, dict(facts, status="ok"), figures=figures)
