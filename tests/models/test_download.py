"""Hub downloads through huggingface_hub against a real local HTTP server with faults."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from specchat.models import hub_download as download
from specchat.models.catalog import ModelFile
from specchat.models.download import (
    ChecksumMismatch,
    DownloadCancelled,
    DownloadError,
    DownloadProgress,
    HubUnreachable,
    NotEnoughSpace,
    delete_partial,
    download_from_hub,
    fetch_file,
    find_in_hub_cache,
    find_partial,
    locate_file,
    unverified_notice,
)
from specchat.models.transfer import read_stamp
from tests.helpers import fake_hub

REPO = "specchat-tests/tiny-GGUF"
FILENAME = "tiny-target.gguf"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[fake_hub.FakeHub]:
    monkeypatch.setenv("SPECCHAT_MODEL_CACHE", str(tmp_path / "specchat-cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with fake_hub.serve() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


@pytest.fixture
def payload(tiny_models) -> bytes:  # type: ignore[no-untyped-def]
    return Path(tiny_models.target).read_bytes()


def _model(*, size: int | None = None, sha256: str | None = None, mirror=None) -> ModelFile:  # type: ignore[no-untyped-def]
    return ModelFile(
        repo=REPO,
        filename=FILENAME,
        revision="main",
        size=size,
        sha256=sha256,
        quantisation="F32",
        params="1M",
        licence="mit",
        mirror=mirror,
    )


def _random_bytes(count: int) -> bytes:
    return np.random.default_rng(5).integers(0, 256, count, dtype=np.uint8).tobytes()


def _no_leftovers(cache: Path, *, partial_allowed: bool = False) -> None:
    """Neither a blob, a snapshot entry nor (unless allowed) an .incomplete file remains."""
    if not cache.exists():
        return
    leftovers = [
        p
        for p in cache.rglob("*")
        if (p.is_file() or p.is_symlink())
        and ("blobs" in p.parts or "snapshots" in p.parts)
        and not (partial_allowed and p.name.endswith(".incomplete"))
    ]
    assert leftovers == []


def test_full_download_reports_progress_and_verifies(hub, payload, tmp_path):  # type: ignore[no-untyped-def]
    sha = hub.add(REPO, FILENAME, payload)
    hub.chunk = 4096
    events: list[DownloadProgress] = []
    cache = tmp_path / "hub"

    path = download_from_hub(_model(), cache_dir=cache, progress=events.append)

    assert path.read_bytes() == payload
    assert path.resolve().name == sha  # stored as the hub stores LFS blobs
    stages = [e.stage for e in events]
    assert "download" in stages and "verify" in stages
    downloads = [e for e in events if e.stage == "download"]
    assert downloads[-1].finished and downloads[-1].done == len(payload)
    assert downloads[-1].total == len(payload)
    dones = [e.done for e in downloads]
    assert dones == sorted(dones)
    assert all(e.speed >= 0 for e in events)
    assert read_stamp(path) == sha
    # Laid out as huggingface_hub lays out its cache: its own offline lookup finds the file.
    from huggingface_hub import hf_hub_download

    assert hf_hub_download(REPO, FILENAME, cache_dir=cache, local_files_only=True) == str(path)
    # Found again without any download: a HEAD-less cache hit.
    before = len(hub.file_requests())
    assert find_in_hub_cache(_model(), cache_dir=cache) == path
    assert download_from_hub(_model(), cache_dir=cache) == path
    assert len(hub.file_requests()) == before


def test_a_file_no_sha256_is_known_for_is_said_to_be_not_verified(hub, payload, tmp_path):  # type: ignore[no-untyped-def]
    hub.add(REPO, FILENAME, payload)
    hub.faults.not_lfs = True  # the etag is a git sha1, and the catalog gives no sha256
    cache = tmp_path / "hub"
    notices: list[str] = []

    path = download_from_hub(_model(), cache_dir=cache, notify=notices.append)

    assert path.read_bytes() == payload
    assert read_stamp(path) is None  # nothing vouches for its contents
    assert notices == [unverified_notice(FILENAME)]
    assert "NOT verified" in notices[0]
    # Found again on disk: still said, and the located file says it cannot be checked.
    located = locate_file(_model(), cache_dir=cache, models_dir=tmp_path / "models")
    assert located is not None and not located.checkable
    assert fetch_file(_model(), source="hub", cache_dir=cache, notify=notices.append) == path
    assert notices == [unverified_notice(FILENAME)] * 2
    # A sha256 from the catalog makes the same file verified, with no notice.
    sha = hashlib.sha256(payload).hexdigest()
    assert download_from_hub(_model(sha256=sha), cache_dir=cache, notify=notices.append) == path
    assert len(notices) == 2


def test_cut_mid_file_resumes_with_a_range_request(hub, tmp_path):  # type: ignore[no-untyped-def]
    # huggingface_hub hands bytes to the file in pieces (download.HUB_CHUNK), so what came
    # after the last full piece is fetched again: a cut at 2.5 pieces resumes at 2.
    piece = download.HUB_CHUNK
    big = _random_bytes(6 * piece)
    sha = hub.add(REPO, FILENAME, big)
    hub.chunk = 64 * 1024
    hub.faults.cut_after = 2 * piece + piece // 2
    hub.faults.cuts = 1
    events: list[DownloadProgress] = []

    path = download_from_hub(_model(sha256=sha), cache_dir=tmp_path / "hub", progress=events.append)

    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
    ranges = [r.range for r in hub.gets()]
    assert ranges == [None, f"bytes={2 * piece}-"]  # continued, not restarted from zero
    final = [e for e in events if e.stage == "download"][-1]
    assert final.done == len(big)


@pytest.mark.parametrize("cut", [1, 4096, 200_003, 472_799])
def test_cut_at_random_offsets_ends_in_a_correct_file(hub, payload, tmp_path, cut):  # type: ignore[no-untyped-def]
    sha = hub.add(REPO, FILENAME, payload)
    hub.faults.cut_after = cut
    hub.faults.cuts = 2  # the first resume is cut again

    path = download_from_hub(_model(size=len(payload)), cache_dir=tmp_path / "hub")

    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha


def test_wrong_bytes_are_refused_and_deleted(hub, payload, tmp_path):  # type: ignore[no-untyped-def]
    hub.add(REPO, FILENAME, payload)
    hub.faults.corrupt = True
    cache = tmp_path / "hub"

    with pytest.raises(ChecksumMismatch, match="deleted"):
        download_from_hub(_model(), cache_dir=cache)

    _no_leftovers(cache)
    assert find_in_hub_cache(_model(), cache_dir=cache) is None


def test_catalog_sha256_wins_over_the_hub(hub, payload, tmp_path):  # type: ignore[no-untyped-def]
    hub.add(REPO, FILENAME, payload)
    cache = tmp_path / "hub"
    with pytest.raises(ChecksumMismatch, match=r"expected 0{64}"):
        download_from_hub(_model(sha256="0" * 64), cache_dir=cache)
    _no_leftovers(cache)


def _cancel_once_under_way(hub, cache: Path) -> DownloadProgress:  # type: ignore[no-untyped-def]
    """Start a slow download, cancel it from another thread once bytes arrived; last event."""
    cancel = threading.Event()
    seen = threading.Event()
    events: list[DownloadProgress] = []

    def on_progress(event: DownloadProgress) -> None:
        events.append(event)
        if event.done >= 2 * download.HUB_CHUNK:
            seen.set()

    threading.Thread(target=lambda: seen.wait(10) and cancel.set(), daemon=True).start()
    with pytest.raises(DownloadCancelled, match="kept to resume"):
        download_from_hub(_model(), cache_dir=cache, progress=on_progress, cancel=cancel)
    return events[-1]


def test_cancel_keeps_the_partial_and_the_next_call_resumes_it(hub, tmp_path):  # type: ignore[no-untyped-def]
    big = _random_bytes(8 * download.HUB_CHUNK)
    sha = hub.add(REPO, FILENAME, big)
    hub.chunk = 64 * 1024
    hub.faults.chunk_delay = 0.01  # ~6 MB/s: the whole file would take over a second
    cache = tmp_path / "hub"

    _cancel_once_under_way(hub, cache)

    # Nothing that looks finished, but the bytes so far are kept, in whole pieces.
    _no_leftovers(cache, partial_allowed=True)
    assert find_in_hub_cache(_model(), cache_dir=cache) is None
    partial = find_partial(_model(), cache_dir=cache)
    assert partial is not None and partial.total == len(big)
    assert partial.done >= download.HUB_CHUNK and partial.done % download.HUB_CHUNK == 0
    assert partial.path.read_bytes() == big[: partial.done]

    hub.faults.chunk_delay = 0.0
    events: list[DownloadProgress] = []
    path = download_from_hub(_model(), cache_dir=cache, progress=events.append)

    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
    assert hub.gets()[-1].range == f"bytes={partial.done}-"  # resumed, not restarted
    first = next(e for e in events if e.stage == "download")
    assert first.done >= partial.done  # the bar starts where the partial ends
    assert find_partial(_model(), cache_dir=cache) is None
    assert not list(cache.rglob("*.incomplete"))


def test_a_deleted_partial_restarts_from_zero(hub, tmp_path):  # type: ignore[no-untyped-def]
    big = _random_bytes(8 * download.HUB_CHUNK)
    sha = hub.add(REPO, FILENAME, big)
    hub.chunk = 64 * 1024
    hub.faults.chunk_delay = 0.01
    cache = tmp_path / "hub"
    _cancel_once_under_way(hub, cache)
    partial = find_partial(_model(), cache_dir=cache)
    assert partial is not None

    assert delete_partial(_model(), cache_dir=cache)

    assert not partial.path.exists()
    assert find_partial(_model(), cache_dir=cache) is None
    assert not delete_partial(_model(), cache_dir=cache)  # nothing left to delete
    _no_leftovers(cache)
    hub.faults.chunk_delay = 0.0
    path = download_from_hub(_model(), cache_dir=cache)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
    assert hub.gets()[-1].range is None


def test_a_partial_longer_than_the_file_is_started_over(hub, payload, tmp_path):  # type: ignore[no-untyped-def]
    sha = hub.add(REPO, FILENAME, payload)
    cache = tmp_path / "hub"
    blobs = cache / "models--specchat-tests--tiny-GGUF" / "blobs"
    blobs.mkdir(parents=True)
    (blobs / f"{sha}.incomplete").write_bytes(b"x" * (len(payload) + 10))

    path = download_from_hub(_model(), cache_dir=cache)

    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
    assert hub.gets()[-1].range is None


_KILLED_SCRIPT = """
import sys
from pathlib import Path
from specchat.models.catalog import ModelFile
from specchat.models.download import download_from_hub

