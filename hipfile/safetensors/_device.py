"""Frameworks, devices, the memory tensors are read into, and the views
made of it."""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from typing import Any

from hipfile._interop import as_int
from hipfile.buffer import Buffer
from hipfile.safetensors._header import SafetensorsError, TensorInfo
from hipfile.safetensors._read import DeviceAllocation, DeviceTensor

#: ``framework`` names: ``"hip"`` (:class:`DeviceTensor`), ``"pt"``/``"torch"``
#: (``torch.Tensor``), ``"np"``/``"numpy"`` (``numpy.ndarray``, host only).
FRAMEWORKS: dict[str, str] = {"hip": "hip", "pt": "torch", "torch": "torch", "np": "numpy",
                              "numpy": "numpy"}


def check_framework(framework: str) -> str:
    """The canonical framework name (``"hip"``, ``"torch"``, ``"numpy"``).

    Raises
    ------
    SafetensorsError
        An unknown name (a :class:`ValueError`, as safetensors raises
        ``SafetensorError`` there).
    """
    if not isinstance(framework, str) or framework not in FRAMEWORKS:
        raise SafetensorsError(f"framework must be one of {tuple(FRAMEWORKS)}, got "
                               f"{framework!r}")
    return FRAMEWORKS[framework]


@dataclass(frozen=True)
class Device:
    """Where tensors go: ``kind`` ``"cpu"`` or ``"cuda"`` (a GPU, ROCm's
    or CUDA's: torch names both ``cuda``) and the GPU's ordinal."""

    kind: str
    index: int = 0

    @property
    def is_cpu(self) -> bool:
        """Whether this is host memory."""
        return self.kind == "cpu"

    def torch(self) -> str:
        """The torch device string."""
        return "cpu" if self.is_cpu else f"cuda:{self.index}"


def parse_device(device: Any, framework: str) -> Device:
    """Read ``device`` as safetensors does: ``"cpu"``, ``"cuda"``,
    ``"cuda:N"`` (also ``"hip"``/``"hip:N"``), an int, a ``torch.device``;
    ``None`` is ``"cpu"`` for torch and numpy and GPU 0 for ``"hip"``.

    Raises
    ------
    TypeError
        Not one of those types.
    SafetensorsError
        A malformed or negative device, a GPU for numpy, host memory for
        ``"hip"`` (a :class:`ValueError`; safetensors raises
        ``SafetensorError`` for these).
    """
    if device is None:
        dev = Device("cuda", 0) if framework == "hip" else Device("cpu")
    elif isinstance(device, int):    # a bool too, which the rule refuses
        device = as_int(device, "device", "a str, an int or a torch.device")
        if device < 0:
            raise SafetensorsError(f"device ordinal must be >= 0, got {device}")
        dev = Device("cuda", device)
    elif isinstance(device, str) or type(device).__module__.startswith("torch"):
        text = str(device).strip()
        kind, _, index = text.partition(":")
        if kind == "cpu" and not index:
            dev = Device("cpu")
        elif kind in ("cuda", "hip") and (not index or index.isdigit()):
            if index:
                dev = Device("cuda", int(index))
            else:
                dev = Device("cuda", _current_device(framework))
        elif text.isdigit():
            dev = Device("cuda", int(text))
        else:
            raise SafetensorsError(f"device must be 'cpu', 'cuda', 'cuda:N' or an ordinal, "
                                   f"got {device!r}")
    else:
        raise TypeError(f"device must be a str, an int or a torch.device, not "
                        f"{type(device).__name__}")
    if framework == "numpy" and not dev.is_cpu:
        raise SafetensorsError(f"Device {device} is not supported for framework numpy: it "
                               "loads into host memory (device 'cpu')")
    if framework == "hip" and dev.is_cpu:
        raise SafetensorsError("framework 'hip' loads into device memory: use framework "
                               "'numpy' or 'pt' for host memory")
    return dev


def _current_device(framework: str) -> int:
    """torch's current GPU for ``"cuda"`` without an ordinal; else 0 (without
    torch, loading with framework ``"torch"`` raises ImportError later)."""
    if framework == "torch":
        try:
            import torch
        except ImportError:
            return 0
        if torch.cuda.is_available():
            return int(torch.cuda.current_device())
    return 0


# --------------------------------------------------------------------------
# Memory and views
# --------------------------------------------------------------------------


#: Host memory of at least this many bytes for a load is mapped on its own
#: and advised for transparent huge pages (``MADV_HUGEPAGE``): reading a
#: file into fresh memory is mostly its page faults, 512 times fewer with
#: 2 MiB pages (on a 2-core VM, 160 MiB read in 25 ms instead of 81).
HUGE_HOST_MIN = 4 << 20 if hasattr(mmap, "MAP_ANONYMOUS") else 1 << 62   # (no mapping: malloc)


def host_memory(nbytes: int) -> Any:
    """``nbytes`` of zeroed, writable host memory for a load: an anonymous
    private mapping advised for transparent huge pages (where the kernel
    has them; otherwise plain pages), freed when the last object using it
    (a tensor or array made from it) is gone."""
    m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    advise = getattr(m, "madvise", None)
    huge = getattr(mmap, "MADV_HUGEPAGE", None)
    if advise is not None and huge is not None:
        try:
            advise(huge)
        except OSError:
            pass      # no transparent huge pages in this kernel: plain pages
    return m


