"""Edited copies of a saved checkpoint (copy_with), and the checks that a broken one fails to load with an error
naming what is broken. Plain helpers (no test_* names), so pytest collects nothing here."""
import json
import os

import pytest

from attnzoo.model import Model


def copy_with(src, dst, config_edit=None, tensors_edit=None):
    """Copies a checkpoint, editing its config dict and / or its tensor dict in place on the way."""
    from safetensors.numpy import load_file, save_file
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    if config_edit:
        config_edit(cfg)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f)
    tensors = load_file(os.path.join(src, "model.safetensors"))
    if tensors_edit:
        tensors_edit(tensors)
    save_file(tensors, os.path.join(dst, "model.safetensors"))
    return dst


def expect_load_error(directory, match):
    with pytest.raises(ValueError, match=match):
        Model.load(directory)


def check_missing_tensors_are_named(src, tmp_path, names):
    """A checkpoint missing any one of `names` fails to load with an error naming it."""
    for i, name in enumerate(names):
        d = copy_with(src, tmp_path / f"missing{i}", tensors_edit=lambda t: t.pop(name))
        expect_load_error(d, name.replace(".", r"\."))


def check_edited_tensor_is_named(src, dst, name, edit):
    """A checkpoint whose tensor `name` is replaced by edit(its value) (a misshapen copy) fails to load with an
    error naming it."""
    def apply(tensors):
        tensors[name] = edit(tensors[name])
    expect_load_error(copy_with(src, dst, tensors_edit=apply), name.replace(".", r"\."))


def checkpoint_fixture(build, kind):
    """A module-scoped fixture: the directory build(kind, directory) saved a checkpoint in, built once for the
    module's load-error tests to copy and edit."""
    @pytest.fixture(scope="module")
    def checkpoint_dir(tmp_path_factory):
        directory = tmp_path_factory.mktemp(kind)
        build(kind, directory)
        return directory
    return checkpoint_dir


def check_config_error_is_named(src, dst, match, **updates):
    """A config with `updates` applied fails to load with an error matching `match`."""
    expect_load_error(copy_with(src, dst, config_edit=lambda c: c.update(updates)), match)
