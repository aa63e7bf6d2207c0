"""Check a bundle's machine code for instructions beyond x86-64 with SSE4.2 (objdump -d).

    python packaging/check_instructions.py dist/specchat        # a one-file bundle
    python packaging/check_instructions.py dist/specchat/       # a one-folder bundle, or any
                                                                # folder of libraries

Every ELF file in the bundle is disassembled except llama.cpp's per-CPU kernel variants
(libggml-cpu-<variant>.so: chosen at start by what the CPU reports, so each may use its own
instruction sets). An AVX, AVX2, FMA, F16C, AVX-512, AMX or BMI instruction anywhere else
fails the check: code the program runs on every CPU must not stop with "illegal
instruction" on one without them.

Some libraries SpecChat takes ready-built (numpy, Qt, OpenSSL, OpenBLAS) carry such code on
purpose and pick it by the CPU at run time; they are listed in RUNTIME_DISPATCH with the
reason, reported apart, and do not fail the check. llama.cpp's own libraries are never on
that list. Exit status: 0 clean, 1 stray instructions found, 2 the check could not run.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: llama.cpp's CPU kernel variants: loaded only on a CPU that has what they were built for.
VARIANT = re.compile(r"(?:lib)?ggml-cpu-(?P<name>[\w.]+)\.so$")

#: Upstream builds that choose their code by the CPU at run time (file name patterns), with
#: where that choice is made. Their extra instructions are reported, not failed.
RUNTIME_DISPATCH: dict[str, str] = {
    r"(^|/)numpy/.*\.so$": "numpy's CPU dispatch (NPY_CPU_DISPATCH; baseline x86-64-v2)",
    r"(^|/)numpy\.libs/libscipy_openblas": "OpenBLAS DYNAMIC_ARCH: kernels picked by cpuid",
    r"(^|/)numpy\.libs/libgfortran": "libgfortran's matmul: AVX/AVX-512 copies behind "
    "__builtin_cpu_supports",
    r"(^|/)libQt6(Core|Gui)\.so": "Qt's qsimd: AVX2 paths behind qCpuHasFeature()",
    r"(^|/)libcrypto\.so": "OpenSSL's OPENSSL_ia32cap dispatch",
    r"(^|/)libgcrypt\.so": "libgcrypt's hwfeatures: AVX2/BMI2 ciphers behind cpuid",
    r"(^|/)libjpeg\.so": "libjpeg-turbo's jsimd: AVX2 paths behind cpuid",
    r"(^|/)libzstd\.so": "zstd's DYNAMIC_BMI2: BMI2 paths behind ZSTD_cpuid",
    r"(^|/)libpcre2-8\.so": "sljit's CPU probe: lzcnt of 0 runs as bsr on a CPU without LZCNT, "
    "which is how it tells the two apart",
    r"(^|/)(hf_xet|pydantic_core|ast_serialize)/": "Rust's memchr crate: AVX2 search behind "
    "is_x86_feature_detected!",
}

#: Single instructions allowed in one of llama.cpp's own libraries, with the reason.
GUARDED: dict[tuple[str, str], str] = {
    (r"(^|/)libmtmd\.so", "lzcnt"): "miniaudio's (vendored in mtmd): the first site sits behind "
    "a test of a global CPU-feature flag, and lzcnt never traps: without LZCNT it runs as bsr",
}

# The word lists below read better as one string than as a column of quoted words (SIM905).
#: Mnemonics beyond SSE4.2 that are not VEX/EVEX-encoded (those start with 'v').
BMI = frozenset(
    "andn bextr blsi blsmsk blsr bzhi mulx pdep pext rorx sarx shlx shrx lzcnt movbe".split()  # noqa: SIM905
)
AMX = re.compile(r"(ldtilecfg|sttilecfg|tileload|tilestore|tilerelease|tilezero|tdp)")
#: Registers and decorations only AVX-512 has: zmm, the mask registers, broadcast, rounding.
AVX512_OPERANDS = re.compile(r"%zmm|%k[0-7]\b|\{1to\d+\}|\{[rs][nduz]-sae\}|\{sae\}")
AVX512_MNEMONICS = re.compile(
    r"v(movdq[au](8|16|32|64)|pternlog|perm[it]2|p?compress|p?expand|pconflict|plzcnt"
    r"|pmadd52|popcnt|pro[lr]|ps[lr]avw|psllvw|pabsq|p(max|min)[su]q|pmullq|scalef|rcp14"
    r"|rsqrt14|getexp|getmant|fixupimm|rndscale|reduce|range|fpclass|cvt\w*2u|cvtu"
    r"|cvt\w*qq|cvtqq|(extract|insert|broadcast)[if](32|64)x|shuf[if](32|64)x|align[dq]"
    r"|pmov[su]?[qdw][bwd]\b|pmovm2|pmov\w+2m|pbroadcastm|psraq|pcmpu?[bwdq]\b|ptestn?m"
    r"|p?blendm|perm[bw]\b|pmultishift|dbpsadbw|cvtne2ps2bf16|dpbf16ps)"
)
AVX2_MNEMONICS = re.compile(
    r"v(pbroadcast|perm2i128|inserti128|extracti128|perm[dq]\b|permp[sd]|pblendd"
    r"|pmaskmov|ps[lr][la]v|p?gather)"
)
PREFIXES = frozenset(
    "{vex} {vex3} {evex} rep repz repnz repe repne lock notrack bnd data16 addr32 cs ds"  # noqa: SIM905
    " xacquire xrelease".split()
)


def classify(mnemonic: str, operands: str, evex: bool) -> str | None:
    """The instruction-set family of one instruction beyond SSE4.2, or None.

    `tzcnt` is left alone on purpose: compilers emit it for `rep bsf`, which runs as `bsf`
    on CPUs without BMI1 and gives the same result for the non-zero inputs it is used on.
    """
    if mnemonic in BMI:
        return "BMI"
    if AMX.match(mnemonic):
        return "AMX"
    if mnemonic.startswith("k") and "%k" in operands:
        return "AVX-512"
    if not mnemonic.startswith("v"):
        return None
    if evex or AVX512_OPERANDS.search(operands) or AVX512_MNEMONICS.match(mnemonic):
        return "AVX-512"
    if mnemonic.startswith(("vfmadd", "vfmsub", "vfnmadd", "vfnmsub")):
        return "FMA"
    if mnemonic in ("vcvtph2ps", "vcvtps2ph"):
        return "F16C"
    if mnemonic.startswith(("vpdpbusd", "vpdpwssd")):
        return "AVX-VNNI"
    if AVX2_MNEMONICS.match(mnemonic) or (mnemonic.startswith("vp") and "%ymm" in operands):
        return "AVX2"
    return "AVX"


@dataclass
class Finding:
    """What one library holds beyond SSE4.2.

    Attributes:
        path: the library, relative to the bundle.
        counts: instructions per family.
        examples: the first instruction of each family, with its address and function.
        mnemonics: every mnemonic counted.
    """

    path: str
    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    mnemonics: set[str] = field(default_factory=set)

    def summary(self) -> str:
        families = ", ".join(f"{name} {n}" for name, n in sorted(self.counts.items()))
        first = "; ".join(f"{name}: {text}" for name, text in sorted(self.examples.items()))
        return f"{self.path}: {families} (first: {first})"


#: objdump lines whose instruction may be beyond SSE4.2: VEX/EVEX ('v...'), mask ('k...'),
#: AMX ('t...', 'ldtilecfg'...) and BMI; found by the regex engine, not a Python loop, since
#: numpy alone disassembles to about two million lines.
CANDIDATE = re.compile(
    r"^ *(?P<address>[0-9a-f]+):\t(?P<text>(?:(?:\{\w+\}|rep\w*|lock|notrack|bnd|data16) +)*"
    r"(?:v|k|t|ldtilecfg|sttilecfg|andn|bextr|bls|bzhi|mulx|pdep|pext|rorx|sarx|shlx|shrx"
    r"|lzcnt|movbe)[^\n]*)$",
    re.MULTILINE,
)


def split_instruction(text: str) -> tuple[str, str, bool]:
    """(mnemonic, operands, EVEX-encoded) of one objdump instruction text."""
    words = text.split(None, 1)
    evex = False
    while words and words[0] in PREFIXES:
        evex = evex or words[0] == "{evex}"
        words = words[1].split(None, 1) if len(words) > 1 else []
    if not words:
        return "", "", evex
    return words[0], words[1] if len(words) > 1 else "", evex


def scan(path: Path, label: str, objdump: str) -> Finding:
    """Disassemble one ELF file and count its instructions beyond SSE4.2."""
    finding = Finding(label)
    done = subprocess.run(
        [objdump, "-d", "--no-show-raw-insn", str(path)],
        capture_output=True,
        text=True,
        errors="replace",
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"objdump failed on {label}: {done.stderr.strip()[:200]}")
    listing = done.stdout
    for match in CANDIDATE.finditer(listing):
        mnemonic, operands, evex = split_instruction(match["text"])
        family = classify(mnemonic, operands, evex)
        if family is None:
            continue
        finding.counts[family] += 1
        finding.mnemonics.add(mnemonic)
        if family not in finding.examples:
            header = listing.rfind(">:\n", 0, match.start())
            function = listing[listing.rfind("<", 0, header) + 1 : header] if header > 0 else "?"
            example = match["text"].strip()
            finding.examples[family] = f"{example} at {match['address']} in {function}"
    return finding


def is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(4) == b"\x7fELF"
    except OSError:
        return False


def unpack(bundle: Path, into: Path) -> None:
    """The binaries of a one-file bundle, written out under `into` as they unpack at start."""
    from PyInstaller.archive.readers import CArchiveReader

    archive = CArchiveReader(str(bundle))
    for name, entry in archive.toc.items():
        if entry[-1] in ("b", "x") and (".so" in name or name.endswith(".pyd")):
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.extract(name))
    # The bootloader itself runs first, on every CPU.
    shutil.copyfile(bundle, into / bundle.name)


def libraries(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink() and is_elf(path):
            yield path


@dataclass
class Report:
    """The check's outcome over one bundle.

    Attributes:
        variants: the llama.cpp CPU variants found (not disassembled).
        scanned: how many ELF files were disassembled.
        stray: libraries that fail the check.
        dispatched: libraries on the run-time dispatch list that hold such code.
    """

    variants: list[str] = field(default_factory=list)
    scanned: int = 0
    stray: list[Finding] = field(default_factory=list)
    dispatched: list[tuple[Finding, str]] = field(default_factory=list)


def check(root: Path, objdump: str) -> Report:
    report = Report()
    for path in libraries(root):
        label = str(path.relative_to(root)) if path != root else path.name
        variant = VARIANT.search(path.name)
        if variant:
            report.variants.append(variant["name"])
            continue
        report.scanned += 1
        finding = scan(path, label, objdump)
        if not finding.counts:
            continue
        reason = next((why for rx, why in RUNTIME_DISPATCH.items() if re.search(rx, label)), None)
        guarded = [
            why
            for (rx, mnemonic), why in GUARDED.items()
            if re.search(rx, label) and finding.mnemonics == {mnemonic}
        ]
        if reason and "llama_cpp" not in label:
            report.dispatched.append((finding, reason))
        elif guarded:
            report.dispatched.append((finding, guarded[0]))
        else:
            report.stray.append(finding)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path, help="one-file bundle, or a folder of libraries")
    args = parser.parse_args(argv)
    objdump = shutil.which("objdump")
    if objdump is None:
        print("check_instructions: objdump is missing (Debian package binutils)", file=sys.stderr)
        return 2
    if not args.bundle.exists():
        print(f"check_instructions: {args.bundle} does not exist", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="specchat-check-") as workdir:
        root = args.bundle
        if root.is_file():
            root = Path(workdir)
            unpack(args.bundle, root)
        report = check(root, objdump)
    variants = ", ".join(sorted(report.variants)) or "none"
    print(f"CPU variants present ({len(report.variants)}, not checked): {variants}")
    print(f"disassembled {report.scanned} ELF files")
    for finding, reason in report.dispatched:
        print(f"run-time dispatch (allowed): {finding.summary()}\n    why allowed: {reason}")
    for finding in report.stray:
        print(f"STRAY: {finding.summary()}")
    if report.stray:
        print(f"FAILED: {len(report.stray)} libraries use instructions beyond x86-64 + SSE4.2")
        return 1
    print("passed: no instructions beyond x86-64 + SSE4.2 outside the CPU variants")
    return 0


if __name__ == "__main__":
    sys.exit(main())
