"""ggml_backends: which CPU kernels and devices llama.cpp runs on, as reports name them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from specchat import __version__, ggml_backends, paths
from specchat.engine.llamacpp.backend import compute_backends
from specchat.ggml_backends import BUILT_IN, Backends
from specchat.tinymodels import TinyModels


def test_a_build_with_linked_in_kernels_is_named_native() -> None:
    # make's .venv builds llama.cpp for this CPU with the kernels linked in; the portable
    # build's variants (libggml-cpu-<cpu>.so) would be listed and one of them chosen.
    backends = compute_backends()
    variants = sorted(ggml_backends.lib_dir().glob("libggml-cpu-*.so"))
    if variants:
        assert backends.cpu in backends.variants and len(backends.variants) == len(variants)
    else:
        assert backends == Backends(cpu=BUILT_IN, variants=(), devices=backends.devices)
    assert compute_backends() is backends  # loaded once per process


def test_describe_names_the_variant_the_choice_and_the_devices() -> None:
    chosen = Backends(cpu="haswell", variants=("haswell", "sse42", "x64"), devices=())
    assert chosen.describe() == "CPU kernels haswell (chosen from 3 variants)"
    native = Backends(cpu=BUILT_IN, variants=(), devices=("CUDA",))
    assert native.describe() == "CPU kernels native (built-in); GPU CUDA"
    missing = Backends(cpu="", variants=(), devices=())
    assert missing.describe().startswith("no CPU kernels loaded")


def test_version_names_the_llama_cpp_build(tmp_path: Path) -> None:
    env = {**os.environ, paths.HOME_ENV: str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "specchat", "--version"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first == f"SpecChat {__version__}"
    assert second.startswith("llama-cpp-python ") and ": CPU kernels " in second
    assert second.endswith(compute_backends().describe())


LOAD_TINY = (
    "import sys\n"
    "from specchat.engine.llamacpp.model import LlamaModel\n"
    "with LlamaModel(sys.argv[1], n_ctx=64, n_threads=1):\n"
    "    print('loaded')\n"
)


def _load_in_child(target: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SPECCHAT_LLAMA_LOG"}
    return subprocess.run(
        [sys.executable, "-c", LOAD_TINY, str(target)],
        capture_output=True,
        text=True,
        env={**env, **extra},
        timeout=120,
    )


def test_llama_cpp_log_is_echoed_to_stderr_only_when_asked(tiny_models: TinyModels) -> None:
    quiet = _load_in_child(tiny_models.target)
    echoed = _load_in_child(tiny_models.target, SPECCHAT_LLAMA_LOG="1")
    off = _load_in_child(tiny_models.target, SPECCHAT_LLAMA_LOG="0")
    for done in (quiet, echoed, off):
        assert done.returncode == 0 and done.stdout.strip() == "loaded", done.stderr
    assert "llama_model_loader" not in quiet.stderr + off.stderr
    # The loader's lines, as llama.cpp writes them, in the order they came.
    assert "llama_model_loader: loaded meta data" in echoed.stderr
    assert echoed.stderr.index("llama_model_loader") < echoed.stderr.index("llama_context")
