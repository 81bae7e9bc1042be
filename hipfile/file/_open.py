"""``hipfile.open``: open a file for hipFile in one call."""

from __future__ import annotations

import os
import warnings

from hipfile._interop import as_int
from hipfile.file._args import O_DIRECT, parse_mode
from hipfile.file._handle import FileHandle

__all__ = ["open"]


def open(
    path: str | os.PathLike[str], flags: int | str | None = None, mode: int | str | None = None,
    *, permissions: int | None = None, direct: bool = False,
) -> FileHandle:
    """Open a file; returns an open :class:`FileHandle`, which registers
    with hipFile (``hipFileHandleRegister``) at its first call through
    hipFile's own data path (see :meth:`FileHandle.open`).

    Parameters
    ----------
    path
        The file.
    flags
        A mode string or ``os.open`` flags (an int, used as given); ``"r"``
        by default:

        ===========  ==========================================  ====================
        mode         ``os.open`` flags                           file
        ===========  ==========================================  ====================
        ``"r"``      ``O_RDONLY``                                must exist
        ``"r+"``     ``O_RDWR``                                  must exist
        ``"w"``      ``O_RDWR | O_CREAT | O_TRUNC``              created or emptied
        ``"a"``      ``O_RDWR | O_CREAT | O_APPEND``             created or kept
        ``"x"``      ``O_RDWR | O_CREAT | O_EXCL``               must not exist
        ===========  ==========================================  ====================

        Each may carry ``+`` and ``b`` as Python's :func:`open` and KvikIO
        write them (``"rb"``, ``"wb"``, ``"r+b"``, ``"w+"``, ...; see
        :func:`parse_mode`). Writable modes open for reading too
        (``O_RDWR``): the handle can read back what it wrote.
    mode
        The mode string, as Python's ``open(path, mode="rb")`` names it
        (give it here or as ``flags``, not both). An int here is the
        permission bits of hipfile 0.1's signature: deprecated, use
        ``permissions``.
    permissions
        Permission bits for a created file (``0o644``).
    direct
        Add ``O_DIRECT``, which hipFile's direct (GPU-direct) path needs.

    ``"a"`` makes an append handle (:attr:`FileHandle.appends`): a write
    whose ``file_offset`` is left out goes to the end of the file, as
    ``O_APPEND`` places it, and a ``file_offset`` given must be that end
    (``ValueError`` otherwise, where Linux's ``pwrite`` would append
    silently). hipFile refuses ``O_APPEND`` descriptors, so the file is
    opened without it and the binding places the writes.

    Raises
    ------
    ValueError
        An unknown mode string.
    TypeError
        ``flags`` or ``mode`` has the wrong type, the mode is given twice,
        or ``direct`` is not a bool.
    IsADirectoryError
        ``path`` is a directory.
    OSError
        ``os.open`` failed (e.g. ``FileNotFoundError`` for ``"r"``).
    HipFileException
        ``path`` is a FIFO, socket or character device, which hipFile
        refuses (``INVALID_FILE_TYPE``, 5018; see
        :meth:`FileHandle.open`).

    Warns
    -----
    DeprecationWarning
        Permission bits given as ``mode``.

    See Also
    --------
    hipFileHandleRegister
    """
    if isinstance(mode, str):
        if flags is not None:
            raise TypeError("give the mode once: as flags or as mode, not both")
        flags, mode = mode, None
    elif mode is not None:
        mode = as_int(mode, "mode", "a mode string")
        if permissions is not None:
            raise TypeError("permission bits given twice (mode and permissions)")
        warnings.warn("hipfile.open(..., mode=<int>) as permission bits is deprecated: pass "
                      "permissions=; mode takes a mode string, as Python's open() does",
                      DeprecationWarning, stacklevel=2)
        permissions = mode
    if flags is None:
        flags = "r"
    text: str | None = None
    if isinstance(flags, str):
        text = flags
        flags = parse_mode(flags)
    else:
        flags = as_int(flags, "flags", "a mode string or an int")
    if not isinstance(direct, bool):
        raise TypeError(f"direct must be a bool, not {type(direct).__name__}")
    if direct:
        flags |= O_DIRECT
    if permissions is None:
        permissions = FileHandle.DEFAULT_MODE
    fh = FileHandle(path, flags, permissions)
    if text is not None:
        fh._descriptors.mode = text      # the mode string as given
    return fh.open()
