"""Chat templates: render a conversation into a prompt exactly as transformers' ``apply_chat_template`` does.

    text = apply_chat_template(template, [{"role": "user", "content": "Hi"}], add_generation_prompt=True)

The template is Jinja2 source (a checkpoint's ``chat_template``); attnzoo renders it with its own C++ interpreter
(``src/chat/``), with transformers' settings (trim_blocks, lstrip_blocks) and globals (``raise_exception``,
``strftime_now``, ``namespace``, ``tojson`` without HTML escaping). Messages are normalised as transformers does:
keys whose value is None are dropped, and ``reasoning_content`` / ``thinking`` / ``reasoning`` alias each other.
Errors (a syntax error, an undefined name, the template's own ``raise_exception``) are ``ValueError`` naming the
template line and column.
"""
import functools
import json

from . import _core

__all__ = ["apply_chat_template", "load_chat_template"]

_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


@functools.lru_cache(maxsize=32)
def _compiled(template):
    return _core.ChatTemplate(template)


def _plain(value):
    """JSON-able copy: mappings, lists and tuples walked; other objects become a "<TypeName>" placeholder."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):  # a str subclass (Model.chat's ChatReply) is its text
        return str.__str__(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _plain(value.item())
    return f"<{type(value).__name__}>"


def _normalize(messages):
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TypeError(f"messages[{i}]: expected a dict, got {type(message).__name__}")
        message = {k: v for k, v in message.items() if v is not None}
        reasoning = next((message[k] for k in _REASONING_FIELDS if message.get(k) is not None), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        out.append(_plain(message))
    return out


def apply_chat_template(template, messages, add_generation_prompt=False, **kwargs):
    """The prompt text for ``messages`` (a list of {"role", "content", ...} dicts) under ``template``.

    kwargs become template variables, as in transformers: ``tools``, ``documents`` (None when not given),
    ``bos_token``, ``eos_token``, ``enable_thinking``, ...
    """
    if not isinstance(template, str):
        raise TypeError(f"template: expected str, got {type(template).__name__}")
    if isinstance(messages, dict) or not hasattr(messages, "__iter__"):
        raise TypeError("messages: expected a list of message dicts")
    context = {"messages": _normalize(list(messages)), "tools": None, "documents": None,
               "add_generation_prompt": bool(add_generation_prompt)}
    context.update({k: _plain(v) for k, v in kwargs.items()})
    try:
        text = json.dumps(context, ensure_ascii=False, allow_nan=False)
    except ValueError as e:
        raise ValueError(f"messages / kwargs: not representable as JSON ({e})") from None
    return _compiled(template).render_json(text)


def load_chat_template(model_dir, name=None):
    """(template source, special tokens dict) of a checkpoint directory: chat_template.jinja, else
    tokenizer_config.json "chat_template" (a string, or named templates where "default" wins). None when it has
    none. Special tokens: the bos_token / eos_token / unk_token / pad_token strings tokenizer_config.json sets."""
    import os
    info = _core.load_chat_template(os.fspath(model_dir), name or "")
    if info is None:
        return None
    return info["source"], dict(info["special_tokens"])
