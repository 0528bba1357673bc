"""Serving many requests at once: the C++ engine (continuous batching, chunked prefill, preemption by recompute,
prefix caching, parallel samples) on its own thread, with a vLLM-shaped Python API.

    llm = LLM(Model.load("path/to/model"))
    outs = llm.generate([[1, 2, 3], "text prompt"], SamplingParams(max_tokens=32, temperature=0))
    outs[0].outputs[0].token_ids, outs[0].outputs[0].text, outs[0].outputs[0].finish_reason

    engine = Engine(model)                       # the streaming interface underneath
    req = engine.add_request(ids, SamplingParams(max_tokens=8))
    for out in req:                              # one dict per engine step with news, until finished
        ...

Sample i of a request with ``n`` samples draws with seed ``seed + i``; a seeded request gives the same tokens
however it is batched, and the same as ``Model.generate(ids, seed=seed + i, ...)`` run alone. A request without a
seed (None, or vLLM's -1) draws a fresh one when it is added, as vLLM does.
"""
import json
import warnings
from dataclasses import dataclass, field
from typing import List, Optional

from . import _core
from .generate import _eos_ids, _request_seed, _speculative_args
from .model import Model, _ids

__all__ = ["SamplingParams", "Engine", "LLM", "RequestStream", "CompletionOutput", "RequestOutput",
           "EngineStoppedError", "EngineBusyError"]

# vLLM's _MAX_TEMP: the smallest sampling temperature a request gets.
_MIN_TEMPERATURE = 0.01

EngineStoppedError = _core.EngineStoppedError
EngineBusyError = _core.EngineBusyError


@dataclass
class SamplingParams:
    """vLLM's names. temperature 0 is greedy; logprobs: how many top alternatives to report per token (None: no
    log-probabilities; 0: only the chosen token's). logit_bias: {token id: bias in [-100, 100]} added to the raw
    logits (logprobs stay the raw logits'). response_format: "text", or "json_object" (JSON mode: each sample's
    text stays a prefix of one JSON object and the sample ends as the object closes); OpenAI's dict form
    {"type": "json_object"} is accepted too. Structured outputs: OpenAI's {"type": "json_schema", "json_schema":
    {"name": ..., "schema": {...}, "strict": true}}, or {"type": "json_schema", "schema": {...}}: each sample's
    text validates against the schema (the subset engine/json_schema.h lists; anything else raises ValueError
    naming the keyword) and the sample ends as the document does. skip_special_tokens (vLLM's): special tokens
    are left out of the text (their ids stay in token_ids); False writes them as the tokenizer spells them.
    min_tokens (vLLM's): until a sample has that many tokens its EOS ids (ignore_eos or not) and stop_token_ids get
    -inf logits, speculative verification included, and no stop string ends in their text; at most max_tokens
    (ValueError naming min_tokens otherwise); logprobs stay the raw logits'. As vLLM's: seed None (or -1) draws a
    fresh seed per request; a temperature in (0, 0.01) is raised to 0.01, with a warning; presence_penalty and
    frequency_penalty count the generated tokens, repetition_penalty the prompt's too."""
    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: Optional[int] = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    n: int = 1
    stop: List[str] = field(default_factory=list)
    stop_token_ids: List[int] = field(default_factory=list)
    ignore_eos: bool = False
    min_tokens: int = 0
    logprobs: Optional[int] = None
    logit_bias: Optional[dict] = None
    response_format: object = "text"
    skip_special_tokens: bool = True

    def _core_kwargs(self, raise_small_temperature=True):
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        seed = _request_seed(self.seed)
        temperature = float(self.temperature)
        if raise_small_temperature and 0.0 < temperature < _MIN_TEMPERATURE:
            # vLLM's SamplingParams does the same: below it the scaled logits lose all but the argmax (or overflow).
            warnings.warn(f"temperature: {temperature} is below {_MIN_TEMPERATURE} and is raised to it, as vLLM does",
                          stacklevel=3)
            temperature = _MIN_TEMPERATURE
        fmt, schema = self.response_format, ""
        if isinstance(fmt, dict):
            spec = fmt
            fmt = spec.get("type")
            if fmt == "json_schema":
                inner = spec.get("json_schema", spec)
                if not isinstance(inner, dict) or "schema" not in inner:
                    raise ValueError("response_format: json_schema needs {'json_schema': {'schema': {...}}}")
                try:
                    schema = json.dumps(inner["schema"], allow_nan=False)
                except (TypeError, ValueError) as e:
                    raise ValueError(f"response_format: the schema is not JSON: {e}") from None
        if fmt is None:
            fmt = "text"
        if not isinstance(fmt, str):
            raise ValueError(f"response_format: must be 'text', 'json_object' or {{'type': ...}}, got {fmt!r}")
        if fmt == "json_schema" and not schema:
            raise ValueError("response_format: 'json_schema' needs the dict form with its schema")
        bias = []
        for k, v in (self.logit_bias or {}).items():
            try:
                bias.append((int(k), float(v)))
            except (TypeError, ValueError):
                raise ValueError(f"logit_bias: keys must be token ids and values numbers, got {k!r}: {v!r}") from None
        return dict(temperature=temperature, top_k=int(self.top_k or 0), top_p=float(self.top_p),
                    min_p=float(self.min_p), repetition_penalty=float(self.repetition_penalty),
                    presence_penalty=float(self.presence_penalty), frequency_penalty=float(self.frequency_penalty),
                    seed=seed, max_tokens=int(self.max_tokens), n=int(self.n), stop=stop,
                    stop_token_ids=[int(t) for t in self.stop_token_ids], ignore_eos=bool(self.ignore_eos),
                    min_tokens=int(self.min_tokens or 0),
                    logprobs=self.logprobs is not None, top_logprobs=int(self.logprobs or 0),
                    logit_bias=bias, response_format=fmt, json_schema=schema,
                    skip_special_tokens=bool(self.skip_special_tokens))


