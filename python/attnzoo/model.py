"""Hugging Face causal language models on attnzoo's CPU kernels.

    m = Model.load("path/to/llama")         # formats chosen for the checkpoint: m.formats says which and why
    logits = m.forward(ids)                 # [T, vocab] float32 numpy, fresh cache
    seq = m.new_sequence()                  # keep a KV cache across calls
    m.forward(prompt[:17], seq=seq); m.forward(prompt[17:], seq=seq); m.forward([next_id], seq=seq)
    m.forward_batch([s1, s2], [ids1, ids2]) # ragged batch: several sequences at different stages
    m.perplexity(text, n_ctx=512).ppl       # llama.cpp's perplexity over a text

``dtype`` is the precision the projection weights are held in: "float32" (f32 and bf16 checkpoints are used
in place, zero copy), "bfloat16" (f32 weights rounded once to bf16) or "auto", the default (as the checkpoint is
stored: bf16 / f16 matrices held as bf16, f32 ones and block-quantized GGUF files as they are; f32 under matmul
precision "highest"). Activations are float32. Every "auto" (dtype, kv_cache_dtype, and what the projections
multiply with under the matmul precision) is resolved by one C++ function, as ``attnzoo generate`` / ``serve`` /
``inspect`` resolve it; ``Model.formats`` holds the choice and a reason for each part. Every sequence lives in the model's memory pool (paged KV blocks of ``block_size``
tokens in ``kv_cache_dtype``, recurrent-state slots), sized once from ``kv_cache_bytes``; a fresh sequence whose
prompt starts like an earlier one reuses the cached prefix (``enable_prefix_caching``). ``fork(seq)`` continues a
sequence in two directions, sharing its blocks copy-on-write.
"""
import json
import os

import numpy as np

from . import _core
from ._arrays import as_input, in_callers_framework, to_int32, _is_torch

Sequence = _core.Sequence
PoolExhaustedError = _core.PoolExhaustedError


def _ids(ids, name="ids"):
    """Token ids as int32; ids that do not fit are refused here, ids outside the vocabulary by the model."""
    x = to_int32(ids, name)
    if x.ndim != 1:
        raise ValueError(f"{name}: must be 1-D, got shape {x.shape}")
    return x


# Model.chat's reasoning_parser: vLLM's names, as `attnzoo chat --reasoning-parser` takes them.
_REASONING_PARSERS = (None, "qwen3", "deepseek_r1", "openai_gptoss")


class ChatReply(str):
    """Model.chat's reply: the answer as a str, and the thinking the model wrote apart from it (gpt-oss's analysis
    channel, or the ``<think>`` block a ``reasoning_parser`` reads) as ``reasoning_content``, None where it wrote
    none; the field name is the one serve's messages use."""

    def __new__(cls, content, reasoning_content=None):
        reply = super().__new__(cls, content)
        reply.reasoning_content = reasoning_content
        return reply


def resolve_formats(path, dtype="auto", kv_cache_dtype="auto"):
    """What Model.load(path, dtype=, kv_cache_dtype=) (and every CLI command) would choose under the current matmul
    precision on this CPU, without loading the weights: the dict Model.formats gives after the load."""
    return _core.resolve_formats(os.fspath(path), dtype, kv_cache_dtype)


