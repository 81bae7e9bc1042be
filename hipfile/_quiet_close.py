"""The lifetime of the drop-in classes (the ``CuFile`` classes of
:mod:`hipfile.compat` and :mod:`hipfile.safetensors`' ``safe_open``)."""

from __future__ import annotations

from hipfile._lifetime import Closes


class ClosesQuietlyWhenCollected(Closes):
    """:class:`~hipfile._lifetime.Closes` (``with obj:`` ends with
    ``close()``), and an object collected while still open is closed without
    a warning, as the libraries these classes stand in for (cufile-python,
    KvikIO, safetensors) close a forgotten file. A failure to close is
    swallowed: a finalizer must not raise. Subclasses say whether they are
    open in ``_left_open``, which must not fail on a half-built object."""

    def _left_open(self) -> bool:
        raise NotImplementedError

    def __del__(self) -> None:
        if not self._left_open():
            return
        try:
            self.close()
        except Exception:
            pass