class RequestStream:
    """One request's outputs: iterate to get each step's dict (see _core output dicts) until the last one."""

    def __init__(self, engine, request_id, queue):
        self._engine, self.request_id, self._queue = engine, request_id, queue
        self.done = False

    def next(self, timeout=None):
        """The next output dict, or None when `timeout` seconds pass first (None: wait as long as it takes)."""
        if self.done:
            raise StopIteration
        while True:
            out = self._queue.pop(1.0 if timeout is None else float(timeout))
            if out is not None or timeout is not None:
                break
        if out is not None and out["finished"]:
            self.done = True
        return out

    def __iter__(self):
        while not self.done:
            yield self.next()

    def abort(self):
        self._engine.abort(self.request_id)


class Engine:
    """The serving engine over a loaded :class:`Model` (and its tokenizer, for text and stop strings).

    max_num_batched_tokens: tokens per step (decodes first, prefill chunks fill the rest). max_num_seqs: sequences
    running at once. max_model_len: prompt + generated tokens (0: the model's context, max_position_embeddings or
    YaRN's extension of it; more is refused).
    eos_token_ids: None means Model.generate's default (the checkpoint's, the tokenizer's: _core.default_eos_ids).
    speculative_config: exact speculative decoding, vLLM's dict: {"method": "ngram", "num_speculative_tokens": K,
    "prompt_lookup_max": N, "prompt_lookup_min": M} or {"method": "draft_model", "model": Model or directory,
    "num_speculative_tokens": K}; stats() then counts spec_decode_num_drafts / _draft_tokens / _accepted_tokens.
    device: where a model given as a directory is loaded (Model.load's device); for a loaded Model, None or
    its own device. A draft model given as a directory is loaded beside the target.
    """

    def __init__(self, model, max_num_batched_tokens=2048, max_num_seqs=64, max_model_len=0,
                 enable_chunked_prefill=True, eos_token_ids=None, max_waiting_requests=0, tokenizer=None,
                 speculative_config=None, device=None):
        if not isinstance(model, Model):
            model = Model.load(model, device=device or "auto")
        elif device not in (None, "auto") and ("cuda:0" if device == "cuda" else device) != model.device:
            raise ValueError(f"device: the model was loaded on {model.device}, {device!r} asked; load it there "
                             "(Model.load(..., device=)) or pass the directory")
        self.model = model
        tok = tokenizer if tokenizer is not None else model.tokenizer
        self.tokenizer = tok
        # The same end-of-sequence ids as Model.generate and attnzoo serve.
        self.eos_token_ids = sorted(_eos_ids(model, tok, eos_token_ids))
        spec = dict(speculative_config or {})
        if isinstance(spec.get("model"), str):
            spec["model"] = Model.load(spec["model"], device=model.device)
        self._draft = spec.get("model")  # the engine holds on to it
        args = _speculative_args(spec) or {"speculative": "none"}
        self._core = _core.Engine(model._core, tok._native if tok is not None else None, int(max_num_batched_tokens),
                                  int(max_num_seqs), int(max_model_len), bool(enable_chunked_prefill),
                                  self.eos_token_ids, int(max_waiting_requests), **args)

    def _prompt_ids(self, prompt):
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise ValueError("prompt: text needs the model directory's tokenizer.json; pass token ids")
            return list(self.tokenizer.encode(prompt))
        return [int(t) for t in _ids(prompt, "prompt")]

    def add_request(self, prompt, params=None, *, _as_given=False):
        """Queues a prompt (token ids or text) and returns its :class:`RequestStream`."""
        params = params or SamplingParams()
        queue = _core.OutputQueue.make()
        # _as_given: Model.generate's batches keep transformers' temperatures, as its single prompts do.
        kwargs = params._core_kwargs(raise_small_temperature=not _as_given)
        rid = self._core.add_request(self._prompt_ids(prompt), queue, **kwargs)
        return RequestStream(self, rid, queue)

    def abort(self, request_id):
        self._core.abort(int(request_id))

    def stats(self):
        """Running / waiting requests, preemptions, pool blocks and usage, prefix-cache queries and hits, tokens."""
        return self._core.stats()

    @property
    def max_model_len(self):
        return self._core.max_model_len

    def stop(self):
        """Aborts what is unfinished and joins the engine thread."""
        self._core.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


