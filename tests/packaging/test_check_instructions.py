"""packaging/check_instructions.py sorts objdump's instructions into the right families."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers.portable import CHECKER


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_instructions", CHECKER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    # Dataclasses look their module up by name while the class is made.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


checker = _load()

#: (objdump line text, family or None), AT&T syntax as objdump prints it.
CASES = [
    # x86-64 baseline, SSE2..SSE4.2, POPCNT, and tzcnt (runs as bsf on older CPUs).
    ("movaps %xmm0,(%rdi)", None),
    ("pshufb %xmm1,%xmm0", None),
    ("pcmpistri $0x1a,(%rsi),%xmm0", None),
    ("crc32q %rax,%rdx", None),
    ("popcnt %rdi,%rax", None),
    ("tzcnt %rax,%rax", None),
    ("roundps $0x1,%xmm0,%xmm0", None),
    # AVX (VEX, 128 or 256 bits of floats)
    ("vmovups %ymm0,(%rax)", "AVX"),
    ("vzeroupper", "AVX"),
    ("vxorps %xmm0,%xmm0,%xmm0", "AVX"),
    # AVX2
    ("vpaddd %ymm1,%ymm2,%ymm3", "AVX2"),
    ("vpbroadcastd %xmm7,%ymm7", "AVX2"),
    ("vpermq $0xd8,%ymm0,%ymm0", "AVX2"),
    ("vpgatherdd %ymm2,(%rax,%ymm1,4),%ymm0", "AVX2"),
    # FMA, F16C, BMI
    ("vfmadd231ps %ymm1,%ymm2,%ymm0", "FMA"),
    ("vfnmadd213ss %xmm1,%xmm2,%xmm0", "FMA"),
    ("vcvtph2ps %xmm0,%ymm0", "F16C"),
    ("vcvtps2ph $0x0,%ymm1,%xmm0", "F16C"),
    ("shlx %rax,%rdx,%rax", "BMI"),
    ("lzcnt %rdx,%rcx", "BMI"),
    # AVX-512: zmm, mask registers, EVEX-only instructions on xmm/ymm, {evex} forms
    ("vaddps %zmm1,%zmm2,%zmm3", "AVX-512"),
    ("vmovdqu8 %ymm0,(%rax){%k1}", "AVX-512"),
    ("kmovw %k1,%eax", "AVX-512"),
    ("vpternlogd $0xff,%ymm0,%ymm0,%ymm0", "AVX-512"),
    ("vbroadcastss 0x10(%rip){1to8},%ymm0", "AVX-512"),
    ("{evex} vpaddd %xmm1,%xmm2,%xmm3", "AVX-512"),
    ("vpdpbusd %zmm1,%zmm2,%zmm0", "AVX-512"),
    ("{vex} vpdpbusd %ymm1,%ymm2,%ymm0", "AVX-VNNI"),
    ("tdpbssd %tmm1,%tmm2,%tmm0", "AMX"),
]


def _family(text: str) -> str | None:
    words = text.split()
    evex = False
    while words and words[0] in checker.PREFIXES:
        evex = evex or words[0] == "{evex}"
        words = words[1:]
    return checker.classify(words[0], " ".join(words[1:]), evex)


@pytest.mark.parametrize(("text", "family"), CASES)
def test_each_instruction_is_sorted_into_its_family(text: str, family: str | None) -> None:
    assert _family(text) == family


def test_a_library_with_avx2_fails_and_one_without_passes(tmp_path: Path) -> None:
    # Real objects from the system compiler: the same C code for the baseline and for AVX2.
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is missing (Debian package build-essential builds llama.cpp too)")
    source = tmp_path / "add.c"
    source.write_text(
        "void add(int *a, const int *b, int n) { for (int i = 0; i < n; i++) a[i] += b[i]; }\n"
    )
    for name, flags in (("plain", ["-msse4.2"]), ("fast", ["-mavx2"])):
        folder = tmp_path / name
        folder.mkdir()
        subprocess.run(
            [gcc, "-O3", "-shared", "-fPIC", *flags, "-o", folder / "libadd.so", source],
            check=True,
        )
    objdump = shutil.which("objdump")
    assert objdump is not None
    assert not checker.check(tmp_path / "plain", objdump).stray
    stray = checker.check(tmp_path / "fast", objdump).stray
    assert [finding.path for finding in stray] == ["libadd.so"]
    assert stray[0].counts["AVX2"] > 0


def test_cpu_variants_are_listed_not_disassembled(tmp_path: Path) -> None:
    gcc, objdump = shutil.which("gcc"), shutil.which("objdump")
    assert gcc and objdump
    source = tmp_path / "dot.c"
    source.write_text(
        "float dot(const float *a, const float *b, int n) {"
        " float s = 0; for (int i = 0; i < n; i++) s += a[i] * b[i]; return s; }\n"
    )
    lib = tmp_path / "lib"
    lib.mkdir()
    variant = lib / "libggml-cpu-skylakex.so"
    flags = ["-O3", "-shared", "-fPIC", "-mavx512f", "-mfma", "-ffast-math"]
    subprocess.run([gcc, *flags, "-o", variant, source], check=True)
    # The same code under any other name is stray: only the variant's name exempts it.
    shutil.copyfile(variant, lib / "libdot.so")
    report = checker.check(lib, objdump)
    assert report.variants == ["skylakex"] and report.scanned == 1
    assert [finding.path for finding in report.stray] == ["libdot.so"]
    assert report.stray[0].counts["AVX-512"] > 0
