"""llama.cpp's RPC protocol as SpecChat speaks it: server addresses, and a server asked
over its own wire whether it answers, which protocol it speaks and what memory it offers.

The wire (ggml/src/ggml-rpc/ggml-rpc.cpp): a request is one command byte, its size as a
little-endian uint64 and its bytes; a response, for the commands that have one, is its size
and its bytes. Every connection opens with HELLO, which answers the server's version.
llama.cpp's own client aborts the whole process when a server cannot be reached, speaks
another version or drops (GGML_ABORT): SpecChat asks here first, and relays every later
connection (rpc_relay) so that a server lost mid-answer is an error, never an abort.
"""

from __future__ import annotations

import enum
import ipaddress
import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass

#: The protocol this llama.cpp speaks (ggml-rpc.h: RPC_PROTO_MAJOR_VERSION, MINOR, PATCH).
PROTOCOL = (7, 0, 0)
#: The port llama.cpp's rpc-server listens on by default.
DEFAULT_PORT = 50052
#: Bytes of transport capabilities HELLO carries both ways (transport.h: RPC_CONN_CAPS_SIZE).
CAPS_SIZE = 24
#: How long a server may take to answer a check before it counts as unreachable.
PROBE_TIMEOUT_S = 5.0


class Command(enum.IntEnum):
    """The RPC commands (enum rpc_cmd), in their wire order."""

    ALLOC_BUFFER = 0
    GET_ALIGNMENT = enum.auto()
    GET_MAX_SIZE = enum.auto()
    BUFFER_GET_BASE = enum.auto()
    FREE_BUFFER = enum.auto()
    BUFFER_CLEAR = enum.auto()
    SET_TENSOR = enum.auto()
    SET_TENSOR_HASH = enum.auto()
    GET_TENSOR = enum.auto()
    COPY_TENSOR = enum.auto()
    GRAPH_COMPUTE = enum.auto()
    GET_DEVICE_MEMORY = enum.auto()
    INIT_TENSOR = enum.auto()
    GET_ALLOC_SIZE = enum.auto()
    HELLO = enum.auto()
    DEVICE_COUNT = enum.auto()
    GRAPH_RECOMPUTE = enum.auto()
    MEMSET_TENSOR = enum.auto()


#: The size of each command's response; commands not listed have none. GET_TENSOR's is the
#: size its request asks for (its last eight bytes: see response_size).
RESPONSE_SIZES: dict[int, int] = {
    Command.HELLO: 4 + CAPS_SIZE,
    Command.DEVICE_COUNT: 4,
    Command.ALLOC_BUFFER: 16,
    Command.GET_ALLOC_SIZE: 8,
    Command.GET_ALIGNMENT: 8,
    Command.GET_MAX_SIZE: 8,
    Command.BUFFER_GET_BASE: 8,
    Command.SET_TENSOR_HASH: 1,
    Command.COPY_TENSOR: 1,
    Command.GET_DEVICE_MEMORY: 16,
}


def response_size(command: int, request: bytes) -> int | None:
    """How many bytes the server answers `command` with, None when it sends no response."""
    if command == Command.GET_TENSOR:
        return int(struct.unpack_from("<Q", request, len(request) - 8)[0])
    return RESPONSE_SIZES.get(command)


class RpcServerError(RuntimeError):
    """A server cannot be used; the message names it and says why, for people.

    Attributes:
        endpoint: the server, "host:port".
    """

    def __init__(self, endpoint: str, message: str) -> None:
        super().__init__(f"RPC server {endpoint}: {message}")
        self.endpoint = endpoint


@dataclass(frozen=True)
class ServerInfo:
    """What a server offers.

    Attributes:
        endpoint: "host:port".
        version: its protocol version (major, minor, patch).
        memory: each of its devices' free and total bytes.
    """

    endpoint: str
    version: tuple[int, int, int]
    memory: tuple[tuple[int, int], ...]

    @property
    def free_bytes(self) -> int:
        return sum(free for free, _total in self.memory)

    def describe(self) -> str:
        """One line for people: '10.0.0.2:50052: 2 devices, 23.1 GiB free'."""
        count = len(self.memory)
        devices = "1 device" if count == 1 else f"{count} devices"
        return f"{self.endpoint}: {devices}, {self.free_bytes / 2**30:.1f} GiB free"


_last_servers: tuple[ServerInfo, ...] = ()


def remember_servers(servers: tuple[ServerInfo, ...]) -> None:
    """What the last load found on its servers (their free memory before it), for the window:
    a loaded target holds its servers' one connection, so they cannot be asked again."""
    global _last_servers
    _last_servers = servers