model = ModelFile("specchat-tests/tiny-GGUF", "tiny-target.gguf", "main", None, None, "", "", "")
download_from_hub(model, cache_dir=Path(sys.argv[1]), endpoint=sys.argv[2])
"""


def test_a_download_killed_with_its_process_resumes_in_the_next(hub, tmp_path):  # type: ignore[no-untyped-def]
    """The app closed (or killed) mid-download: a new process continues from the partial."""
    import signal
    import subprocess
    import sys

    big = _random_bytes(8 * download.HUB_CHUNK)
    sha = hub.add(REPO, FILENAME, big)
    hub.chunk = 64 * 1024
    hub.faults.chunk_delay = 0.02  # ~3 MB/s: the child is still downloading when killed
    cache = tmp_path / "hub"
    partial_path = cache / "models--specchat-tests--tiny-GGUF" / "blobs" / f"{sha}.incomplete"
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_SCRIPT, str(cache), hub.url],
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and child.poll() is None:
            if partial_path.exists() and partial_path.stat().st_size >= 2 * download.HUB_CHUNK:
                break
            time.sleep(0.02)  # polling another process's file: there is no signal to wait on
        assert child.poll() is None, "the child finished before it could be killed"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    kept = partial_path.stat().st_size
    assert 0 < kept < len(big)
    assert find_partial(_model(), cache_dir=cache) is not None  # the record survived the kill

    hub.faults.chunk_delay = 0.0
    path = download_from_hub(_model(), cache_dir=cache)

    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
    assert hub.gets()[-1].range == f"bytes={kept}-"


def test_not_enough_disk_space_is_a_clear_error(hub, payload, tmp_path):  # type: ignore[no-untyped-def]
    hub.add(REPO, FILENAME, payload)
    cache = tmp_path / "hub"

    with pytest.raises(NotEnoughSpace, match="not enough disk space"):
        download_from_hub(_model(), cache_dir=cache, free_space=lambda _path: 10_000)

    assert hub.gets() == []  # refused before a byte was fetched
    _no_leftovers(cache)


@pytest.mark.parametrize("lie", [1000, -1000])
def test_a_server_lying_about_the_size_leaves_no_file(hub, payload, tmp_path, lie):  # type: ignore[no-untyped-def]
    hub.add(REPO, FILENAME, payload)
    hub.faults.size_lie = lie
    cache = tmp_path / "hub"
    # Resumes against a liar cannot succeed; keep the back-off short.
    with pytest.raises(DownloadError):
        download_from_hub(_model(), cache_dir=cache, attempts=1)
    # A short body may be kept as a partial to resume, but never passes for the file.
    _no_leftovers(cache, partial_allowed=True)
    assert find_in_hub_cache(_model(), cache_dir=cache) is None


def test_catalog_size_disagreeing_with_the_hub_is_refused(hub, payload, tmp_path):  # type: ignore[no-untyped-def]
    hub.add(REPO, FILENAME, payload)
    with pytest.raises(ChecksumMismatch, match="changed upstream"):
        download_from_hub(_model(size=len(payload) + 1), cache_dir=tmp_path / "hub")
    assert hub.gets() == []


def test_transient_errors_are_retried_with_backoff(hub, payload, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(download, "BACKOFF_S", 0.05)
    sha = hub.add(REPO, FILENAME, payload)
    hub.faults.fail_status = 503
    hub.faults.fail_count = 2

    path = download_from_hub(_model(), cache_dir=tmp_path / "hub")

    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
    assert hub.faults.fail_count == 0


def test_missing_file_is_a_clear_error(hub, tmp_path):  # type: ignore[no-untyped-def]
    with pytest.raises(DownloadError, match="not found"):
        download_from_hub(_model(), cache_dir=tmp_path / "hub")


def test_unreachable_hub_fails_fast(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SPECCHAT_MODEL_CACHE", str(tmp_path / "specchat-cache"))
    with fake_hub.serve() as server:
        url = server.url  # a port that is closed once the block ends
    with pytest.raises(HubUnreachable):
        download_from_hub(_model(), cache_dir=tmp_path / "hub", endpoint=url)


def test_auto_source_without_a_mirror_reports_the_hub_error(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SPECCHAT_MODEL_CACHE", str(tmp_path / "specchat-cache"))
    with fake_hub.serve() as server:
        url = server.url
    with pytest.raises(HubUnreachable):
        fetch_file(_model(), cache_dir=tmp_path / "hub", endpoint=url)


def test_fetch_file_finds_hub_cache_before_the_network(hub, payload, tmp_path):  # type: ignore[no-untyped-def]
    hub.add(REPO, FILENAME, payload)
    cache = tmp_path / "hub"
    first = fetch_file(_model(), source="hub", cache_dir=cache)
    hub.files.clear()  # the hub forgets the file: only the cache can answer now
    assert fetch_file(_model(), cache_dir=cache) == first


_DISK_FULL_SCRIPT = """
import resource, signal, sys
from pathlib import Path
from specchat.models.catalog import ModelFile
from specchat.models.download import NotEnoughSpace, download_from_hub
from tests.helpers import fake_hub

