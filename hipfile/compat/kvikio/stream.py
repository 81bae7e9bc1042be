"""KvikIO's ``stream_register``/``stream_deregister`` on hipFile.

``stream_register(raw_stream, flags)`` registers a stream with
``hipFileStreamRegister`` (the flags say which inputs of stream-ordered
calls the library may read at submit; see :class:`hipfile.StreamFlags`),
``stream_deregister(raw_stream)`` deregisters it. ``raw_stream`` is an int
handle, as in KvikIO, or any stream :class:`hipfile.Stream` takes. Unlike
KvikIO, which skips both in compatibility mode, they always register.
"""

from __future__ import annotations

import threading
from typing import Any

from hipfile._interop import stream_info
from hipfile.compat.kvikio.cufile import _deregister, _runtime
from hipfile.enums import OpError
from hipfile.errors import HipFileException
from hipfile.stream import Stream

__all__ = ["stream_deregister", "stream_register"]

_lock = threading.Lock()
_registered: dict[int, Stream] = {}       # stream handle -> its registration


def stream_register(raw_stream: Any, flags: int) -> None:
    """Register ``raw_stream`` with hipFile.

    Raises
    ------
    RuntimeError
        The stream is registered already (``InvalidValue``), or hipFile
        refused it; also the :class:`hipfile.HipFileException`.
    TypeError
        ``raw_stream`` is not a stream.
    ValueError
        ``flags`` outside :data:`hipfile.StreamFlags.MASK`.

    See Also
    --------
    hipFileStreamRegister
    """
    handle, _owner = stream_info(raw_stream)
    with _lock:
        if int(handle) in _registered:
            from hipfile.errors import InvalidValueError

            raise _runtime(InvalidValueError(
                int(OpError.INVALID_VALUE), func="hipFileStreamRegister",
                detail=f"the stream {int(handle):#x} is registered already"))
        reg = Stream(raw_stream, flags)
        try:
            reg.register()
        except HipFileException as e:
            raise _runtime(e) from None
        _registered[int(handle)] = reg


def stream_deregister(raw_stream: Any) -> None:
    """Deregister a stream registered by :func:`stream_register`.

    Raises
    ------
    RuntimeError
        The stream is not registered (``InvalidValue``), or hipFile
        refused; also the :class:`hipfile.HipFileException`.
    hipfile.InFlightError
        Stream-ordered operations on it are still in flight.

    See Also
    --------
    hipFileStreamDeregister
    """
    from hipfile.errors import InvalidValueError

    handle, _owner = stream_info(raw_stream)
    _deregister(_registered, _lock, int(handle), lambda: InvalidValueError(
        int(OpError.INVALID_VALUE), func="hipFileStreamDeregister",
        detail=f"the stream {int(handle):#x} is not registered"))
