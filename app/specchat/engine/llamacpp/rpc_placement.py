"""Where a target's layers go when other machines lend their devices: this machine's share
and each server's, in proportion to free memory or as the user splits them.

Only the target is placed here; drafts, heads and copying drafters stay on this machine
(their loads never see the servers: SpecChat never registers them with ggml). The target's
input and output layers stay on this machine too, so every pass ends on this machine's CPU,
where the abort callback reads whether a server was lost during the pass (rpc_relay).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import llama_cpp

from specchat.engine.llamacpp.backend import gpu_backend_name
from specchat.engine.llamacpp.rpc_devices import Device, local_devices, remote_devices
from specchat.engine.llamacpp.rpc_wire import (
    RpcServerError,
    ServerInfo,
    parse_endpoints,
    probe,
    remember_servers,
)
from specchat.ggml_backends import ggml_function


@dataclass(frozen=True)
class RemoteTarget:
    """The servers a target's layers spread over, and how.

    Attributes:
        endpoints: the RPC servers, "host:port".
        tensor_split: shares for this machine, then each server in order (any scale); empty
            for shares in proportion to free memory.
    """

    endpoints: tuple[str, ...]
    tensor_split: tuple[float, ...] = ()

    @classmethod
    def parse(cls, servers: str, tensor_split: str = "") -> RemoteTarget | None:
        """From the command line's --rpc and --tensor-split; None for no servers. Raises
        ValueError saying what is wrong."""
        endpoints = parse_endpoints(servers)
        if not endpoints:
            return None
        shares: tuple[float, ...] = ()
        if tensor_split.strip():
            try:
                shares = tuple(float(v) for v in tensor_split.replace("/", ",").split(","))
            except ValueError:
                raise ValueError(f"--tensor-split {tensor_split!r}: write numbers") from None
            if len(shares) != len(endpoints) + 1 or min(shares) < 0 or not sum(shares):
                raise ValueError(
                    f"--tensor-split needs {len(endpoints) + 1} shares that are not negative "
                    "(this machine's, then each server's)"
                )
        return cls(endpoints, shares)

    @staticmethod
    def servers_in(key: str) -> tuple[str, ...]:
        """The servers a key (LoadInfo.remote) names."""
        return tuple(e for e in key.split(" ", 1)[0].split(",") if e)

    def key(self) -> str:
        """The device set for cost tables and reports: '10.0.0.2:50052,10.0.0.3:50052' with
        the shares when given ('… split 1/2/2')."""
        text = ",".join(self.endpoints)
        if self.tensor_split:
            text += " split " + "/".join(f"{v:g}" for v in self.tensor_split)
        return text


def remote_target(servers: str) -> RemoteTarget | None:
    """The window's setting as a RemoteTarget (None when empty); RpcServerError when it
    does not read as servers."""
    try:
        return RemoteTarget.parse(servers)
    except ValueError as error:
        raise RpcServerError(servers.strip(), f"not a server list: {error}") from None


@dataclass
class Placement:
    """A target's devices and split as llama_model_params takes them.

    Attributes:
        servers: what each server said when it was checked.
        n_gpu_layers: layers on the listed devices (the rest, and the output, stay on this
            machine's CPU).
        layers: how many layers each of this machine's CPU, its GPUs and the servers'
            devices holds, named, for people.
    """

    servers: tuple[ServerInfo, ...]
    n_gpu_layers: int
    layers: tuple[tuple[str, int], ...]
    _devices: Any = field(repr=False, default=None)
    _split: Any = field(repr=False, default=None)
    _overrides: Any = field(repr=False, default=None)

    def apply(self, params: Any) -> None:
        """Set `params` (llama_model_params) to this placement; the arrays stay alive here."""
        params.n_gpu_layers = self.n_gpu_layers
        params.devices = ctypes.cast(self._devices, ctypes.c_void_p)
        params.tensor_split = ctypes.cast(self._split, ctypes.POINTER(ctypes.c_float))
        params.tensor_buft_overrides = ctypes.cast(self._overrides, ctypes.c_void_p)

    def describe(self) -> str:
        """'CPU 8 + 10.0.0.2:50052 16 layers', for LoadInfo and the cost key."""
        return " + ".join(f"{name} {count}" for name, count in self.layers) + " layers"


def place(remote: RemoteTarget, path: Path) -> Placement:
    """Check every server (RpcServerError naming the first that cannot be used) and place
    `path`'s layers over this machine and them."""
    servers = tuple(probe(endpoint) for endpoint in remote.endpoints)
    remember_servers(servers)
    n_layer, n_head_layers = _block_count(path)
    remote_devs = [(e, remote_devices(e)) for e in remote.endpoints]
    gpus = list(local_devices()) if gpu_backend_name() is not None else []
    cpu_free = 0 if gpus else sum(d.free for d in local_devices())
    local_share = float(sum(d.free for d in gpus)) + cpu_free
    shares = [local_share] + [float(sum(d.free for d in devs)) for _, devs in remote_devs]
    if remote.tensor_split:
        shares = list(remote.tensor_split)
    total = sum(shares) or 1.0
    # Each device's share of the layers: a machine's share spread over its devices by their
    # free memory.
    devices: list[Device] = []
    weights: list[float] = []
    for share, devs in zip(shares, [gpus] + [d for _, d in remote_devs], strict=True):
        frees = [max(d.free, 1) for d in devs]
        for device, free in zip(devs, frees, strict=True):
            devices.append(device)
            weights.append(share / total * free / sum(frees))
    cpu_share = 0.0 if gpus else shares[0] / total
    counts = _whole_layers([cpu_share, *weights], n_layer)
    cpu_layers, device_layers = counts[0], counts[1:]
    offloaded = n_layer - cpu_layers
    # llama.cpp offloads the last `n_gpu_layers` of the layers and the output layer, which
    # counts as one more and stays here (_output_on_cpu): the split is given in layers, the
    # output's slot added to the last device's.
    split_values = [float(c) for c in device_layers]
    if split_values:
        split_values[-1] += 1.0
    split = (ctypes.c_float * max(llama_cpp.LLAMA_MAX_DEVICES, len(devices)))(*split_values)
    handles = (ctypes.c_void_p * (len(devices) + 1))(*(d.handle for d in devices), None)
    owner = {d.handle: e for e, devs in remote_devs for d in devs}
    layers: dict[str, int] = {} if gpus else {"CPU": cpu_layers}
    for device, count in zip(devices, device_layers, strict=True):
        name = owner.get(device.handle, device.name)
        layers[name] = layers.get(name, 0) + count
    return Placement(
        servers,
        offloaded + 1 if offloaded else 0,
        tuple(layers.items()),
        handles,
        split,
        _kept_here(n_layer, n_head_layers),
    )


def _whole_layers(shares: list[float], n_layer: int) -> list[int]:
    """`n_layer` layers dealt out in proportion to `shares`, the remainders to the largest."""
    total = sum(shares) or 1.0
    exact = [n_layer * s / total for s in shares]
    counts = [int(e) for e in exact]
    by_remainder = sorted(range(len(shares)), key=lambda i: exact[i] - counts[i], reverse=True)
    for i in by_remainder[: n_layer - sum(counts)]:
        counts[i] += 1
    return counts


class _BufferOverride(ctypes.Structure):
    """struct llama_model_tensor_buft_override: tensors whose names match go to `buft`."""

    _fields_ = (("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p))


#: The output layer (and the embedding a model without one reads its logits through).
_OUTPUT_TENSORS = (b"^output", b"^token_embd")


def _kept_here(n_layer: int, n_head_layers: int) -> Any:
    """Overrides keeping the output layer in this machine's memory, so its CPU computes each
    pass's end (llama.cpp would offload the output layer first), and the target's own MTP
    layers (its last `n_head_layers`), which draft here."""
    cpu = ggml_function("ggml_backend_dev_by_type", ctypes.c_void_p, ctypes.c_int)(0)
    buft = ggml_function("ggml_backend_dev_buffer_type", ctypes.c_void_p, ctypes.c_void_p)(cpu)
    heads = tuple(f"^blk\\.{i}\\.".encode() for i in range(n_layer - n_head_layers, n_layer))
    overrides = [_BufferOverride(pattern, buft) for pattern in (*_OUTPUT_TENSORS, *heads)]
    return (_BufferOverride * (len(overrides) + 1))(*overrides, _BufferOverride(None, None))


def _block_count(path: Path) -> tuple[int, int]:
    """The file's layers, and how many of the last are MTP (nextn) layers."""
    from specchat.models.gguf_reader import read_metadata

    meta = read_metadata(path, arrays=False)
    architecture = str(meta.values.get("general.architecture", ""))
    n_layer = int(meta.values.get(f"{architecture}.block_count", 0))
    return n_layer, min(n_layer, int(meta.values.get(f"{architecture}.nextn_predict_layers", 0)))
