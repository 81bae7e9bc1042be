"""Read planning, device memory and the read engines for safetensors loading."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hipfile._lib import _hipfile
from hipfile.buffer import Buffer
from hipfile.engine import _wait_all
from hipfile.file import FileHandle
from hipfile.safetensors._header import (
    ALIGNMENT,
    DEFAULT_MAX_GAP,
    DTYPES,
    Dtype,
    SafetensorsError,
)

# --------------------------------------------------------------------------
# Planning
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadRange:
    """One read: ``size`` bytes at ``file_offset`` to ``buffer_offset``."""

    file_offset: int
    size: int
    buffer_offset: int


def _down(n: int, a: int) -> int:
    return n - n % a


def _up(n: int, a: int) -> int:
    return -(-n // a) * a


def plan_reads(spans: Sequence[tuple[int, int]], *, alignment: int = ALIGNMENT,
               max_gap: int = DEFAULT_MAX_GAP) -> tuple[list[ReadRange], int, int]:
    """Coalesce absolute file ranges ``(begin, end)`` into aligned reads.

    Ranges are sorted, widened to ``alignment`` and merged when the gap
    between them is at most ``max_gap``. The reads land in one buffer laid
    out like the file from the first aligned offset: file offset ``x`` is
    at buffer offset ``x - origin``.

    Returns
    -------
    (reads, origin, span)
        The reads, the file offset of buffer offset 0, and the buffer bytes
        the reads need.

    Raises
    ------
    ValueError
        A negative or reversed range, or a non-positive ``alignment``.
    """
    if alignment <= 0:
        raise ValueError(f"alignment must be positive, got {alignment}")
    live = []
    for b, e in spans:
        if b < 0 or e < b:
            raise ValueError(f"bad range ({b}, {e})")
        if e > b:
            live.append((_down(b, alignment), _up(e, alignment)))
    if not live:
        return [], 0, 0
    live.sort()
    merged: list[list[int]] = [list(live[0])]
    for b, e in live[1:]:
        last = merged[-1]
        if b - last[1] <= max_gap:
            last[1] = max(last[1], e)
        else:
            merged.append([b, e])
    origin = merged[0][0]
    reads = [ReadRange(b, e - b, b - origin) for b, e in merged]
    return reads, origin, merged[-1][1] - origin


# --------------------------------------------------------------------------
# Device memory
# --------------------------------------------------------------------------


def _rt() -> Any:
    """HIP-Python's ``hip`` module (loaded on first use)."""
    from hipfile._lib import _hip

    return _hip.hip


class DeviceAllocation:
    """``nbytes`` of device memory on ``device`` (``hipMalloc``, through the
    compiled ``DeviceMemory``), freed by :meth:`free` or when the object is
    collected.

    Raises
    ------
    ValueError
        ``nbytes`` is negative.
    HipRuntimeError
        As ``DeviceMemory``: ``hipSetDevice`` or ``hipMalloc`` failed.
    """

    def __init__(self, nbytes: int, device: int = 0) -> None:
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        self.nbytes = nbytes
        self.device = device
        # the memory is freed by compiled code alone (no finalizer of
        # Python code, in which a Ctrl-C would be lost: see
        # hipfile._lifetime)
        self._memory = _hipfile.DeviceMemory(max(nbytes, 1), device)
        self.ptr = int(self._memory.ptr)

    def free(self) -> None:
        """Free the memory now (idempotent). Views must not be used after."""
        self._memory.free()

    @property
    def freed(self) -> bool:
        """Whether the memory has been freed."""
        return bool(self._memory.freed)

    def __repr__(self) -> str:
        return (f"<hipfile.safetensors.DeviceAllocation ptr={self.ptr:#x} "
                f"nbytes={self.nbytes} device={self.device}>")


#: Make ``device`` current for a block, then restore the previous one.
_on_device = _hipfile.on_device


