"""Lazy access to one file's tensors: ``safe_open``."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from hipfile._lifetime import ClosesWhenCollected
from hipfile.file import FileHandle
from hipfile.file._holder import FileHolder
from hipfile.safetensors._device import (
    check_framework,
    parse_device,
)
from hipfile.safetensors._header import (
    Header,
    SafetensorsError,
    TensorInfo,
    TensorNotFoundError,
    read_header,
)
from hipfile.safetensors._load import (
    HostFile,
    check_backend,
    load_many,
    open_for_read,
    resolve_reader,
)
from hipfile.safetensors._slice import SafeSlice
from hipfile.safetensors._tensor_read import (
    ReadAhead,
    host_read_max,
    read_ahead_bytes,
    read_host,
)


class SafeOpen(FileHolder, ClosesWhenCollected):
    """Lazy access to a file's tensors, as ``safetensors.safe_open``.

    The header is read and the file registered at open; :meth:`get_tensor`
    and slices read only the bytes they need. Use as a context manager (or
    call :meth:`close`); after close every method raises
    :class:`SafetensorsError` ("File is closed").

    Parameters
    ----------
    path
        The file.
    framework
        ``"pt"``/``"torch"``, ``"np"``/``"numpy"`` or ``"hip"``
        (:class:`DeviceTensor`).
    device
        As safetensors takes it (``"cpu"``, ``"cuda"``, ``"cuda:N"``, an
        int, a ``torch.device``); default ``"cpu"``, or GPU 0 for ``"hip"``.
    direct, task_size, reader, strict
        As :func:`hipfile.safetensors.load_file`.
    read_ahead
        Bytes of device memory :meth:`get_tensor` may read ahead of the
        caller (None: the ``safetensors_read_ahead`` setting of
        :mod:`hipfile.defaults`, 256 MiB; 0: none). See :meth:`get_tensor`.

    Raises
    ------
    SafetensorsError
        A malformed header, a JSON file (a sharded checkpoint's index: load
        it with :func:`load_file`); a bad ``framework`` or ``device`` (a GPU
        with framework ``"numpy"``), as safetensors raises it.
    FileNotFoundError, OSError, HipFileException
        The file cannot be opened or registered (host-memory loads do not
        register it: they need no GPU library).
    ValueError, TypeError
        A bad ``reader``, a negative ``read_ahead``; a ``device`` of another type.
    """

    def __init__(self, path: str | os.PathLike[str], framework: str = "hip",
                 device: Any = None, *, direct: bool | None = None,
                 task_size: int | None = None, reader: str = "auto",
                 strict: bool = False, read_ahead: int | None = None) -> None:
        # a HostFile for host memory: FileHolder only closes what it holds
        self._fh: FileHandle | HostFile | None = None  # type: ignore[assignment]
        self._framework = check_framework(framework)
        self._device = parse_device(device, self._framework)
        self._reader = resolve_reader(reader, self._device)
        self._path = os.fspath(path)
        self._direct = direct
        self._task_size = task_size
        self._lock = threading.Lock()
        self._ahead = ReadAhead(read_ahead_bytes(read_ahead))
        self._torch_device: Any = None
        self._header = read_header(path, strict=strict)
        # host memory is read with POSIX calls: no hipFile, no GPU library
        self._fh = HostFile(path) if self._device.is_cpu else open_for_read(path, direct)

    def _open_fh(self) -> FileHandle | HostFile:
        fh = self._fh
        if fh is None:
            raise SafetensorsError("File is closed")
        return fh

    @property
    def header(self) -> Header:
        """The parsed header.

        Raises
        ------
        SafetensorsError
            The file is closed.
        """
        self._open_fh()
        return self._header

    def keys(self) -> list[str]:
        """Tensor names, sorted (as safetensors gives them).

        Raises
        ------
        SafetensorsError
            The file is closed.
        """
        self._open_fh()
        return sorted(self._header.tensors)

    def offset_keys(self) -> list[str]:
        """Tensor names in the order of their data in the file.

        Raises
        ------
        SafetensorsError
            The file is closed.
        """
        self._open_fh()
        return [t.name for t in sorted(self._header.tensors.values(),
                                       key=lambda t: (t.begin, t.end))]

    def metadata(self) -> dict[str, str] | None:
        """``__metadata__``, or ``None``.

        Raises
        ------
        SafetensorsError
            The file is closed.
        """
        self._open_fh()
        return self._header.metadata

    def __contains__(self, name: object) -> bool:
        return name in self._header.tensors

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def _info(self, name: str) -> TensorInfo:
        t = self._header.tensors.get(name)
        if t is None:
            raise TensorNotFoundError(name)
        return t

    def _read(self, infos: list[TensorInfo],
              runs: Mapping[str, Sequence[tuple[int, int]]] | None = None) -> dict[str, Any]:
        with self._lock:
            return self._read_locked(self._open_fh(), infos, runs)

    def _read_locked(self, fh: FileHandle | HostFile, infos: list[TensorInfo],
                     runs: Mapping[str, Sequence[tuple[int, int]]] | None = None
                     ) -> dict[str, Any]:
        return load_many([(self._path, self._header, infos)], self._framework,
                         self._device, direct=self._direct, task_size=self._task_size,
                         reader=self._reader, progress=False, handles=[fh], runs=runs)

    def get_tensor(self, name: str) -> Any:
        """Read one tensor into its own memory.

        Into device memory, the tensor is read by the process's
        stream-ordered engine with one submission, and the handle reads
        ahead: the tensors that follow ``name`` in the order the calls go
        (:meth:`keys`, or the file's order, :meth:`offset_keys`, when the
        calls follow it) are submitted while this one is read, each into
        its own memory, up to ``read_ahead`` bytes. A call for a tensor
        read ahead waits for its own read only. Tensors read ahead but
        skipped are dropped; after three calls in a row that the order did
        not foresee, or a slice that reads part of a tensor (see
        :meth:`get_slice`), the handle stops reading ahead. :meth:`close` waits
        for what is still being read and frees it. The bytes returned are
        always the file's: a read cut short raises. Into host memory
        (``device="cpu"``), a tensor of at most one task of the package's
        thread pool (``task_size``, 4 MiB by default) is read with
        ``preadv`` by the calling thread, a larger one by the pool.

        Raises
        ------
        TensorNotFoundError
            No such tensor (a :class:`SafetensorsError` and a :class:`KeyError`).
        SafetensorsError
            The file is closed, or holds fewer bytes than the header says.
        OSError, HipFileException
            The read failed.
        KeyboardInterrupt
            Ctrl-C while waiting; the read goes on, and asking for the
            tensor again returns it.

        See Also
        --------
        hipFileRead, hipMemcpyAsync
        """
        with self._lock:
            fh = self._open_fh()
            info = self._info(name)
            if isinstance(fh, HostFile):
                if (fh.fd is not None and not info.dtype.bits % 8
                        and 0 < info.nbytes <= host_read_max(self)):
                    return read_host(self, fh.fd, info, self._header.data_offset + info.begin)
                return self._read_locked(fh, [info])[name]
            if info.dtype.bits % 8 or self._reader != "stream":
                return self._read_locked(fh, [info])[name]
            return self._ahead.get(self, fh, info)

    def get_slice(self, name: str) -> SafeSlice:
        """A lazy view of one tensor: its shape and dtype, and indexing that
        reads only the rows it needs. Indexing that reads part of the tensor
        stops the handle's read-ahead of whole tensors (see
        :meth:`get_tensor`) and starts its read-ahead of parts: the same
        share of the tensors that follow in :meth:`keys` order (the rows or
        columns a tensor-parallel rank takes of each, the tensors of other
        dimensions whole), within ``read_ahead`` bytes.

        Raises
        ------
        TensorNotFoundError
            No such tensor.
        SafetensorsError
            The file is closed.
        """
        self._open_fh()
        return SafeSlice(self, self._info(name))

    def load_all(self) -> dict[str, Any]:
        """Every tensor, in one allocation (as :func:`load_file`), in file order.

        Raises
        ------
        SafetensorsError
            The file is closed.
        """
        self._open_fh()
        return self._read(list(self._header.tensors.values()))

    def get_tensors(self) -> dict[str, Any]:
        """Every tensor, by name (safetensors' ``SafeOpen.get_tensors``); the
        same as :meth:`load_all`.

        Raises
        ------
        SafetensorsError
            The file is closed.
        """
        return self.load_all()

    def close(self) -> None:
        """Wait for the tensors still being read ahead and free them, then
        close the file (idempotent). A read made meanwhile by another
        thread (``get_tensor``, a slice) ends first: the file is closed
        under the handle's lock, never under a read.

        Raises
        ------
        KeyboardInterrupt
            Ctrl-C while waiting: the file stays open with what is left;
            call ``close()`` again.
        """
        with self._lock:
            self._ahead.drop_all()
            self._close_fh()

    def __enter__(self) -> SafeOpen:
        self._open_fh()
        return self

    def __repr__(self) -> str:
        state = "closed" if self._fh is None else "open"
        return f"<hipfile.safetensors.SafeOpen {self._path!r} {state}>"


def safe_open(path: str | os.PathLike[str], framework: str = "hip", device: Any = None, *,
              backend: str | None = None, direct: bool | None = None,
              task_size: int | None = None, reader: str = "auto",
              strict: bool = False, read_ahead: int | None = None) -> SafeOpen:
    """Open a file for lazy tensor access; see :class:`SafeOpen`. ``backend``
    (safetensors' ``"mmap"``/``"pread"``) is checked and has no other effect:
    hipFile reads either way.

    Raises
    ------
    SafetensorsError, TypeError
        An unknown ``backend``, or what :class:`SafeOpen` raises.
    """
    check_backend(backend)
    return SafeOpen(path, framework, device, direct=direct, task_size=task_size,
                    reader=reader, strict=strict, read_ahead=read_ahead)