def allocate(framework: str, device: Device, nbytes: int) -> tuple[Any, int, Any]:
    """Memory for ``nbytes``: ``(owner, address, read target)``.

    The read target is what the read step is given: a :class:`Buffer` over
    device memory, or a writable host array (read with ``preadv``); host
    memory of :data:`HUGE_HOST_MIN` bytes or more is :func:`host_memory`.
    """
    if framework == "torch":
        import torch

        if device.is_cpu and nbytes >= HUGE_HOST_MIN:
            t = torch.frombuffer(host_memory(nbytes), dtype=torch.uint8)
        else:
            t = torch.empty(nbytes, dtype=torch.uint8, device=device.torch())
        addr = int(t.data_ptr())
        return t, addr, (t.numpy() if device.is_cpu else Buffer(addr, nbytes))
    if framework == "numpy":
        import numpy as np

        if nbytes >= HUGE_HOST_MIN:
            a = np.frombuffer(host_memory(nbytes), np.uint8)
        else:
            a = np.empty(nbytes, np.uint8)
        return a, int(a.ctypes.data), a
    alloc = DeviceAllocation(nbytes, device.index)
    return alloc, alloc.ptr, Buffer(alloc.ptr, nbytes)


def release(owner: Any) -> None:
    """Free a failed load's memory now (a traceback would keep it alive)."""
    if isinstance(owner, DeviceAllocation):
        owner.free()


_NUMPY_DTYPES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "<i2", "U16": "<u2",
                 "F16": "<f2", "I32": "<i4", "U32": "<u4", "F32": "<f4", "F64": "<f8",
                 "I64": "<i8", "U64": "<u8", "C64": "<c8"}


def numpy_dtype(info: TensorInfo) -> Any:
    """The numpy dtype of a tensor; ml_dtypes' for BF16 and FP8 when it is
    installed.

    Raises
    ------
    SafetensorsError
        numpy has no such dtype.
    """
    import numpy as np

    name = _NUMPY_DTYPES.get(info.dtype.name)
    if name is not None:
        return np.dtype(name)
    try:
        import ml_dtypes  # type: ignore[import-not-found]
    except ImportError:
        ml_dtypes = None
    if ml_dtypes is not None and info.dtype.torch is not None:
        if hasattr(ml_dtypes, info.dtype.torch):
            return np.dtype(getattr(ml_dtypes, info.dtype.torch))
    raise SafetensorsError(f"tensor {info.name!r}: numpy has no dtype for {info.dtype.name}")


def make_view(framework: str, device: Device, owner: Any, addr: int, offset: int,
              info: TensorInfo) -> Any:
    """One tensor of a loaded region: a view of ``owner`` at ``offset``."""
    if framework == "torch":
        return _torch_view(owner, offset, info, device)
    if framework == "numpy":
        dt = numpy_dtype(info)
        raw = owner[offset:offset + info.nbytes]
        if raw.ctypes.data % max(1, dt.alignment):  # misaligned in the file: copy
            raw = raw.copy()
        return raw.view(dt).reshape(info.shape)
    return DeviceTensor(owner, addr + offset, info.dtype, info.shape, device.index)


_torch_dtypes: dict[str, Any] = {}     # safetensors dtype name -> torch dtype, once found


def torch_dtype(info: TensorInfo) -> Any:
    """The torch dtype of a tensor.

    Raises
    ------
    SafetensorsError
        torch has no such dtype.
    """
    found = _torch_dtypes.get(info.dtype.name)
    if found is not None:
        return found
    import torch

    if info.dtype.torch is None or not hasattr(torch, info.dtype.torch):
        raise SafetensorsError(f"tensor {info.name!r}: torch has no dtype for "
                               f"{info.dtype.name}")
    found = _torch_dtypes[info.dtype.name] = getattr(torch, info.dtype.torch)
    return found


def _torch_view(flat: Any, offset: int, info: TensorInfo, device: Device) -> Any:
    import torch

    tdt = torch_dtype(info)
    shape = list(info.shape)
    if info.dtype.name == "F4":  # two values per byte: torch's storage shape
        if not shape or shape[-1] % 2:
            raise SafetensorsError(f"tensor {info.name!r}: F4 needs an even last dimension")
        shape[-1] //= 2
    if info.nbytes == 0:
        return torch.empty(shape, dtype=tdt, device=device.torch())
    raw = flat[offset:offset + info.nbytes]
    size = max(1, int(getattr(tdt, "itemsize", 1)))
    if (int(raw.data_ptr()) % size) != 0:  # misaligned in the file: copy
        out = torch.empty(shape, dtype=tdt, device=raw.device)
        out.view(-1).view(torch.uint8).copy_(raw)
        return out
    return raw.view(tdt).view(shape)


_raw_stream: Any = None    # torch._C._cuda_getCurrentRawStream, once found


def torch_stream(framework: str, device: Device) -> int:
    """The stream a read into memory that the framework allocated follows:
    torch's current stream of the device (its caching allocator reuses
    memory in that stream's order), else the null stream."""
    global _raw_stream
    if framework != "torch" or device.is_cpu:
        return 0
    if _raw_stream is not None:
        return int(_raw_stream(device.index))
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:       # the handle without making a Stream object
        _raw_stream = raw     # looked up once: torch._C's attributes cost about 1 us
        return int(raw(device.index))
    return int(torch.cuda.current_stream(device.index).cuda_stream)
