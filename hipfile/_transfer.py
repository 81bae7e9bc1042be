"""The one synchronous transfer loop behind read, write, pread and pwrite.

The short-transfer rule
-----------------------
``hipFileRead`` and ``hipFileWrite`` may move fewer bytes than asked (as
``pread(2)``/``pwrite(2)`` may), and a single call moves at most
``MAX_IO_CHUNK`` (0x7ffff000) bytes. :func:`transfer` therefore keeps calling
until the requested size is done or the library returns 0:

* a short count is never the end: the loop asks again for the rest, so a
  short transfer in the middle of a file does not look like end of file;
* a read that returns 0 is end of file: the loop returns the bytes moved so
  far (fewer than requested);
* a write that returns 0 moved nothing and would loop forever: it raises
  :class:`OSError` (``EIO``);
* a negative count raises the exception for that error
  (:func:`hipfile.errors.raise_result`).
"""

from __future__ import annotations

import errno
from collections.abc import Callable

from hipfile._lib import _hipfile
from hipfile.errors import raise_result

__all__ = ["transfer"]

_MAX_CHUNK: int = _hipfile.MAX_IO_CHUNK


def transfer(write: bool, handle: int, ptr: int, size: int, file_offset: int,
             buffer_offset: int, check: Callable[[], None] | None = None) -> int:
    """Move ``size`` bytes between a registered file and a buffer.

    Parameters
    ----------
    write
        ``True`` for ``hipFileWrite``, ``False`` for ``hipFileRead``.
    handle, ptr
        The registered file handle and the buffer's base address.
    size, file_offset, buffer_offset
        The range, already checked against the buffer.
    check
        Called before every library call; raises to stop the loop.

    Returns
    -------
    int
        Bytes moved: ``size``, or fewer when a read reaches end of file.

    Raises
    ------
    OSError
        A system error, or a write that moved 0 bytes (``EIO``).
    HipFileException
        A hipFile error.

    See Also
    --------
    hipFileRead, hipFileWrite
    """
    call = _hipfile.write_raw if write else _hipfile.read_raw
    name = "hipFileWrite" if write else "hipFileRead"
    done = 0
    while done < size:
        if check is not None:
            check()
        n, err = call(handle, ptr, min(size - done, _MAX_CHUNK), file_offset + done,
                      buffer_offset + done)
        if n < 0:
            raise_result(n, err, name)
        if n == 0:
            if write:
                raise OSError(errno.EIO, f"{name} moved 0 of {size - done} bytes at file "
                                         f"offset {file_offset + done}")
            break  # end of file
        done += n
    return done
