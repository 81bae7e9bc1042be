"""Streams registered with hipFile for stream-ordered I/O."""

from __future__ import annotations

from typing import Any

from hipfile._interop import stream_info
from hipfile._lib._hipfile import StreamCore
from hipfile._lifetime import RegistrationLifetime
from hipfile.enums import StreamFlags

__all__ = ["Stream"]


class Stream(StreamCore, RegistrationLifetime):
    """A HIP stream as hipFile sees it, registered or not.

    Parameters
    ----------
    stream
        A HIP-Python ``hipStream_t``, an int handle (0: the null stream), an
        object with ``__cuda_stream__``, a PyTorch stream (``.cuda_stream``)
        or a CuPy stream (``.ptr``). The object is kept alive.
    flags
        :class:`~hipfile.StreamFlags`: which async inputs the library copies
        at submit instead of reading when the operation runs.

    Raises
    ------
    TypeError
        Unsupported stream object.
    ValueError
        Flags outside ``StreamFlags.MASK``.

    Examples
    --------
    >>> with Stream(hip_stream) as st:
    ...     h = fh.read_async(buf, n, 0, 0, st)

    See Also
    --------
    hipFileStreamRegister, hipFileStreamDeregister
    """

    def __init__(self, stream: Any = 0, flags: int = 0) -> None:
        handle, owner = stream_info(stream)
        self._setup(handle, int(flags), owner)

    @property
    def stream_flags(self) -> StreamFlags:
        """The flags as :class:`StreamFlags`."""
        return StreamFlags(self.flags)

    def __int__(self) -> int:
        return int(self.handle)

    def __repr__(self) -> str:
        state = "registered" if self.registered else "unregistered"
        return f"<hipfile.Stream handle={self.handle:#x} flags={self.stream_flags!r} {state}>"
