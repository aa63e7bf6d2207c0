"""A relay on loopback between llama.cpp's RPC client and each server, so a lost server is an
error and never the end of the process.

llama.cpp's client aborts the process (GGML_ABORT, "Remote RPC server crashed or returned
malformed response") when a server stops answering mid-pass, with the chat and whatever
the window held. llama.cpp connects to the relay instead; the relay passes each request
and its response through unchanged, and once the server is gone answers every later
request itself with a well-formed response of zeros, so llama.cpp's pass finishes. The
relay then raises a flag that the target's context checks as its abort callback
(`abort_flag`): the pass's last part, on this machine, is aborted, llama_decode fails, and
the engine reports the server by name (`lost_message`). The garbage never reaches a token.
"""

from __future__ import annotations

import ctypes
import logging
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from specchat.engine.llamacpp.rpc_wire import (
    Command,
    hello_response,
    recv_exact,
    response_size,
    split_endpoint,
)

log = logging.getLogger(__name__)

#: A server that stops answering with its machine gone (no reset sent) is noticed by TCP
#: keep-alive after about IDLE + INTERVAL * COUNT seconds.
_KEEPALIVE_IDLE_S = 10
_KEEPALIVE_INTERVAL_S = 5
_KEEPALIVE_COUNT = 3
_CONNECT_TIMEOUT_S = 10.0
_CHUNK = 1 << 20

#: Two bytes that read as an empty C string until a server is lost, then as "x": the target
#: context's abort callback is libc's strlen over them (rpc_devices.abort_callback), which
#: llama.cpp's CPU backend calls between operations without entering Python.
abort_flag = ctypes.create_string_buffer(2)
_lock = threading.Lock()
_relays: dict[str, Relay] = {}
_lost: dict[str, str] = {}
#: A round trip added to every response (set_added_rtt): the bench's stand-in for a slower
#: network, with no network interface touched.
_added_rtt_s = 0.0


@dataclass
class Traffic:
    """What passed through the relays since `reset_traffic`, every server together.

    llama.cpp's client sends most commands without waiting (SET_TENSOR, GRAPH_COMPUTE and
    GRAPH_RECOMPUTE have no response: they stream ahead, as on a real connection) and waits
    on the few that answer (GET_TENSOR above all, one per server a pass crosses). Each of
    those is one round trip on a network, and where the relay adds one (set_added_rtt).

    Attributes:
        commands: requests by command name (Command's names).
        waited: exchanges llama.cpp waited on, a request and its response.
        server_s: seconds from forwarding those requests to their responses' first bytes
            (the server's work, and the real network's round trips).
        added_s: seconds the relay held those responses back (set_added_rtt).
    """

    commands: Counter[str] = field(default_factory=Counter)
    waited: int = 0
    server_s: float = 0.0
    added_s: float = 0.0


_traffic = Traffic()


def traffic() -> Traffic:
    """A copy of the counts since the last reset_traffic."""
    with _lock:
        t = _traffic
        return Traffic(Counter(t.commands), t.waited, t.server_s, t.added_s)


def reset_traffic() -> None:
    with _lock:
        _traffic.commands.clear()
        _traffic.waited = 0
        _traffic.server_s = _traffic.added_s = 0.0


def _count(command: int) -> None:
    try:
        name = Command(command).name
    except ValueError:
        name = str(command)
    with _lock:
        _traffic.commands[name] += 1


def _count_wait(server_s: float, added_s: float) -> None:
    with _lock:
        _traffic.waited += 1
        _traffic.server_s += server_s
        _traffic.added_s += added_s


def set_added_rtt(seconds: float) -> None:
    """Hold every server's response `seconds` longer, as a network with that much more round
    trip would: one round trip per request that waits for an answer, none for those that
    do not (they stream ahead, as on a real connection)."""
    global _added_rtt_s
    _added_rtt_s = max(0.0, seconds)


def relay_for(endpoint: str) -> Relay:
    """The relay to the server at `endpoint`, started on first use and kept for the
    process's life (llama.cpp keeps each address it was given for as long)."""
    with _lock:
        relay = _relays.get(endpoint)
        if relay is None:
            relay = _relays[endpoint] = Relay(endpoint)
        return relay


def lost_message() -> str:
    """Which servers were lost and why, for people; "" when none was."""
    with _lock:
        return "; ".join(f"RPC server {e} {why}" for e, why in _lost.items())


def clear_lost() -> None:
    """Forget lost servers (a new load checked every server it uses)."""
    with _lock:
        _lost.clear()
        abort_flag[0] = b"\0"


def _mark_lost(endpoint: str, why: str) -> None:
    with _lock:
        _lost.setdefault(endpoint, why)
        abort_flag[0] = b"x"
    log.warning("RPC server %s %s", endpoint, why)