def last_servers() -> tuple[ServerInfo, ...]:
    return _last_servers


def parse_endpoints(text: str | Sequence[str]) -> tuple[str, ...]:
    """'HOST:PORT[,HOST:PORT…]' (or those items) as normalised endpoints; a missing port is
    DEFAULT_PORT. Raises ValueError naming the item at fault."""
    items = text.split(",") if isinstance(text, str) else list(text)
    endpoints: list[str] = []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        host, _, port_text = item.rpartition(":") if ":" in item else (item, "", "")
        host = host.strip("[]")
        if not host:
            raise ValueError(f"{item!r}: no host (write HOST:PORT)")
        try:
            port = int(port_text) if port_text else DEFAULT_PORT
        except ValueError:
            raise ValueError(f"{item!r}: the port is not a number") from None
        if not 0 < port < 65536:
            raise ValueError(f"{item!r}: the port must be 1 to 65535")
        endpoint = f"{host}:{port}"
        if endpoint not in endpoints:
            endpoints.append(endpoint)
    return tuple(endpoints)


def split_endpoint(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def hello_request() -> bytes:
    """HELLO with no transport capabilities: plain TCP."""
    return struct.pack("<BQ", Command.HELLO, CAPS_SIZE) + bytes(CAPS_SIZE)


def hello_response() -> bytes:
    """This build's own HELLO answer (size, then version and no capabilities)."""
    return struct.pack("<Q4B", 4 + CAPS_SIZE, *PROTOCOL, 0) + bytes(CAPS_SIZE)


def recv_exact(sock: socket.socket, size: int) -> bytes:
    """Exactly `size` bytes; ConnectionError when the peer closes first."""
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 20))
        if not chunk:
            raise ConnectionError("the connection was closed")
        data += chunk
    return bytes(data)


def _call(sock: socket.socket, command: Command, request: bytes, expected: int) -> bytes:
    sock.sendall(struct.pack("<BQ", command, len(request)) + request)
    (size,) = struct.unpack("<Q", recv_exact(sock, 8))
    if size != expected:
        raise ConnectionError(f"answered {command.name} with {size} bytes, not {expected}")
    return recv_exact(sock, size)


def probe(endpoint: str, *, timeout: float = PROBE_TIMEOUT_S) -> ServerInfo:
    """Ask the server at `endpoint` for its version and devices' memory, on a connection of
    its own. Raises RpcServerError saying what failed: not reachable, another protocol,
    busy (a server answers one client at a time), or an answer that makes no sense."""
    host, port = split_endpoint(endpoint)
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as error:
        raise RpcServerError(endpoint, f"cannot be reached ({error.strerror or error})") from None
    with sock:
        try:
            sock.sendall(hello_request())
            (size,) = struct.unpack("<Q", recv_exact(sock, 8))
            if size != 4 + CAPS_SIZE:
                raise RpcServerError(endpoint, _version_text(f"a HELLO answer of {size} bytes"))
            major, minor, patch, _pad = recv_exact(sock, size)[:4]
            if major != PROTOCOL[0] or minor > PROTOCOL[1]:
                raise RpcServerError(endpoint, _version_text(f"protocol {major}.{minor}.{patch}"))
            (count,) = struct.unpack("<I", _call(sock, Command.DEVICE_COUNT, b"", 4))
            memory = tuple(
                struct.unpack("<QQ", _call(sock, Command.GET_DEVICE_MEMORY, pack_device(i), 16))
                for i in range(count)
            )
        except TimeoutError:
            raise RpcServerError(
                endpoint, "does not answer (busy with another client, or not an RPC server?)"
            ) from None
        except ConnectionError:
            # A server of another major version reads HELLO's size as wrong and hangs up.
            raise RpcServerError(endpoint, _version_text("a closed connection")) from None
        except OSError as error:
            raise RpcServerError(endpoint, f"failed: {error.strerror or error}") from None
    if not memory:
        raise RpcServerError(endpoint, "offers no devices")
    return ServerInfo(endpoint, (major, minor, patch), tuple((f, t) for f, t in memory))


def pack_device(index: int) -> bytes:
    return struct.pack("<I", index)


def _version_text(got: str) -> str:
    version = ".".join(map(str, PROTOCOL))
    return (
        f"answered the handshake with {got}: it speaks another RPC protocol than this "
        f"SpecChat's {version} (run the same SpecChat or llama.cpp version on both machines)"
    )
