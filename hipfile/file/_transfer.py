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

Host buffers
------------
hipFile moves data to and from device memory only; it refuses host memory
(``hipFileHipMemoryTypeInvalid``, 5013). :func:`host_transfer` moves a host
buffer with POSIX ``preadv``/``pwritev`` on the file's descriptor (the GIL is
released during each call) under the same rule; a short count is asked
again, a read of 0 is end of file, a write of 0 raises ``EIO``. :func:`transfer`
switches to it when the library answers 5013 for memory given as a bare
address (a :class:`~hipfile.Buffer` over pinned host memory), if the caller
passes ``host_fd``. An address that is neither (such as device memory
after ``hipFree``) fails there with :class:`OSError` ``EFAULT``.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

from hipfile._interop import pointer_view
from hipfile._lib import _hipfile
from hipfile._lib._errors import error_for_result, raise_result
from hipfile.enums import OpError

__all__ = ["host_transfer", "transfer"]

_MAX_CHUNK: int = _hipfile.MAX_IO_CHUNK
_HOST_MEMORY = -int(OpError.HIP_MEMORY_TYPE_INVALID)


def _zero_count(write: bool, name: str, left: int, file_offset: int) -> None:
    """A call moved 0 bytes: end of file for a read (return), a write that
    would loop forever (raise :class:`OSError` ``EIO``)."""
    if write:
        raise OSError(errno.EIO, f"{name} moved 0 of {left} bytes at file offset {file_offset}")


def _not_memory(ptr: int) -> str:
    """The message for an address that is neither device memory nor host
    memory the process can access (``EFAULT`` from ``preadv``/``pwritev``)."""
    return (f"Bad address: the buffer at {ptr:#x} is neither device memory that HIP knows "
            "nor host memory this process can access; device memory released by hipFree "
            "(or hipHostFree) is no longer usable")


def transfer(write: bool, handle: int, ptr: int, size: int, file_offset: int,
             buffer_offset: int, check: Callable[[], None] | None = None,
             host_fd: Callable[[], int] | None = None) -> int:
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
    host_fd
        Returns the descriptor for POSIX I/O, or raises :class:`TypeError`
        when host buffers are turned off. When given, memory the library
        refuses as host memory (5013) is moved by :func:`host_transfer`.

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
            if n == _HOST_MEMORY and host_fd is not None:
                try:
                    fd = host_fd()
                except TypeError as exc:
                    raise exc from error_for_result(n, err, name)
                view = pointer_view(ptr, buffer_offset + size)
                try:
                    return done + host_transfer(write, fd, view, size - done,
                                                file_offset + done, buffer_offset + done, check)
                except OSError as exc:
                    if exc.errno != errno.EFAULT:
                        raise
                    raise OSError(errno.EFAULT, _not_memory(ptr)) from exc
            raise_result(n, err, name)
        if n == 0:
            _zero_count(write, name, size - done, file_offset + done)
            break  # end of file
        done += n
    return done


def host_transfer(write: bool, fd: int, view: memoryview, size: int, file_offset: int,
                  buffer_offset: int, check: Callable[[], None] | None = None) -> int:
    """Move ``size`` bytes between a file descriptor and a host buffer,
    with the rule of :func:`transfer`.

    Parameters
    ----------
    write
        ``True`` for ``pwritev``, ``False`` for ``preadv``.
    fd
        The descriptor (one without ``O_DIRECT``, or aligned transfers).
    view
        Flat byte view of the buffer (writable for a read).
    size, file_offset, buffer_offset, check
        As for :func:`transfer` (``check`` runs before every system call).

    Returns
    -------
    int
        As :func:`transfer`.

    Raises
    ------
    OSError
        A system error (subclass chosen by errno), or a write that moved 0
        bytes (``EIO``).

    See Also
    --------
    preadv, pwritev
    """
    name = "pwritev" if write else "preadv"
    done = 0
    while done < size:
        if check is not None:
            check()
        start = buffer_offset + done
        part = view[start:start + min(size - done, _MAX_CHUNK)]
        try:
            n = os.pwritev(fd, [part], file_offset + done) if write else \
                os.preadv(fd, [part], file_offset + done)
        finally:
            part.release()
        if n == 0:
            _zero_count(write, name, size - done, file_offset + done)
            break  # end of file
        done += n
    return done
