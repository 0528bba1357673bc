"""Sampling and text generation.

``sample`` draws token ids from logits with Hugging Face's processing order (repetition penalty, presence /
frequency penalties, temperature, top-k, top-p, min-p); ``temperature=0`` is greedy. The repetition penalty counts
the prompt and the generated tokens, presence / frequency the generated ones only (vLLM's rule). A seed gives the same
tokens on every machine: the i-th token of a sample is decided by a draw keyed by (seed, i), attnzoo's own.

``generate`` runs a model through its Python API (``model.new_sequence()``, ``model.forward(ids, seq=state)`` ->
logits ``[T, vocab]``): the prompt is prefilled once, then each sampled token is fed back alone, reusing the
sequence's cache. Ids in -> new ids out; text in -> new text out.
"""
import secrets

import numpy as np

from . import _core
from ._arrays import _is_torch, as_input, as_int, to_int32

__all__ = ["sample", "Sampler", "generate", "generate_batch", "sampling_params"]


def _request_seed(seed):
    """None (or vLLM's -1) draws a fresh 64-bit seed, so unseeded runs differ as vLLM's and OpenAI's do; a seed
    given is kept, and with it the keyed draws that make a run reproducible."""
    seed = None if seed is None else as_int(seed, "seed", -1, 2 ** 64 - 1)
    return secrets.randbits(64) if seed is None or seed == -1 else seed


def _params(temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty, seed):
    if temperature is None:
        raise ValueError("temperature: must be a number >= 0 (0 = greedy), got None")
    if top_k is None:
        top_k = 0
    seed = _request_seed(seed)
    return dict(temperature=float(temperature), top_k=int(top_k), top_p=float(top_p), min_p=float(min_p),
                repetition_penalty=float(repetition_penalty), presence_penalty=float(presence_penalty),
                frequency_penalty=float(frequency_penalty), seed=int(seed))


def _f32_rows(logits):
    x = as_input(logits, "logits")
    if _is_torch(x):
        import torch
        if not x.is_floating_point():
            raise TypeError(f"logits: expected a floating-point tensor, got {x.dtype}")
        return x.to(torch.float32).contiguous().numpy()
    x = np.asarray(x)
    if x.dtype.kind != "f":
        raise TypeError(f"logits: expected a floating-point array, got {x.dtype}")
    return np.ascontiguousarray(x, dtype=np.float32)


def _ids(ids, name):
    if ids is None:
        return None
    if _is_torch(ids):
        ids = ids.detach().cpu().numpy()
    ids = np.asarray(ids)
    if ids.size == 0:
        return np.zeros(0, dtype=np.int32)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected integer token ids, got {ids.dtype}")
    if ids.ndim != 1:
        raise ValueError(f"{name}: must be 1-D, got shape {ids.shape}")
    return to_int32(ids, name)


def sample(logits, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0, presence_penalty=0.0,
           frequency_penalty=0.0, context_ids=None, seed=0, prompt_length=0):
    """Token ids from logits ``[vocab]`` (returns an int) or ``[batch, vocab]`` (returns int32 ids ``[batch]``,
    numpy or torch like the input).

    ``context_ids``: the tokens seen so far, for the penalties: one sequence (shared by every row) or, for a
    batch, a list with one sequence per row; the first ``prompt_length`` of each are the prompt's, which count for
    the repetition penalty only (presence / frequency count generated tokens, as vLLM). Rows draw in order from
    one generator seeded by ``seed`` (None: a fresh one).
    """
    p = _params(temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty, seed)
    x = _f32_rows(logits)
    ctx, offsets = None, None
    if context_ids is not None:
        per_row = x.ndim == 2 and isinstance(context_ids, (list, tuple)) and len(context_ids) > 0 and \
            not np.isscalar(context_ids[0])
        if per_row:
            if len(context_ids) != x.shape[0]:
                raise ValueError(f"context_ids: has {len(context_ids)} sequences for {x.shape[0]} rows of logits")
            rows = [_ids(c, "context_ids") for c in context_ids]
            offsets = np.zeros(len(rows) + 1, dtype=np.int32)
            offsets[1:] = np.cumsum([len(r) for r in rows])
            ctx = np.concatenate(rows).astype(np.int32) if offsets[-1] else np.zeros(0, dtype=np.int32)
        else:
            ctx = _ids(context_ids, "context_ids")
    ids = _core.sample(x, p["temperature"], p["top_k"], p["top_p"], p["min_p"], p["repetition_penalty"],
                       p["presence_penalty"], p["frequency_penalty"], ctx, offsets, p["seed"],
                       as_int(prompt_length, "prompt_length", 0))
    if x.ndim == 1:
        return int(ids[0])
    if _is_torch(logits):
        import torch
        return torch.from_numpy(np.array(ids))
    return np.array(ids)


