"""Section 7 - inside a model (hook for the model runtime).

This section needs a model directory (-m DIR) and the model runtime (attnzoo.model). The figures belong to
whoever writes that runtime: fill in explain_model() below. It receives the model directory and the prompt,
must run the real model, and returns (html, facts, number_of_figures) built with .page / .svg helpers,
e.g. per-layer KV / state bytes from attnzoo.memory for the loaded config, attention maps of a few heads on
the prompt, the hybrid layer pattern.
"""
import importlib.util

from .page import Section
from .svg import esc

ID = "inside-a-model"
TITLE = "7. Inside a model"


def explain_model(model_dir, prompt):
    """HOOK for the model runtime: return (html, facts, figures) drawn from running the model in model_dir on
    prompt. Until it is written the page says so instead of showing made-up figures."""
    raise NotImplementedError("the model runtime's explainer hook (attnzoo.explain.inside_model.explain_model) "
                              "is not written yet")


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
    return Section(ID, TITLE, body, dict(facts, status="ok"), figures=figures)
