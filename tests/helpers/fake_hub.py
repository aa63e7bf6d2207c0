"""A real HTTP server on 127.0.0.1 that answers like the hub for hf_hub_download, with faults."""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


@dataclass
class Faults:
    """Knobs a test turns; each applies to the next GET requests.

    Attributes:
        cut_after: send only this many body bytes, then drop the connection.
        cuts: how many GETs get cut (each later one is served whole).
        corrupt: flip a byte in the middle of the body (headers still promise the original).
        size_lie: added to the announced size (HEAD and GET) while the real bytes are sent.
        chunk_delay: seconds slept after every chunk (a slow server).
        fail_status: answer this status instead (e.g. 503) ...
        fail_count: ... for this many requests (HEAD or GET).
        not_lfs: serve files as plain git files: no X-Linked-Etag, and the ETag is the git
            blob's sha1, not the sha256 (so nothing tells the client the sha256).
    """

    cut_after: int | None = None
    cuts: int = 1
    corrupt: bool = False
    size_lie: int = 0
    chunk_delay: float = 0.0
    fail_status: int | None = None
    fail_count: int = 0
    not_lfs: bool = False


@dataclass
class Request:
    """One request the hub received.

    Attributes:
        method: "HEAD" or "GET".
        path: request path.
        range: the Range header, or None.
    """

    method: str
    path: str
    range: str | None


@dataclass
class FakeHub:
    """The server's state: its files, its faults, and the requests it saw.

    Attributes:
        url: the endpoint to give huggingface_hub (HF_ENDPOINT).
        files: (repo, filename) -> bytes.
        faults: what to get wrong.
        requests: every request, in arrival order.
        chunk: bytes per write of a body.
    """

    url: str = ""
    files: dict[tuple[str, str], bytes] = field(default_factory=dict)
    faults: Faults = field(default_factory=Faults)
    requests: list[Request] = field(default_factory=list)
    chunk: int = 16 * 1024
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, repo: str, filename: str, data: bytes) -> str:
        """Serve `data` as repo/filename; returns its sha256 (the LFS etag)."""
        self.files[(repo, filename)] = data
        return hashlib.sha256(data).hexdigest()

    def file_requests(self) -> list[Request]:
        """Requests for files (huggingface_hub also asks the API for unrelated things)."""
        return [r for r in self.requests if "/resolve/" in r.path]

    def gets(self) -> list[Request]:
        return [r for r in self.file_requests() if r.method == "GET"]


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass  # keep pytest output clean

        def _lookup(self) -> bytes | None:
            match = _RESOLVE.match(unquote(self.path.split("?")[0]))
            if not match:
                return None
            return hub.files.get((match["repo"], match["file"]))

        def _fail(self) -> bool:
            faults = hub.faults
            with hub.lock:
                if faults.fail_status is None or faults.fail_count <= 0:
                    return False
                faults.fail_count -= 1
            self.send_response(faults.fail_status)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return True

        def _common_headers(self, data: bytes) -> None:
            sha = hashlib.sha256(data).hexdigest()
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
            if not hub.faults.not_lfs:
                self.send_header("X-Linked-Etag", f'"{sha}"')
                self.send_header("X-Linked-Size", str(len(data) + hub.faults.size_lie))
            self.send_header("Accept-Ranges", "bytes")

        def do_HEAD(self) -> None:
            hub.requests.append(Request("HEAD", self.path, self.headers.get("Range")))
            if self._fail():
                return
            data = self._lookup()
            if data is None:
                self.send_response(404)
                self.send_header("X-Error-Code", "EntryNotFound")
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self._common_headers(data)
            self.send_header("Content-Length", str(len(data) + hub.faults.size_lie))
            self.end_headers()

        def do_GET(self) -> None:
            range_header = self.headers.get("Range")
            hub.requests.append(Request("GET", self.path, range_header))
            if self._fail():
                return
            data = self._lookup()
            if data is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            faults = hub.faults
            original = data
            if faults.corrupt:
                middle = len(data) // 2
                data = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
            announced = len(data) + faults.size_lie
            start = 0
            match = _RANGE.match(range_header or "")
            if match:
                start = int(match.group(1))
                if start >= announced:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{announced}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{announced - 1}/{announced}")
            else:
                self.send_response(200)
            self._common_headers(original)
            self.send_header("Content-Length", str(announced - start))
            self.end_headers()
            body = data[start:]
            limit = None
            with hub.lock:
                if faults.cut_after is not None and faults.cuts > 0:
                    faults.cuts -= 1
                    limit = faults.cut_after
            sent = 0
            try:
                while sent < len(body):
                    piece = body[sent : sent + hub.chunk]
                    if limit is not None and sent + len(piece) > limit:
                        piece = piece[: limit - sent]
                    self.wfile.write(piece)
                    self.wfile.flush()
                    sent += len(piece)
                    if limit is not None and sent >= limit:
                        break
                    if faults.chunk_delay:
                        time.sleep(faults.chunk_delay)
            except (BrokenPipeError, ConnectionResetError):
                return
            if limit is not None or sent < announced - start:
                # Drop the connection without completing the promised body.
                self.close_connection = True
                self.connection.shutdown(2)

    return Handler


@contextmanager
def serve() -> Iterator[FakeHub]:
    """Run a FakeHub on an ephemeral port for the duration of the block."""
    hub = FakeHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    server.daemon_threads = True
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="fake-hub", daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