class Sampler:
    """A sampler whose generator advances from call to call: the draws of one generation. The first
    ``prompt_length`` ids of each context are the prompt's (the repetition penalty's only, as in ``sample``)."""

    def __init__(self, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0,
                 presence_penalty=0.0, frequency_penalty=0.0, seed=0, prompt_length=0):
        self._s = _core.Sampler(**_params(temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty,
                                          frequency_penalty, seed),
                                prompt_length=as_int(prompt_length, "prompt_length", 0))

    def sample(self, logits, context_ids=None):
        """One token id from one row of logits ``[vocab]``."""
        x = _f32_rows(logits)
        return self._s.sample(x, _ids(context_ids, "context_ids"))


class _TextStream:
    """Token ids to text, piece by piece, never splitting a UTF-8 character.

    Uses the tokenizer's own streaming decoder when it has one; otherwise decodes the generated ids and emits the
    growth, holding back a trailing U+FFFD (a character whose bytes have not all arrived)."""

    def __init__(self, tokenizer, skip_special_tokens=True):
        self._tok = tokenizer
        self._skip = skip_special_tokens
        self._stream = None
        for name in ("stream", "stream_decoder", "decode_stream"):
            if hasattr(tokenizer, name):
                try:
                    self._stream = getattr(tokenizer, name)(skip_special_tokens=skip_special_tokens)
                except TypeError:
                    self._stream = getattr(tokenizer, name)()
                break
        self._ids, self._emitted = [], ""

    def _decode(self):
        try:
            return self._tok.decode(self._ids, skip_special_tokens=self._skip)
        except TypeError:
            return self._tok.decode(self._ids)

    def push(self, token):
        if self._stream is not None:
            return self._stream.push(token)
        self._ids.append(int(token))
        text = self._decode()
        if text.endswith("\ufffd") or not text.startswith(self._emitted):
            return ""
        piece, self._emitted = text[len(self._emitted):], text
        return piece

    def flush(self):
        if self._stream is not None:
            for name in ("finish", "flush"):
                if hasattr(self._stream, name):
                    return getattr(self._stream, name)()
            return ""
        text = self._decode()
        piece = text[len(self._emitted):] if text.startswith(self._emitted) else ""
        self._emitted = text
        return piece


def _eos_ids(model, tokenizer, eos_token_id, end_of_turn=()):
    """eos_token_id when given; else the one rule every attnzoo front end follows (_core.default_eos_ids): every id
    the checkpoint's configs, the tokenizer and, for a chat, the template's end of turn call an end."""
    if eos_token_id is not None:
        return {int(eos_token_id)} if np.isscalar(eos_token_id) else {int(i) for i in eos_token_id}
    native = getattr(tokenizer, "_native", None)
    source = getattr(model, "_source", None)
    for attr in ("directory", "path", "dir", "model_dir"):  # any object with the model API that names its files
        if not isinstance(source, str):
            source = getattr(model, attr, None)
    ids = {int(i) for i in end_of_turn}
    if isinstance(source, str):
        ids |= set(_core.default_eos_ids(source, native, []))
    else:
        ids |= {int(i) for i in getattr(model, "eos_token_ids", None) or []}
    if native is None and tokenizer is not None:  # a tokenizer from elsewhere (transformers, tokenizers)
        ids |= {int(i) for i in getattr(tokenizer, "eos_token_ids", None) or []}
    return ids