class DeviceTensor:
    """A tensor in device memory: a view of an allocation it keeps alive.

    Exposes ``__cuda_array_interface__`` (version 3) so CuPy, Numba, PyTorch
    and :class:`hipfile.Buffer` take it as it is.

    Parameters
    ----------
    owner
        The object owning the memory (kept alive).
    ptr
        Address of the first byte.
    dtype
        A :data:`DTYPES` name or :class:`Dtype`.
    shape
        The shape.
    device
        Device ordinal.

    Raises
    ------
    SafetensorsError
        Unknown dtype, or a packed dtype whose elements do not fill whole bytes.
    """

    def __init__(self, owner: Any, ptr: int, dtype: str | Dtype, shape: Sequence[int],
                 device: int = 0) -> None:
        if isinstance(dtype, str):
            if dtype not in DTYPES:
                raise SafetensorsError(f"unknown dtype {dtype!r}")
            dtype = DTYPES[dtype]
        self._owner = owner
        self.ptr = int(ptr)
        self.dtype = dtype
        self.shape = tuple(int(n) for n in shape)
        self.nbytes = dtype.nbytes(self.shape)
        self.device = device

    @classmethod
    def wrap(cls, memory: Any, dtype: str | Dtype, shape: Sequence[int],
             device: int = 0) -> DeviceTensor:
        """View existing device memory (anything :class:`hipfile.Buffer` takes)
        as a tensor.

        Raises
        ------
        ValueError
            ``memory`` is smaller than the tensor.
        """
        buf = Buffer(memory)
        t = cls(buf, buf.ptr, dtype, shape, device)
        if t.nbytes > buf.length:
            raise ValueError(f"{t.nbytes} bytes of tensor in {buf.length} bytes of memory")
        return t

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if self.dtype.bits % 8:  # packed: raw bytes
            shape: tuple[int, ...] = (self.nbytes,)
            typestr = "|u1"
        else:
            shape, typestr = self.shape, self.dtype.typestr
        return {"shape": shape, "typestr": typestr, "data": (self.ptr, False),
                "version": 3, "strides": None}

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def host_dtype(self) -> Any:
        """The numpy dtype of :meth:`copy_to_host`: numpy's own, ml_dtypes'
        for BF16 and FP8 when installed, else raw bytes (``V1``/``V2``);
        ``uint8`` bytes for the packed F4/F6 dtypes."""
        import numpy as np

        if self.dtype.bits % 8:
            return np.dtype(np.uint8)
        if not self.dtype.typestr.startswith("|V"):
            return np.dtype(self.dtype.typestr)
        try:
            import ml_dtypes  # type: ignore[import-not-found]
        except ImportError:
            return np.dtype(self.dtype.typestr)
        if self.dtype.torch is not None and hasattr(ml_dtypes, self.dtype.torch):
            return np.dtype(getattr(ml_dtypes, self.dtype.torch))
        return np.dtype(self.dtype.typestr)

    def copy_to_host(self) -> Any:
        """A new host ``numpy.ndarray`` with the tensor's bytes and shape (for
        packed dtypes: its bytes, shape ``(nbytes,)``), dtype
        :meth:`host_dtype`.

        Raises
        ------
        HipRuntimeError
            The copy failed (``hipMemcpy``).

        See Also
        --------
        hipMemcpy
        """
        import numpy as np

        from hipfile._lib import _hip

        dt = self.host_dtype()
        shape = (self.nbytes,) if self.dtype.bits % 8 else self.shape
        out = np.empty(shape, dt)
        if self.nbytes:
            hip: Any = _hip.hip
            with _on_device(self.device):
                _hip.check(hip.hipMemcpy(int(out.ctypes.data), self.ptr, self.nbytes,
                                         hip.hipMemcpyKind.hipMemcpyDeviceToHost), "hipMemcpy")
        return out

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> Any:
        """``numpy.asarray(tensor)``: a host copy (:meth:`copy_to_host`),
        never an object array.

        Raises
        ------
        ValueError
            ``copy=False``: device memory cannot be viewed from the host.
        """
        if copy is False:
            raise ValueError("a DeviceTensor is in device memory: numpy needs a copy "
                             "(copy_to_host())")
        out = self.copy_to_host()
        return out if dtype is None else out.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return (f"<hipfile.safetensors.DeviceTensor dtype={self.dtype.name} "
                f"shape={self.shape} ptr={self.ptr:#x} device={self.device}>")


# --------------------------------------------------------------------------
# The read step
# --------------------------------------------------------------------------


def read_ranges(fh: FileHandle, buffer: Any, reads: Sequence[ReadRange], *,
                task_size: int | None = None) -> int:
    """Read every range into ``buffer`` with :meth:`hipfile.FileHandle.pread`
    (parallel tasks), all ranges submitted before any is waited for.

    Returns
    -------
    int
        Bytes read (short reads at end of file included).

    Raises
    ------
    OSError, HipFileException
        The first failure, after every range has ended (so the memory is not
        released under running tasks).

    See Also
    --------
    hipFileRead
    """
    futures = [fh.pread(buffer, r.size, r.file_offset, buffer_offset=r.buffer_offset,
                         task_size=task_size)
               for r in reads]
    errors = [f.exception() for f in futures]  # waits for each
    for e in errors:
        if e is not None:
            raise e
    return sum(f.result() for f in futures)


def read_ranges_stream(fh: FileHandle, buffer: Any, reads: Sequence[ReadRange], *,
                       task_size: int | None = None) -> int:
    """Read every range into ``buffer`` with the stream-ordered engine
    (:meth:`hipfile.FileHandle.pread_async_ranges`, ``task_size`` chunks on
    the engine's threads), ordered after the null stream, then wait for all.
    Returns and raises as :func:`read_ranges`.

    See Also
    --------
    hipFileRead, hipStreamWriteValue32
    """
    handles = fh.pread_async_ranges(
        buffer, [(r.size, r.file_offset, r.buffer_offset) for r in reads], 0,
        task_size=task_size)
    return _wait_all(handles)


#: Read engines by name: ``reader(fh, buffer, reads, task_size=...) -> bytes``.
#: ``"parallel"``: :func:`read_ranges` (the package's thread pool);
#: ``"stream"``: :func:`read_ranges_stream` (the stream-ordered engine).
READERS: dict[str, Callable[..., int]] = {"parallel": read_ranges, "stream": read_ranges_stream}


def _task_size(task_size: int | None, reader: str = "stream") -> int | None:
    if task_size is None:
        if reader == "stream":
            from hipfile import defaults

            task_size = defaults.engine_task_size()
        else:
            from hipfile.parallel import default_task_size

            task_size = default_task_size()
    if task_size <= 0:
        raise ValueError(f"task_size must be positive, got {task_size}")
    return _up(task_size, ALIGNMENT)  # aligned tasks keep O_DIRECT reads aligned
