"""Every code block of README.md stays true: each Python block runs as written in a fresh interpreter, the
command-line block runs against a tiny model built here, and a block that cannot run says why in a
`<!-- readme-test: not run: REASON -->` line right above it (a block with neither fails this test)."""
import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("ATTNZOO_CLI", os.path.join(ROOT, "build", "attnzoo"))
SHELL_SKIP = {"chat", "explain", "bench", "conformance"}  # named in the block's marker with the tests that run them


def _blocks():
    """(language, code, marker or None, line number) for every fenced block."""
    lines = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while not lines[j].startswith("```"):
            j += 1
        prev = next((lines[p] for p in range(i - 1, -1, -1) if lines[p].strip()), "")
        marker = re.match(r"^<!-- readme-test: (.*) -->$", prev)
        out.append((m.group(1), "\n".join(lines[i + 1:j]), marker.group(1) if marker else None, i + 1))
        i = j + 1
    return out


BLOCKS = _blocks()


def test_every_block_runs_or_says_why_not():
    for lang, code, marker, line in BLOCKS:
        if lang == "python" and marker is None:
            continue
        assert marker, f"README.md:{line}: a {lang or 'plain'} block with no readme-test marker"
        assert marker.startswith("shell:") or re.match(r"not run: \S.{10,}", marker), \
            f"README.md:{line}: marker without a reason: {marker}"


PYTHON = [(code, line) for lang, code, marker, line in BLOCKS if lang == "python" and marker is None]


@pytest.mark.parametrize("code, line", PYTHON, ids=[f"line{line}" for _, line in PYTHON])
def test_python_block_runs(code, line, tmp_path):
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"README.md:{line}\n{r.stderr[-3000:]}"


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("tokenizers")
    from test_cli import write_tiny_model
    return write_tiny_model(str(tmp_path_factory.mktemp("readme_model")))


@pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"attnzoo CLI not built at {CLI}")
def test_command_line_block_runs(tiny_model_dir, tmp_path):
    (code,) = [c for lang, c, marker, _ in BLOCKS if marker and marker.startswith("shell:")]
    (tmp_path / "prompt.txt").write_text("the quick brown fox")
    (tmp_path / "book.txt").write_text("the quick brown fox jumps over the lazy dog.\n" * 60)  # 2 windows of 128+
    ran = set()
    for raw in code.split("\n"):
        cmd = raw.split("  #")[0].strip()
        if not cmd.startswith("build/attnzoo "):
            continue
        argv = shlex.split(cmd)
        if argv[1] in SHELL_SKIP:
            continue
        argv = [CLI] + [tiny_model_dir if a == "DIR" else os.path.join(tiny_model_dir, "config.json")
                        if a == "FILE" else a for a in argv[1:]]
        r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{raw}\n{r.stderr[-2000:]}"
        ran.add(argv[1])
    assert {"info", "tokenize", "tokenizer", "inspect", "generate", "perplexity"} <= ran