def _max_positions(model):
    """The model's max_position_embeddings when it reports one (attnzoo models do), else 0: no limit."""
    inspect = getattr(model, "inspect", None)
    try:
        info = inspect() if callable(inspect) else None
    except Exception:  # noqa: BLE001  any object with the model API: no report, no limit
        return 0
    return int(info.get("max_position_embeddings", 0) or 0) if isinstance(info, dict) else 0


def _forward_last(model):
    """model.forward returning at least the last row; asks for only that row when the model can say so."""
    import inspect
    try:
        last_only = "last_only" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        last_only = False
    if last_only:
        return lambda ids, seq: model.forward(ids, seq=seq, last_only=True)
    return lambda ids, seq: model.forward(ids, seq=seq)


def _last_row(logits):
    if _is_torch(logits):
        return logits[-1].detach().to("cpu").float().contiguous().numpy()
    x = np.asarray(logits)
    return np.ascontiguousarray(x[-1] if x.ndim == 2 else x, dtype=np.float32)


def _native_parts(model, tokenizer, stream):
    """(core model, core tokenizer) when the C++ loop can run this generation, else None."""
    core_model = getattr(model, "_core", None)
    if not isinstance(core_model, getattr(_core, "Model", ())):
        return None
    if tokenizer is None:
        return None if stream is not None else (core_model, None)
    core_tok = getattr(tokenizer, "_native", None)
    if not isinstance(core_tok, getattr(_core, "Tokenizer", ())):
        return None
    return core_model, core_tok


def _model_path(model):
    """Where the model's files are, as given to load ("" when it has none): a directory's generation_config.json
    seeds the sampling (a GGUF file has none, as for `attnzoo generate -m FILE`)."""
    for attr in ("path", "directory", "dir", "model_dir"):
        d = getattr(model, attr, None)
        if isinstance(d, str):
            return d
    return ""


def sampling_params(model, do_sample=None, temperature=None, top_k=None, top_p=None, min_p=None,
                    repetition_penalty=None):
    """The sampling values a generation runs with, as every front end resolves them (the CLI included): the
    checkpoint's generation_config.json (transformers' defaults where it says nothing: greedy, top_k 50), the
    arguments given winning. Sampling happens when do_sample=True, or, with do_sample None, when temperature > 0
    is given or the checkpoint samples and no temperature is given; do_sample=False is greedy whatever else is
    given (as transformers). Returns a dict of temperature (0: greedy), top_k, top_p, min_p, repetition_penalty."""
    return _core.resolve_sampling(_model_path(model), None if do_sample is None else bool(do_sample),
                                  None if temperature is None else float(temperature),
                                  None if top_k is None else int(top_k), None if top_p is None else float(top_p),
                                  None if min_p is None else float(min_p),
                                  None if repetition_penalty is None else float(repetition_penalty))


def _min_new_tokens(model, min_new_tokens, prompt_tokens, max_new_tokens):
    """The new tokens before which no EOS is drawn for a prompt of ``prompt_tokens``, as transformers reads them:
    ``min_new_tokens`` when given, else the checkpoint's generation_config.json min_new_tokens, else its min_length
    (which counts the prompt) less the prompt; at most ``max_new_tokens`` (which still ends generation first)."""
    if min_new_tokens is not None and (isinstance(min_new_tokens, bool) or int(min_new_tokens) != min_new_tokens):
        raise ValueError(f"min_new_tokens: must be an integer >= 0, got {min_new_tokens!r}")
    n = _core.resolve_min_new_tokens(_model_path(model), None if min_new_tokens is None else int(min_new_tokens),
                                     int(prompt_tokens))
    return min(n, max(int(max_new_tokens), 0))


