"""How attnzoo reaches a user outside its checkout: the Python package imported from a plain site directory
(no PYTHONPATH to the checkout), the CLI handing over to the Python installed beside it, `cmake --install` +
find_package(attnzoo) for C++ code, and nothing built into the source tree. The real `pip wheel` build compiles
the whole library (minutes on two cores), so it runs when ATTNZOO_TEST_WHEEL=1."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

import attnzoo

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(os.environ.get("ATTNZOO_BUILD") or os.path.join(ROOT, "build"))
CLI = os.environ.get("ATTNZOO_CLI", os.path.join(BUILD, "attnzoo"))


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ATTNZOO_PYTHON")}
    env.update(extra)
    return env


def _cmake_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(attnzoo LANGUAGES CXX VERSION ([0-9.]+)\)", f.read()).group(1)


def test_version_has_one_source():
    assert attnzoo.__version__ == attnzoo._core.__version__ == _cmake_version()


def test_nothing_is_built_into_the_source_tree():
    built = [p for p in glob.glob(os.path.join(ROOT, "python", "**", "*.so"), recursive=True)]
    assert not built, f"compiled files in the checkout (stale from an older build? delete them): {built}"
    assert os.path.dirname(attnzoo._core.__file__) == os.path.join(BUILD, "python", "attnzoo")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The layout pip installs: the package's sources and its compiled module in one site directory."""
    d = tmp_path_factory.mktemp("site")
    shutil.copytree(os.path.join(ROOT, "python", "attnzoo"), d / "attnzoo",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(attnzoo._core.__file__, d / "attnzoo")
    return d


def test_installed_package_imports_from_anywhere(site, tmp_path):
    code = "import attnzoo, numpy as np; print(attnzoo.__version__, attnzoo.__file__, attnzoo._core.__file__);" \
           "q = np.ones((1, 4, 2, 8), np.float32); print(float(attnzoo.attention(q, q, q).sum()))"
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_clean_env(PYTHONPATH=str(site)),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    version, init, core, total = r.stdout.split()
    assert version == _cmake_version()
    assert init.startswith(str(site)) and core.startswith(str(site))
    assert float(total) == pytest.approx(1 * 4 * 2 * 8)  # softmax-weighted mean of ones


@pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"attnzoo CLI not built at {CLI}")
def test_installed_cli_uses_the_python_beside_it(site, tmp_path):
    """A copy of the CLI outside its build tree runs its Python commands with the python3 in its own directory
    (as in a venv's bin/), which sees only the installed package: never the checkout."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy2(CLI, bin_dir / "attnzoo")
    log = tmp_path / "pythonpath.log"
    wrapper = bin_dir / "python3"
    wrapper.write_text(f'#!/bin/sh\necho "PYTHONPATH=$PYTHONPATH" >> {log}\n'
                       f'PYTHONPATH={site} exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    r = subprocess.run([str(bin_dir / "attnzoo"), "bench", "model", "--help"], cwd=tmp_path, env=_clean_env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "usage: attnzoo bench model" in r.stdout
    seen = log.read_text()
    assert "PYTHONPATH" in seen and ROOT not in seen  # the checkout was not put on the child's path


@pytest.mark.skipif(shutil.which("cmake") is None or not os.path.exists(os.path.join(BUILD, "CMakeCache.txt")),
                    reason="needs cmake and a configured build tree")
def test_cmake_install_and_find_package(tmp_path):
    prefix = tmp_path / "prefix"
    r = subprocess.run(["cmake", "--install", BUILD, "--prefix", str(prefix)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (prefix / "lib" / "cmake" / "attnzoo" / "attnzooConfig.cmake").exists()
    assert (prefix / "include" / "attnzoo" / "core" / "dispatch.h").exists()
    assert (prefix / "bin" / "attnzoo").exists()
    app = tmp_path / "app"
    app.mkdir()
    (app / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.22)\nproject(app LANGUAGES CXX)\nset(CMAKE_CXX_STANDARD 20)\n"
        "find_package(attnzoo 0.1 CONFIG REQUIRED)\nadd_executable(app main.cc)\n"
        "target_link_libraries(app PRIVATE attnzoo::attnzoo)\n"
        "add_executable(reader reader.cc)\ntarget_link_libraries(reader PRIVATE attnzoo::attnzoo_server)\n")
    (app / "main.cc").write_text(
        '#include <cstdio>\n#include "core/dispatch.h"\n'
        'int main() { std::printf("%s\\n", attnzoo::target_name(attnzoo::active_target())); }\n')
    # The server's library brings the answer readers with it (linked, not only their headers).
    (app / "reader.cc").write_text(
        '#include <cstdio>\n#include "answers/reasoning.h"\n#include "server/api_error.h"\n'
        'int main() {\n'
        '  auto s = attnzoo::answers::split_reasoning("<think>why</think>so", attnzoo::answers::ReasoningParser::qwen3);\n'
        '  std::printf("%s|%s\\n", s.reasoning.c_str(), s.content.c_str());\n'
        '  std::printf("%s\\n", attnzoo::server::error_body(attnzoo::server::bad_request("m", "p")).c_str());\n'
        '}\n')
    b = tmp_path / "app-build"
    for cmd in (["cmake", "-S", str(app), "-B", str(b), "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={prefix}"],
                ["cmake", "--build", str(b)]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([str(b / "app")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() in attnzoo.supported_targets()
    r = subprocess.run([str(b / "reader")], capture_output=True, text=True, timeout=60)
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[0] == "why|so", r.stdout + r.stderr
    assert json.loads(lines[1])["error"]["param"] == "p"


@pytest.mark.skipif(os.environ.get("ATTNZOO_TEST_WHEEL") != "1", reason="builds the whole library: set "
                    "ATTNZOO_TEST_WHEEL=1 (needs scikit-build-core in this environment)")
def test_pip_wheel_holds_the_module_and_the_cli(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w",
                        str(tmp_path), ROOT], capture_output=True, text=True, timeout=3600, env=_clean_env())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    wheel, = glob.glob(str(tmp_path / "attnzoo-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert any(re.fullmatch(r"attnzoo/_core\..*so", n) for n in names)
    assert "attnzoo/__init__.py" in names and "attnzoo/explain/__main__.py" in names
    assert any(n.endswith(".data/scripts/attnzoo") for n in names)
    target = tmp_path / "target"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(target), wheel],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-c", "import attnzoo; print(attnzoo.__version__)"], cwd=tmp_path,
                       env=_clean_env(PYTHONPATH=str(target)), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == _cmake_version(), r.stderr
    r = subprocess.run([str(target / "bin" / "attnzoo"), "--version"], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == f"attnzoo {_cmake_version()}"
