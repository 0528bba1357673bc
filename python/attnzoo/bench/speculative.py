"""`attnzoo bench model --speculative ngram|draft`: what exact speculative decoding buys on a checkpoint.

Greedy generation of the same continuation twice through the C++ loop, plainly and with speculation: decode
tokens/s of each, the speedup, the acceptance rate (guesses kept / guesses verified) and the mean acceptance
length (tokens per verification pass, vLLM's definition), and whether the two outputs are identical (they must
be: greedy speculation changes the cost, never the tokens). The prompt is a summarise-this-text request in the checkpoint's
chat template (the summary repeats phrases of the text, which prompt lookup finds); without a tokenizer, random
ids repeated.
"""
import time

import numpy as np

from .. import _core
from ..generate import _eos_ids

# A passage to summarise: names and phrases a summary repeats, as real prompt-lookup workloads (RAG, editing,
# summaries) do.
SUMMARISE_TEXT = (
    "The Rhine is one of the major rivers of Europe. It begins in the Swiss Alps, flows through Lake Constance, "
    "forms part of the border between Switzerland and Germany, and then between France and Germany, before it "
    "crosses the Netherlands and reaches the North Sea near Rotterdam. The Rhine is about 1,230 kilometres long. "
    "For centuries the Rhine has been an important trade route: barges carry coal, grain, chemicals and containers "
    "between the port of Rotterdam and the industrial cities of Germany such as Duisburg, Cologne and Mannheim. "
    "The Rhine valley between Bingen and Koblenz, with its castles and vineyards, is a UNESCO World Heritage Site. "
    "In 1986 a fire at a chemical plant near Basel polluted the Rhine and killed much of its fish; since then the "
    "countries along the Rhine have worked together to clean the river, and salmon have returned to the Rhine."
)


def summarise_request():
    return f"Summarise this text in a few sentences.\n\n{SUMMARISE_TEXT}"


def _ids(model, rng):
    """The summarise request in the checkpoint's chat template (plain text without one)."""
    tok = model.tokenizer
    if tok is not None:
        try:
            ids = model.apply_chat_template([{"role": "user", "content": summarise_request()}],
                                            add_generation_prompt=True, tokenize=True)
        except (ValueError, RuntimeError):
            ids = tok.encode(summarise_request() + "\n\nSummary:")
        return np.asarray(ids, dtype=np.int32)
    part = rng.integers(model.vocab_size, size=48)
    return np.concatenate([part, part]).astype(np.int32)


def _run(model, ids, gen, eos=(), **spec):
    t0 = time.perf_counter()
    out = _core.generate(model._core, ids, None, 0.0, 0, 1.0, 0.0, 1.0, 0.0, 0.0, 0, gen, sorted(eos), [], None,
                         **spec)
    out["wall_seconds"] = time.perf_counter() - t0
    return out


def speculative_row(model, method, num_speculative_tokens=4, draft_model=None, prompt_lookup_min=1,
                    prompt_lookup_max=3, gen=128, seed=0, checkpoint_each_token=False, prompt_ids=None):
    """Plain against speculative greedy decoding of `gen` tokens; returns the row `bench model` reports.

    draft_model: an attnzoo Model (or directory) sharing the tokenizer, for method "draft".
    checkpoint_each_token: models with state layers checkpoint their state after every verified token instead of
    recomputing the kept tokens after a rejection (the rollback alternative, for measuring it).
    prompt_ids: the prompt instead of the summarise request.
    """
    from ..model import Model
    if method not in ("ngram", "draft"):
        raise ValueError(f"speculative: expected 'ngram' or 'draft', got {method!r}")
    if method == "draft" and draft_model is None:
        raise ValueError("draft_model: the 'draft' method needs a draft model sharing the tokenizer")
    if draft_model is not None and not isinstance(draft_model, Model):
        draft_model = Model.load(draft_model)
    rng = np.random.default_rng(seed)
    ids = np.asarray(prompt_ids, dtype=np.int32) if prompt_ids is not None else _ids(model, rng)
    max_pos = model.inspect()["max_position_embeddings"]
    if max_pos and len(ids) + gen > max_pos:
        raise ValueError(f"speculative: the prompt ({len(ids)} tokens) + gen ({gen}) exceed the model's "
                         f"max_position_embeddings ({max_pos}); pass prompt_ids or a smaller gen")
    spec = dict(speculative=method, num_speculative_tokens=int(num_speculative_tokens),
                prompt_lookup_min=int(prompt_lookup_min), prompt_lookup_max=int(prompt_lookup_max),
                draft_model=draft_model._core if draft_model is not None else None,
                checkpoint_each_token=bool(checkpoint_each_token))
    _run(model, ids[:8], 4)  # warm-up: every weight page touched once
    if draft_model is not None:
        _run(draft_model, ids[:8], 4)
    # The answer ends at the checkpoint's EOS (the summary, not what a model rambles on with after it).
    eos = _eos_ids(model, model.tokenizer, None) if model.tokenizer is not None else set()
    plain = _run(model, ids, gen, eos)
    fast = _run(model, ids, gen, eos, **spec)
    n_plain, n_fast = len(plain["tokens"]), len(fast["tokens"])
    plain_rate = (n_plain - 1) / plain["decode_seconds"] if plain["decode_seconds"] > 0 else 0.0
    fast_rate = (n_fast - 1) / fast["decode_seconds"] if fast["decode_seconds"] > 0 else 0.0
    drafts, proposed, accepted = fast["num_drafts"], fast["num_draft_tokens"], fast["num_accepted_tokens"]
    return {
        "method": method, "num_speculative_tokens": int(num_speculative_tokens),
        "prompt_lookup": [int(prompt_lookup_min), int(prompt_lookup_max)] if method == "ngram" else None,
        "draft_model": (draft_model.inspect()["architecture"] if draft_model is not None else None),
        "prompt_tokens": int(len(ids)), "tokens": n_fast, "checkpoint_each_token": bool(checkpoint_each_token),
        "plain_tokens_per_s": plain_rate, "speculative_tokens_per_s": fast_rate,
        "speedup": fast_rate / plain_rate if plain_rate > 0 else 0.0,
        "forward_passes": int(fast["decode_steps"]), "plain_forward_passes": int(plain["decode_steps"]),
        "num_drafts": int(drafts), "num_draft_tokens": int(proposed), "num_accepted_tokens": int(accepted),
        "acceptance_rate": accepted / proposed if proposed else 0.0,
        "mean_acceptance_length": 1.0 + accepted / drafts if drafts else 0.0,
        "identical": list(plain["tokens"]) == list(fast["tokens"]),
    }


def format_row(r):
    what = (f"ngram (prompt lookup {r['prompt_lookup'][0]}..{r['prompt_lookup'][1]})" if r["method"] == "ngram"
            else f"draft model ({r['draft_model']})")
    return (f"speculative {what}, k {r['num_speculative_tokens']}, {r['tokens']} greedy tokens after a "
            f"{r['prompt_tokens']}-token prompt:\n"
            f"  plain {r['plain_tokens_per_s']:8.1f} tok/s   speculative {r['speculative_tokens_per_s']:8.1f} tok/s   "
            f"speedup {r['speedup']:.2f}x   acceptance {r['acceptance_rate']:.1%} "
            f"({r['num_accepted_tokens']} of {r['num_draft_tokens']})   mean acceptance length "
            f"{r['mean_acceptance_length']:.2f}   passes {r['forward_passes']} vs {r['plain_forward_passes']}   "
            f"output {'identical' if r['identical'] else 'DIFFERENT'}")