@dataclass
class CompletionOutput:
    index: int
    token_ids: List[int]
    text: str
    finish_reason: Optional[str]
    logprobs: Optional[list] = None  # per token: (chosen token, logprob), and top alternatives in top_logprobs
    top_logprobs: Optional[list] = None


@dataclass
class RequestOutput:
    request_id: int
    prompt_token_ids: List[int]
    outputs: List[CompletionOutput]
    usage: dict
    metrics: dict  # arrival, first_token, finish (monotonic seconds), preemptions


def _collect(stream, n, prompt_ids, want_logprobs):
    outs = [CompletionOutput(i, [], "", None, [] if want_logprobs else None, [] if want_logprobs else None)
            for i in range(n)]
    last = None
    for out in stream:
        last = out
        for s in out["samples"]:
            o = outs[s["index"]]
            o.token_ids += s["token_ids"]
            o.text += s["text"]
            if want_logprobs:
                o.logprobs += s["logprobs"]
                o.top_logprobs += s["top_logprobs"]
            if s["finish_reason"] is not None:
                o.finish_reason = s["finish_reason"]
    if last["error"]:
        raise RuntimeError(f"request {stream.request_id}: {last['error']}")
    metrics = {k: last[k] for k in ("arrival", "first_token", "finish", "preemptions")}
    return RequestOutput(stream.request_id, prompt_ids, outs, last["usage"], metrics)


class LLM:
    """Offline batch generation (vLLM's LLM): every prompt is queued at once and the engine batches them."""

    def __init__(self, model, **engine_kwargs):
        self.engine = Engine(model, **engine_kwargs)

    def generate(self, prompts, sampling_params=None):
        """One :class:`RequestOutput` per prompt (ids or text), in order. `sampling_params`: one for all, or a
        list with one per prompt."""
        if isinstance(prompts, str) or (len(prompts) > 0 and isinstance(prompts[0], int)):
            prompts = [prompts]
        if sampling_params is None or isinstance(sampling_params, SamplingParams):
            sampling_params = [sampling_params or SamplingParams()] * len(prompts)
        if len(sampling_params) != len(prompts):
            raise ValueError(f"sampling_params: {len(sampling_params)} given for {len(prompts)} prompts")
        streams = []
        try:
            for prompt, params in zip(prompts, sampling_params):
                ids = self.engine._prompt_ids(prompt)
                streams.append((self.engine.add_request(ids, params), params, ids))
            return [_collect(s, p.n, ids, p.logprobs is not None) for s, p, ids in streams]
        except BaseException:
            for s, _, _ in streams:
                s.abort()
            raise

    def stop(self):
        self.engine.stop()
