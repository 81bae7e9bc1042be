"""Objects that hold one open :class:`~hipfile.FileHandle`: the drop-in
classes (the ``CuFile`` classes of :mod:`hipfile.compat`, and
:mod:`hipfile.safetensors`' ``safe_open``)."""

from __future__ import annotations

import threading

from hipfile._lifetime import Closes, guarded_del
from hipfile.file import FileHandle

#: Guards the hand-over of a holder's file handle at close. Reentrant: a
#: collection inside the block may finalize another holder in this thread.
_take_lock = threading.RLock()


class FileHolder:
    """Holds one open :class:`~hipfile.FileHandle` in ``_fh`` (``None`` once
    closed). Says whether it is open for the finalizers of
    :mod:`hipfile._lifetime` (``_left_open``, safe on a half-built object)."""

    _fh: FileHandle | None

    def _left_open(self) -> bool:
        return getattr(self, "_fh", None) is not None

    def _close_fh(self) -> bool:
        """Deregister and close the file handle, once even when threads race;
        returns whether this call closed it.

        Raises
        ------
        InFlightError
            Operations on the file are still running (the file stays open).
        """
        with _take_lock:
            fh = self._fh
        if fh is None:
            return False
        fh.close()
        with _take_lock:
            if self._fh is not fh:
                return False
            self._fh = None
        return True


class QuietFileHolder(FileHolder, Closes):
    """:class:`FileHolder`; ``with obj:`` ends with ``close()``, and an
    object collected while still open is closed without a warning, as the
    libraries these classes stand in for (cufile-python, KvikIO) close a
    forgotten file. A failure to close is swallowed: a finalizer must not
    raise."""

    def _collected(self) -> None:
        if not self._left_open():
            return
        try:
            self.close()
        except Exception:
            pass

    __del__ = guarded_del(_collected)
