"""KvikIO's ``memory_register``, ``memory_deregister`` and
``bounce_buffer_free`` on hipFile.

``memory_register(buf)`` registers the whole device allocation that holds
``buf`` (its base and size asked of ``hipMemGetAddressRange``; the buffer's
own range where the runtime knows no allocation) with
``hipFileBufRegister``, and ``memory_deregister(buf)`` deregisters it, from
any buffer in the same allocation, as KvikIO does. Unlike KvikIO, which
skips both in compatibility mode, they always register: hipFile uses the
registration on every path. Registrations are dropped, at the latest, when
the driver closes.
"""

from __future__ import annotations

import threading
from typing import Any

from hipfile._interop import buffer_info
from hipfile.buffer import Buffer
from hipfile.compat.kvikio.cufile import _deregister, _runtime
from hipfile.enums import OpError
from hipfile.errors import HipFileException

__all__ = ["bounce_buffer_free", "memory_deregister", "memory_register"]

_lock = threading.Lock()
_registered: dict[int, Buffer] = {}       # allocation base -> its registration


def _allocation(buf: Any) -> tuple[int, int, Any]:
    """(base, size, owner) of the device allocation that holds ``buf``."""
    ptr, nbytes, owner = buffer_info(buf)
    from hipfile._lib import _hip

    hip: Any = _hip.hip
    try:
        err, base, size = hip.hipMemGetAddressRange(ptr)
        if int(err) == 0 and int(base) and int(size):
            base, size = int(base), int(size)
            if base <= ptr and ptr + nbytes <= base + size:
                return base, size, owner
    except Exception:
        pass
    return int(ptr), int(nbytes), owner


def memory_register(buf: Any) -> None:
    """Register the device allocation holding ``buf`` with hipFile.

    Raises
    ------
    RuntimeError
        The allocation is registered already, or hipFile refused it (the
        :class:`hipfile.HipFileException`, also a ``RuntimeError``).
    TypeError, ValueError
        ``buf`` is not device memory.

    See Also
    --------
    hipFileBufRegister, hipMemGetAddressRange
    """
    base, size, owner = _allocation(buf)
    with _lock:
        if base in _registered:
            from hipfile.errors import MemoryAlreadyRegisteredError

            raise _runtime(MemoryAlreadyRegisteredError(
                int(OpError.MEMORY_ALREADY_REGISTERED), func="hipFileBufRegister",
                detail=f"the allocation at {base:#x} ({size} bytes) is registered already"))
        reg = Buffer(base, size)
        reg._hipfile_keep = owner  # type: ignore[attr-defined]
        try:
            reg.register()
        except HipFileException as e:
            raise _runtime(e) from None
        _registered[base] = reg


def memory_deregister(buf: Any) -> None:
    """Deregister the device allocation holding ``buf`` (registered by
    :func:`memory_register`).

    Raises
    ------
    RuntimeError
        It is not registered (``MemoryNotRegistered``, also a
        :class:`hipfile.HipFileException`), or hipFile refused.

    See Also
    --------
    hipFileBufDeregister
    """
    from hipfile.errors import MemoryNotRegisteredError

    base, size, _owner = _allocation(buf)
    _deregister(_registered, _lock, base, lambda: MemoryNotRegisteredError(
        int(OpError.MEMORY_NOT_REGISTERED), func="hipFileBufDeregister",
        detail=f"the allocation at {base:#x} ({size} bytes) is not registered"))


#: Bytes of one slot of the pinned slot pool (four 8-byte fields).
_SLOT_BYTES = 32


def _staging_bytes(info: Any) -> int:
    """The sum of every ``staging_bytes`` in the engine's ``info()``."""
    if isinstance(info, dict):
        return sum(int(v) if k == "staging_bytes" else _staging_bytes(v)
                   for k, v in info.items())
    if isinstance(info, list | tuple):
        return sum(_staging_bytes(v) for v in info)
    return 0


def _pinned_bytes() -> int:
    """Pinned host memory held now by the slot pool and the engine's
    staging rings."""
    from hipfile import engine
    from hipfile.async_io import pool_stats

    stats = pool_stats()
    pool = int(stats["pages"]) * int(stats["slots_per_page"]) * _SLOT_BYTES
    return pool + _staging_bytes(engine.info())


def bounce_buffer_free() -> int:
    """Free the pinned host memory kept for staging where nothing uses it:
    the bounce buffers of compatibility-mode transfers (``defaults``
    ``compat_mode`` ON: ``bounce_buffer_size`` bytes each), and the slot
    pool of stream-ordered I/O and the engine's staging rings, as
    ``hipfile.trim_pool()`` frees them. Returns the bytes freed (0 when
    none was free), as KvikIO's ``bounce_buffer_free`` does.

    See Also
    --------
    hipHostFree
    """
    from hipfile.async_io import trim_pool
    from hipfile.compat.kvikio._bounce import free_idle

    freed = free_idle()
    before = _pinned_bytes()
    trim_pool()
    return freed + max(0, before - _pinned_bytes())