def is_batch(prompts):
    """A list (or tuple, or 2-D array) of prompts rather than one prompt: texts, or sequences of ids."""
    if isinstance(prompts, (list, tuple)):
        first = prompts[0] if prompts else None
        return isinstance(first, (str, list, tuple)) or getattr(first, "ndim", 0) >= 1
    return getattr(prompts, "ndim", 1) == 2


def _prompt_ids(tokenizer, prompt, name):
    if isinstance(prompt, str):
        if tokenizer is None:
            raise ValueError("tokenizer: needed to encode a text prompt")
        return [int(i) for i in tokenizer.encode(prompt)]
    arr = _ids(prompt, name)
    return [] if arr is None else [int(i) for i in arr]


def _checked_prompt(model, tokenizer, prompt, name):
    ids = _prompt_ids(tokenizer, prompt, name)
    if not ids:
        raise ValueError(f"{name}: is empty: generation needs at least one token")
    max_positions = _max_positions(model)
    if max_positions and len(ids) > max_positions:
        raise ValueError(f"{name}: has {len(ids)} tokens, more than the model's {max_positions} positions "
                         f"({_core.context_origin})")
    return ids


def _run_settings(model, tokenizer, max_new_tokens, stop, do_sample, temperature, top_k, top_p, min_p,
                  repetition_penalty, presence_penalty, frequency_penalty, seed):
    """(stop strings, sampler parameters) of one generate / generate_batch call, its arguments checked."""
    if int(max_new_tokens) < 0:
        raise ValueError(f"max_new_tokens: must be >= 0, got {max_new_tokens}")
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if stops and tokenizer is None:
        raise ValueError("stop: stop strings need a tokenizer to decode the text")
    s = sampling_params(model, do_sample, temperature, top_k, top_p, min_p, repetition_penalty)
    return stops, _params(s["temperature"], s["top_k"], s["top_p"], s["min_p"], s["repetition_penalty"],
                          presence_penalty, frequency_penalty, seed)


def generate_batch(model, tokenizer, prompts, max_new_tokens=128, do_sample=None, temperature=None, top_k=None,
                   top_p=None, min_p=None, repetition_penalty=None, presence_penalty=0.0, frequency_penalty=0.0,
                   seed=None, stop=None, eos_token_id=None, response_format=None, min_new_tokens=None):
    """Several prompts at once through the serving engine (continuous batching over the ragged batch): one result
    per prompt, in order, each what ``generate`` returns for that prompt alone with the same arguments (text for a
    text prompt, new ids for ids). ``model``: an attnzoo Model. ``response_format``: as SamplingParams takes it
    ("json_object", {"type": "json_schema", "json_schema": {"schema": ...}}): JSON mode / structured outputs."""
    import dataclasses
    from .engine import Engine, SamplingParams
    prompts = list(prompts)
    all_ids = [_checked_prompt(model, tokenizer, p, f"prompt_or_ids[{i}]") for i, p in enumerate(prompts)]
    stops, p = _run_settings(model, tokenizer, max_new_tokens, stop, do_sample, temperature, top_k, top_p, min_p,
                             repetition_penalty, presence_penalty, frequency_penalty, seed)
    # Per prompt: a checkpoint's min_length counts the prompt.
    minimums = [_min_new_tokens(model, min_new_tokens, len(ids), max_new_tokens) for ids in all_ids]
    if int(max_new_tokens) == 0:
        return ["" if isinstance(q, str) else [] for q in prompts]
    params = SamplingParams(max_tokens=int(max_new_tokens), stop=stops, response_format=response_format or "text",
                            **p)
    params._core_kwargs(raise_small_temperature=False)  # a bad response_format is a ValueError before the engine starts
    with Engine(model, eos_token_ids=eos_token_id, tokenizer=tokenizer) as engine:
        streams = [engine.add_request(ids, dataclasses.replace(params, min_tokens=m), _as_given=True)
                   for ids, m in zip(all_ids, minimums)]
        outs = []
        for stream in streams:
            ids, text, error = [], "", None
            for out in stream:
                for sample in out["samples"]:
                    ids += sample["token_ids"]
                    text += sample["text"]
                error = out["error"] or error
            if error:
                raise RuntimeError(f"prompt_or_ids[{len(outs)}]: {error}")
            outs.append((ids, text))
    return [text if isinstance(q, str) else ids for q, (ids, text) in zip(prompts, outs)]