class Relay:
    """A loopback listener whose every connection is passed through to one server.

    Attributes:
        endpoint: the server, "host:port".
        local_endpoint: where llama.cpp connects instead ("127.0.0.1:port").
    """

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.local_endpoint = f"127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, name=f"rpc-relay {endpoint}", daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self._listener.accept()
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(
                target=self._serve, args=(client,), name=f"rpc-relay {self.endpoint}", daemon=True
            ).start()

    def _connect(self) -> socket.socket | None:
        try:
            upstream = socket.create_connection(
                split_endpoint(self.endpoint), timeout=_CONNECT_TIMEOUT_S
            )
        except OSError as error:
            _mark_lost(self.endpoint, f"cannot be reached ({error.strerror or error})")
            return None
        upstream.settimeout(None)
        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        upstream.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in (
            ("TCP_KEEPIDLE", _KEEPALIVE_IDLE_S),
            ("TCP_KEEPINTVL", _KEEPALIVE_INTERVAL_S),
            ("TCP_KEEPCNT", _KEEPALIVE_COUNT),
        ):
            if hasattr(socket, name):
                upstream.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
        return upstream

    def _serve(self, client: socket.socket) -> None:
        upstream = self._connect()
        with client:
            try:
                while True:
                    header = recv_exact(client, 9)
                    upstream = self._pass(client, upstream, header)
            except OSError:  # ConnectionError included
                return  # llama.cpp closed the connection: its device was freed
            finally:
                if upstream is not None:
                    upstream.close()

    def _pass(
        self, client: socket.socket, upstream: socket.socket | None, header: bytes
    ) -> socket.socket | None:
        """One request to the server and its response back; after the server is lost, the
        request read to its end and answered with zeros. Returns the live upstream or None."""
        command, size = struct.unpack("<BQ", header)
        # Small requests are read whole (GET_TENSOR's response size is in it); a tensor's
        # bytes stream through in chunks (no request that large has a response).
        request = recv_exact(client, size) if size <= _CHUNK else b""
        if upstream is not None:
            try:
                upstream.sendall(header + request)
            except OSError as error:
                self._lose(upstream, error)
                upstream = None
        if size > _CHUNK:
            upstream = self._stream_request(client, upstream, size)
            request = bytes(8)
        forwarded = time.perf_counter()
        expected = response_size(command, request)
        _count(command)
        if expected is None:
            return upstream
        header_sent, sent = False, 0
        if upstream is not None:
            try:
                (answer_size,) = struct.unpack("<Q", recv_exact(upstream, 8))
                answered = time.perf_counter()
                # The whole round trip at once, when the response begins: llama.cpp's
                # client sends nothing more until it has the response, so the request's
                # way there and the response's way back cost it the same, and requests
                # without a response, sent before it, travelled meanwhile.
                held = 0.0
                if _added_rtt_s:
                    time.sleep(_added_rtt_s)
                    held = time.perf_counter() - answered
                _count_wait(answered - forwarded, held)
                client.sendall(struct.pack("<Q", answer_size))
                header_sent, expected = True, answer_size
                buffer = memoryview(bytearray(min(answer_size, _CHUNK) or 1))
                while sent < answer_size:
                    got = upstream.recv_into(buffer[: min(answer_size - sent, _CHUNK)])
                    if not got:
                        raise ConnectionError("the connection was closed")
                    client.sendall(buffer[:got])
                    sent += got
                return upstream
            except (ConnectionError, OSError) as error:
                self._lose(upstream, error)
                upstream = None
        if header_sent:
            client.sendall(bytes(expected - sent))  # the rest of a response cut short
        elif command == Command.HELLO:
            client.sendall(hello_response())
        else:
            client.sendall(struct.pack("<Q", expected) + bytes(expected))
        return upstream

    def _stream_request(
        self, client: socket.socket, upstream: socket.socket | None, size: int
    ) -> socket.socket | None:
        """A large request's bytes from llama.cpp to the server, or read and dropped once
        the server is lost (llama.cpp must be able to finish writing them)."""
        left = size
        buffer = memoryview(bytearray(_CHUNK))
        while left:
            got = client.recv_into(buffer[: min(left, _CHUNK)])
            if not got:
                raise ConnectionError("llama.cpp closed the connection")
            left -= got
            if upstream is not None:
                try:
                    upstream.sendall(buffer[:got])
                except OSError as error:
                    self._lose(upstream, error)
                    upstream = None
        return upstream

    def _lose(self, upstream: socket.socket, error: BaseException) -> None:
        upstream.close()
        _mark_lost(self.endpoint, f"stopped answering ({error})")