data = Path(sys.argv[1]).read_bytes()
cache = Path(sys.argv[2])
# The disk "fills" after 2 MiB: writes past it fail with EFBIG, as ENOSPC would.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (2 * 1024 * 1024, resource.RLIM_INFINITY))
model = ModelFile("a/b-GGUF", "big.gguf", "main", None, None, "", "", "")
with fake_hub.serve() as hub:
    hub.add("a/b-GGUF", "big.gguf", data)
    try:
        download_from_hub(model, cache_dir=cache, endpoint=hub.url)
    except NotEnoughSpace as error:
        print("REFUSED", error)
        sys.exit(0)
print("NOT REFUSED")
sys.exit(1)
"""


def test_disk_filling_up_mid_download_is_a_clear_error(tmp_path):  # type: ignore[no-untyped-def]
    import subprocess
    import sys

    source = tmp_path / "big.bin"
    source.write_bytes(_random_bytes(6 * download.HUB_CHUNK))
    cache = tmp_path / "hub"
    result = subprocess.run(
        [sys.executable, "-c", _DISK_FULL_SCRIPT, str(source), str(cache)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "disk filled up while downloading big.gguf" in result.stdout
    assert "partial file was removed" in result.stdout
    _no_leftovers(cache)
    assert not [p for p in cache.rglob("*.incomplete")]