class Model:
    """A loaded checkpoint. Build with :meth:`Model.load`."""

    def __init__(self, core, directory):
        self._core = core
        # A GGUF (the file, or the one in a directory) carries its config, tokenizer, chat template and EOS ids in
        # its metadata; those lookups go to the path as given, which names it.
        self.path = directory
        self.directory = os.path.dirname(directory) if os.path.isfile(directory) else directory
        self.gguf = _core.find_model_gguf(directory)
        self.config = json.loads(_core.model_config_json(directory))

    @property
    def _source(self):
        """Where the tokenizer, chat template and EOS ids come from: the GGUF, else the checkpoint directory."""
        return self.gguf or self.directory

    @classmethod
    def load(cls, directory, dtype="auto", block_size=16, kv_cache_dtype="auto", kv_cache_bytes=None,
             max_num_seqs=64, enable_prefix_caching=True, snapshot_interval_blocks=0, shuffle_blocks_seed=0,
             free_outside_window=True, device="auto", gpu_memory_utilization=0.9):
        """Loads a checkpoint and sizes its memory pool.

        block_size: tokens per KV block (vLLM's name). kv_cache_dtype: "auto" (bf16 with bf16-held weights or a
        block-quantized GGUF, as llama.cpp's 16-bit cache; else float32; see Model.formats), "float32",
        "bfloat16", "float16", or the quantized "int8" / "fp8" (e4m3), stored with one float32 scale per token and
        kv head (softmax K/V and MLA latents; recurrent state stays float32). kv_cache_bytes: the pool's budget (None: a quarter of the free memory, at most
        16 GiB; reserved, committed only as used). max_num_seqs: sequences that can hold recurrent state at once.
        snapshot_interval_blocks: models with recurrent layers snapshot their state every this many blocks, where
        a prefix-cache hit can end (0: every 256 tokens). shuffle_blocks_seed: tests only. free_outside_window:
        sliding-window layers give back the blocks their window has left (False: every layer keeps every block,
        vLLM's disable_hybrid_kv_cache_manager; for comparisons). device: "cpu", "cuda", "cuda:N" or "auto" (the CPU
        until the GPU path has run on hardware). On a GPU the Llama family (Llama, Qwen2, Qwen3, Mistral, SmolLM)
        computes there; other architectures and features are refused by name, as is a GPU this machine lacks.
        gpu_memory_utilization: on a GPU, the pool's budget as vLLM's: this fraction of the device's memory less
        what is in use (kv_cache_bytes, when given, wins).
        """
        directory = os.fspath(directory)
        core = _core.Model.load(directory, dtype, block_size, kv_cache_dtype, kv_cache_bytes or 0, max_num_seqs,
                                enable_prefix_caching, snapshot_interval_blocks, shuffle_blocks_seed, 0,
                                free_outside_window, device, gpu_memory_utilization)
        return cls(core, directory)

    @property
    def device(self):
        """Where the model computes and its memory pool lives: "cpu" or "cuda:N"."""
        return self._core.device

    @property
    def vocab_size(self):
        return self._core.vocab_size

    def new_sequence(self):
        """An empty sequence whose caches persist across forward() calls (freed with the object)."""
        return self._core.new_sequence()

    def fork(self, seq):
        """A new sequence continuing from `seq` (beam search, parallel sampling): shared blocks, copied state."""
        return self._core.fork(seq)

    def pool_stats(self):
        """The memory pool: blocks (free, cached), state slots, snapshots, prefix-cache queries and hits, and its
        block groups (window, layers, blocks in use)."""
        return self._core.pool_stats()

    def clear_prefix_cache(self):
        """Forgets every cached block and state snapshot that no sequence is using."""
        self._core.clear_prefix_cache()

    def forward(self, ids, seq=None, last_only=False):
        """Logits [len(ids), vocab] (or [1, vocab] with last_only) for ids appended to `seq` (a fresh one if None),
        float32 in the caller's framework: torch ids in, a torch tensor out; numpy / lists in, numpy out."""
        if seq is None:
            seq = self._core.new_sequence()
        return in_callers_framework(ids, self._core.forward(_ids(ids), seq, last_only))

    def forward_batch(self, seqs, ids, last_only=False):
        """One ragged batch: sequence i gets ids[i]. Returns one logits array per sequence."""
        arrays = [_ids(x, f"ids[{i}]") for i, x in enumerate(ids)]
        out = self._core.forward_batch(list(seqs), arrays, last_only)
        if last_only:
            return [in_callers_framework(x, out[i:i + 1]) for i, x in enumerate(ids)]
        bounds = np.cumsum([0] + [len(a) for a in arrays])
        return [in_callers_framework(x, out[bounds[i]:bounds[i + 1]]) for i, x in enumerate(ids)]

    @property
    def tokenizer(self):
        """The directory's tokenizer.json (or a GGUF's own vocabulary) as an attnzoo Tokenizer (None when the
        checkpoint has neither)."""
        if not hasattr(self, "_tokenizer"):
            from .tokenizer import Tokenizer
            path = self.gguf or os.path.join(self.directory, "tokenizer.json")
            self._tokenizer = Tokenizer.load(path) if os.path.exists(path) else None
        return self._tokenizer

    def generate(self, prompt_or_ids, max_new_tokens=128, do_sample=None, temperature=None, top_k=None, top_p=None,
                 min_p=None, repetition_penalty=None, seed=None, stop=None, stream=None, **kwargs):
        """Continue a prompt: ids in -> the new ids out; text in -> the new text out (needs a tokenizer). A list of
        prompts (texts or id sequences) runs them together through the serving engine and returns one result per
        prompt, each what the prompt alone would give (no ``stream``).

        Sampling defaults are the checkpoint's generation_config.json (transformers' rules: greedy unless it sets
        do_sample), overridden by the arguments given, exactly as ``attnzoo generate`` resolves them (see
        attnzoo.generate.sampling_params). Other arguments (presence_penalty, frequency_penalty, eos_token_id,
        min_new_tokens, native) as in attnzoo.generate.generate, which this calls with the directory's tokenizer;
        unknown keywords are a TypeError naming them. ``response_format`` ("json_object", or {"type": "json_schema",
        "json_schema": {"schema": {...}}}) holds the answer to JSON / the schema: it runs on the serving engine, as
        a list of prompts does (no ``stream``).
        """
        from .generate import generate, generate_batch, is_batch
        args = dict(max_new_tokens=max_new_tokens, do_sample=do_sample, temperature=temperature, top_k=top_k,
                    top_p=top_p, min_p=min_p, repetition_penalty=repetition_penalty, seed=seed, stop=stop)
        if kwargs.get("response_format") is not None and not is_batch(prompt_or_ids):
            if stream is not None:
                raise ValueError("stream: not available with response_format (it runs on the serving engine)")
            if kwargs.pop("native", None) is False:
                raise ValueError("native: response_format runs on the C++ engine")
            return generate_batch(self, self.tokenizer, [prompt_or_ids], **args, **kwargs)[0]
        if is_batch(prompt_or_ids):
            if stream is not None:
                raise ValueError("stream: not available with a list of prompts (stream one prompt at a time)")
            if kwargs.pop("native", None) is False:
                raise ValueError("native: a list of prompts runs on the C++ engine")
            return generate_batch(self, self.tokenizer, prompt_or_ids, **args, **kwargs)
        return generate(self, self.tokenizer, prompt_or_ids, stream=stream, **args, **kwargs)

    @property
    def chat_template(self):
        """(template source, special-token strings) from the directory's chat_template.jinja or
        tokenizer_config.json (a GGUF's tokenizer.chat_template), or None when it has no chat template."""
        if not hasattr(self, "_chat_template"):
            from .chat import load_chat_template
            self._chat_template = load_chat_template(self._source)
        return self._chat_template

    def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=False, **kwargs):
        """The checkpoint's chat template applied to ``messages``, as transformers' tokenizer method: text, or with
        ``tokenize=True`` its token ids (no special tokens added: the template writes BOS itself). kwargs become
        template variables (tools, documents, enable_thinking, ...) and override the special-token strings."""
        from .chat import apply_chat_template
        if self.chat_template is None:
            raise ValueError(f"{self.directory}: no chat template (neither chat_template.jinja nor a "
                             "\"chat_template\" in tokenizer_config.json)")
        source, special = self.chat_template
        if kwargs.get("tools") is not None:  # transformers picks a "tool_use" template when there is one
            from .chat import load_chat_template
            try:
                source, special = load_chat_template(self._source, "tool_use")
            except ValueError:
                pass
        text = apply_chat_template(source, messages, add_generation_prompt, **{**special, **kwargs})
        if not tokenize:
            return text
        if self.tokenizer is None:
            raise ValueError("tokenize: the checkpoint has no tokenizer (no tokenizer.json, no GGUF vocabulary)")
        return self.tokenizer.encode(text, add_special_tokens=False)

    def chat(self, messages, max_new_tokens=256, do_sample=None, temperature=None, top_k=None, top_p=None,
             min_p=None, repetition_penalty=None, seed=None, stop=None, stream=None, eos_token_id=None,
             reasoning_parser=None, min_new_tokens=None, **template_kwargs):
        """The assistant's reply to ``messages`` (a list of {"role", "content"} dicts) as text.

        The conversation goes through the checkpoint's chat template with the assistant header added; the reply
        ends at EOS or at the template's end-of-turn token (<|im_end|>, <|eot_id|>, ...). ``stream`` gets each
        new piece of text. Sampling defaults (and ``min_new_tokens``: no end of turn before that many new tokens) as
        in generate. template_kwargs become template variables.

        The reply is a ``ChatReply``, a str with a ``reasoning_content`` attribute (None where the model wrote no
        thinking apart from its answer). gpt-oss (a harmony template) answers in channels: the reply is the final
        channel, ``reasoning_content`` the analysis, as ``attnzoo serve`` splits them, and ``stream`` gets the
        final channel's text only. Passing the reply back as ``{"role": "assistant", "content": reply,
        "reasoning_content": reply.reasoning_content}`` gives the template both.

        ``reasoning_parser`` ("qwen3", "deepseek_r1"; "openai_gptoss" reads harmony channels as gpt-oss's template
        does) reads a ``<think>`` block out of the answer as ``attnzoo serve --reasoning-parser`` and ``attnzoo chat
        --reasoning-parser`` do (vLLM's rules, docs/REASONING.md): the reply is the content, ``reasoning_content``
        the block (None where qwen3 finds no closed block). As with the CLI it is never guessed from the checkpoint,
        and a model whose template and vocabulary know no ``</think>`` is refused. ``stream`` gets the content only,
        as it comes (a piece that may still be the start of a tag is held back); the reasoning is not sent to it.
        """
        from .generate import generate
        if reasoning_parser not in _REASONING_PARSERS:
            raise ValueError(f"reasoning_parser: must be None, 'qwen3', 'deepseek_r1' or 'openai_gptoss', got "
                             f"{reasoning_parser!r}")
        ids = self.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, **template_kwargs)
        source, special = self.chat_template
        if reasoning_parser is not None and not _core.knows_reasoning_tag(reasoning_parser, source,
                                                                          self.tokenizer._native):
            tag = "<|channel|>" if reasoning_parser == "openai_gptoss" else "</think>"
            raise ValueError(f"reasoning_parser={reasoning_parser!r}: the checkpoint knows no {tag} (neither its chat "
                             "template nor its vocabulary has it), so its answers have no reasoning to separate")
        harmony = _core.reads_harmony(source, reasoning_parser or "")
        if eos_token_id is None:
            from .generate import _eos_ids
            end_of_turn = _core.end_of_turn_ids(source, special, self.tokenizer._native)
            if harmony:  # <|call|> ends a turn too, whether or not the checkpoint lists it as EOS
                end_of_turn = [*end_of_turn, *_core.harmony_end_ids(self.tokenizer._native)]
            eos_token_id = sorted(_eos_ids(self, self.tokenizer, None, end_of_turn))
        ends = {eos_token_id} if isinstance(eos_token_id, int) else set(eos_token_id)
        args = dict(max_new_tokens=max_new_tokens, do_sample=do_sample, temperature=temperature, top_k=top_k,
                    top_p=top_p, min_p=min_p, repetition_penalty=repetition_penalty, seed=seed, stop=stop,
                    eos_token_id=eos_token_id, min_new_tokens=min_new_tokens)
        if not harmony and reasoning_parser is not None:
            return self._chat_thinking(ids, reasoning_parser, stream, args)
        if not harmony:
            out = generate(self, self.tokenizer, ids, stream=stream, **args)
            if out and out[-1] in ends:
                out = out[:-1]
            return ChatReply(self.tokenizer.decode(out, skip_special_tokens=True))
        # The channel markers are special tokens: the text keeps them, and the reader splits it.
        reader, reasoning, content = _core.HarmonyReader(), [], []

        def take(piece):
            reasoning.append(piece[0])
            content.append(piece[1])
            if stream is not None and piece[1]:
                stream(piece[1])

        out = generate(self, self.tokenizer, ids, stream=lambda text: take(reader.feed(text)),
                       skip_special_tokens=False, **args)
        take(reader.finish(bool(out) and out[-1] in ends))
        return ChatReply("".join(content), "".join(reasoning) if reader.has_reasoning else None)

    def _chat_thinking(self, ids, parser, stream, args):
        """Model.chat's answer read by a <think> parser: the stream as serve streams it, the reply as serve splits
        the whole answer (the two agree at every cut: answers/reasoning_test.cc)."""
        from .generate import generate
        # A tag the vocabulary marks special would be dropped from the text: keep special tokens then, as serve does.
        skip = True
        for tag in ("<think>", "</think>"):
            tag_ids = self.tokenizer.encode(tag, add_special_tokens=False)
            if len(tag_ids) == 1 and self.tokenizer.is_special(tag_ids[0]):
                skip = False
        reader, text = _core.ReasoningStream(parser), []

        def take(piece):
            if stream is not None and piece[1]:
                stream(piece[1])

        def feed(piece):
            text.append(piece)
            take(reader.feed(piece))

        generate(self, self.tokenizer, ids, stream=feed, skip_special_tokens=skip, **args)
        take(reader.finish())
        reasoning, content = _core.split_reasoning("".join(text), parser)
        return ChatReply(content, reasoning)

    def perplexity(self, text_or_ids, n_ctx=512, n_batch=2048, n_chunks=None, bos="auto"):
        """llama.cpp's perplexity over a text or token ids: windows of n_ctx tokens from an empty state, the
        second half of each scored. Returns a PerplexityResult (ppl, ppl_error, running_ppl per window, ...);
        see attnzoo.perplexity."""
        from .perplexity import perplexity
        return perplexity(self, text_or_ids, n_ctx=n_ctx, n_batch=n_batch, n_chunks=n_chunks, bos=bos)

    def trace(self, ids):
        """What each layer computed for `ids` run as a fresh sequence (explainer hook; short prompts).

        One dict per layer: "kind"; softmax attention adds "q" [T, heads, head_dim] and "k" [T, kv_heads,
        head_dim] exactly as the kernel saw them (after q/k norm and RoPE) with "scale", "window", "softcap" and
        "sinks"; recurrent layers may add "state_norms" (per head, after the prompt).
        """
        return self._core.trace(_ids(ids))

    @property
    def formats(self):
        """What "auto" chose at load, and why: {"checkpoint", "weights_dtype", "weights_reason", "kv_cache_dtype",
        "kv_cache_reason", "prefill_products", "decode_activations", "products_reason"} (as ``attnzoo inspect``)."""
        return self._core.formats

    def inspect(self):
        """Architecture, layer kinds, parameter count, weight bytes and per-sequence cache bytes."""
        return self._core.inspect()

    def __repr__(self):
        info = self.inspect()
        return f"Model({info['architecture']}, {info['num_layers']} layers, {info['parameter_count']} parameters)"