def _speculative_args(config):
    """vLLM's speculative_config dict as _core.generate's keyword arguments ({} when off)."""
    if not config:
        return {}
    unknown = set(config) - {"method", "num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min", "model"}
    if unknown:
        raise ValueError(f"speculative_config: unknown keys {sorted(unknown)}")
    draft = config.get("model")
    if draft is not None and not isinstance(getattr(draft, "_core", None), getattr(_core, "Model", ())):
        raise ValueError("speculative_config: 'model' must be a loaded attnzoo Model (the draft)")
    return dict(speculative=str(config.get("method", "none")),
                num_speculative_tokens=int(config.get("num_speculative_tokens", 0)),
                prompt_lookup_min=int(config.get("prompt_lookup_min", 1)),
                prompt_lookup_max=int(config.get("prompt_lookup_max", 3)),
                draft_model=draft._core if draft is not None else None)


def generate(model, tokenizer, prompt_or_ids, max_new_tokens=128, do_sample=None, temperature=None, top_k=None,
             top_p=None, min_p=None, repetition_penalty=None, presence_penalty=0.0, frequency_penalty=0.0, seed=None,
             stop=None, eos_token_id=None, stream=None, native=None, speculative_config=None,
             skip_special_tokens=True, min_new_tokens=None):
    """Continue a prompt.

    ``prompt_or_ids``: text (needs ``tokenizer``; returns the new text) or token ids (returns the list of new
    ids; an EOS that ended generation is included, as transformers does). ``stop``: a string or list of strings
    that end generation; the text is trimmed before it (needs ``tokenizer``). ``eos_token_id``: int or list,
    default: every id the checkpoint's configs and the tokenizer call an end (_core.default_eos_ids). ``stream``:
    called with each new piece of text as soon as it is final (with ids in and no tokenizer: with each new id).
    ``skip_special_tokens``: False keeps special tokens in the text (and in what ``stop`` is matched against), as
    transformers' decode does (Model.chat reads gpt-oss's channel markers so).

    Sampling (``do_sample``, ``temperature``, ``top_k``, ``top_p``, ``min_p``, ``repetition_penalty``; None: not
    given) resolves as in ``attnzoo generate``: see ``sampling_params`` (the checkpoint's generation_config.json,
    greedy by default, ``temperature=0`` greedy). ``presence_penalty`` / ``frequency_penalty`` count the new tokens,
    ``repetition_penalty`` the prompt's too (vLLM's rule). ``seed``: a sampled run with a seed is reproducible;
    None (or -1) draws a fresh seed each call, as vLLM and llama.cpp do.

    ``min_new_tokens`` (transformers' name; vLLM's min_tokens): no EOS id is drawn (its logits are -inf, so greedy
    takes the best other token) and no stop string ends before that many new tokens exist. None: the checkpoint's
    generation_config.json min_new_tokens, else its min_length less the prompt, else 0. ``max_new_tokens`` and
    the context still end generation first, as in transformers.

    ``native``: run the C++ loop (attnzoo models and tokenizers only; no Python between tokens). Default: when
    possible. The Python loop serves any object with the model API. Both draw the same tokens for a seed.

    The context window bounds every run, as in ``attnzoo generate``: a prompt longer than the model's
    ``max_position_embeddings`` is a ValueError, and generation stops (returning what it has) once prompt + new
    tokens fill those positions, whatever ``max_new_tokens`` asked for. Ctrl-C ends the native loop between
    tokens and raises KeyboardInterrupt.

    ``speculative_config``: exact speculative decoding in the C++ loop, vLLM's dict: ``{"method": "ngram",
    "num_speculative_tokens": K, "prompt_lookup_max": N, "prompt_lookup_min": M}`` or ``{"method": "draft_model",
    "model": a Model sharing the tokenizer, "num_speculative_tokens": K}``. The tokens drawn follow the same
    distribution (greedy: the same tokens); the seed's stream is used differently, so seeded samples differ.
    """
    text_in = isinstance(prompt_or_ids, str)
    ids = _checked_prompt(model, tokenizer, prompt_or_ids, "prompt_or_ids")
    max_positions = _max_positions(model)
    stops, params = _run_settings(model, tokenizer, max_new_tokens, stop, do_sample, temperature, top_k, top_p, min_p,
                                  repetition_penalty, presence_penalty, frequency_penalty, seed)
    eos = _eos_ids(model, tokenizer, eos_token_id)
    min_new = _min_new_tokens(model, min_new_tokens, len(ids), max_new_tokens)
    spec = _speculative_args(speculative_config)
    parts = _native_parts(model, tokenizer, stream) if native in (None, True) else None
    if spec and parts is None:
        raise ValueError("speculative_config: speculative decoding runs in the C++ loop only (an attnzoo Model and "
                         "Tokenizer, native not False)")
    if native and parts is None:
        raise ValueError("native: the C++ loop needs an attnzoo Model, an attnzoo Tokenizer (or None) and, without "
                         "a tokenizer, no stream callback")
    if parts is not None:
        out = _core.generate(parts[0], np.asarray(ids, dtype=np.int32), parts[1], params["temperature"],
                             params["top_k"], params["top_p"], params["min_p"], params["repetition_penalty"],
                             params["presence_penalty"], params["frequency_penalty"], params["seed"],
                             int(max_new_tokens), sorted(eos), stops, stream, **spec,
                             skip_special_tokens=bool(skip_special_tokens), min_new_tokens=min_new)
        return out["text"] if text_in else list(out["tokens"])
    sampler = Sampler(**params, prompt_length=len(ids))
    matcher = _core.StopStringMatcher(stops)
    text = _TextStream(tokenizer, skip_special_tokens) if tokenizer is not None else None

    new_ids, pieces = [], []

    def emit(piece):
        if piece:
            pieces.append(piece)
            if stream is not None:
                stream(piece)

    if int(max_new_tokens) == 0:
        return "" if text_in else []
    forward = _forward_last(model)
    seq = model.new_sequence()
    logits = forward(np.asarray(ids, dtype=np.int32), seq)
    context = list(ids)
    stopped = False
    while True:
        if max_positions and len(context) >= max_positions:
            break
        row = _last_row(logits)
        if len(new_ids) < min_new:
            row = row.copy()  # the model's own array is left as it gave it
            row[[i for i in eos if 0 <= i < row.shape[0]]] = -np.inf
        token = sampler.sample(row, np.asarray(context, dtype=np.int32))
        new_ids.append(token)
        context.append(token)
        if token in eos:
            break
        if text is not None:
            piece, stopped = matcher.push(text.push(token), len(new_ids) > min_new)
            emit(piece)
            if stopped:
                break
        elif stream is not None:
            stream(token)
        if len(new_ids) >= int(max_new_tokens):
            break
        logits = forward(np.asarray([token], dtype=np.int32), seq)
    if text is not None and not stopped:
        piece, stopped = matcher.push(text.flush(), len(new_ids) > min_new)
        emit(piece)
        if not stopped:
            emit(matcher.flush())
    return "".join(pieces) if text_in else new_ids
