"""Which device the jax backend runs on, and the error when the one asked for is missing."""
from __future__ import annotations

import functools
from typing import Optional

from ...debug_info import user_location
from ...errors import AxgraphValueError

#: The platforms a transformer may ask for (JAX's names; "gpu" covers CUDA and ROCm).
PLATFORMS = ("cpu", "gpu", "tpu")


class DeviceNotFoundError(AxgraphValueError):
    """The device platform asked for (``make_transformer("gpu")``) is not one JAX sees."""


def find_device(platform: Optional[str]):
    """The first device of `platform` that JAX sees (None: JAX's default device).

    Parameters
    ----------
    platform : str or None
        "cpu", "gpu" or "tpu"; None takes whatever JAX chose by default (a GPU or TPU
        when it finds one, else the CPU).

    Returns
    -------
    jax.Device
        The device computations run on.

    Raises
    ------
    AxgraphValueError
        `platform` is not one of `PLATFORMS`.
    DeviceNotFoundError
        JAX sees no device of `platform`; the message lists the devices it sees.
    """
    import jax

    if platform is None:
        return jax.devices()[0]
    if platform not in PLATFORMS:
        raise AxgraphValueError(f"device platform {platform!r} is not one of {PLATFORMS}",
                                user_location())
    try:
        return jax.devices(platform)[0]
    except (RuntimeError, IndexError):
        seen = ", ".join(f"{d.platform}:{d.id} ({d.device_kind})" for d in jax.devices())
        raise DeviceNotFoundError(
            f"no {platform} device: JAX sees only {seen}. Install a JAX build for the "
            f"{platform} (see JAX's installation guide) or use make_transformer('jax'), "
            f"which runs on the devices JAX sees", user_location()) from None


def memory_bytes(device) -> Optional[int]:
    """How many bytes `device` can hold at most: an accelerator's own memory (as its
    allocator reports it), or the host's RAM and swap for a CPU device; None where neither
    is known. A result larger than this cannot exist, and XLA's CPU runtime aborts the whole
    process on an allocation that fails, so such a program is refused before it runs.

    Parameters
    ----------
    device : jax.Device
        The device a program runs on.

    Returns
    -------
    int or None
        The bound in bytes.
    """
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        limit = stats.get("bytes_limit")
        return int(limit) if limit else None
    return _host_memory_bytes()


@functools.lru_cache(maxsize=1)
def _host_memory_bytes() -> Optional[int]:
    """The host's RAM plus swap, from /proc/meminfo (None where there is none to read):
    read once per process."""
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            fields = dict(line.split(":", 1) for line in info if ":" in line)
        return sum(int(fields[name].split()[0]) * 1024 for name in ("MemTotal", "SwapTotal"))
    except (OSError, KeyError, ValueError):
        return None
