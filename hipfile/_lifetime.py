"""Context managers and finalizers shared by objects that hold a library resource."""

from __future__ import annotations

import warnings
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

_T = TypeVar("_T", bound="RegistrationLifetime")


class RegistrationLifetime:
    """``with obj:`` registers and deregisters; an object collected while still
    registered is deregistered and warns with ``ResourceWarning``.

    Mixed in after a core class that provides ``registered``, ``register()``
    and ``deregister()``.
    """

    if TYPE_CHECKING:

        @property
        def registered(self) -> bool: ...

        def register(self) -> None: ...

        def deregister(self) -> None: ...

    def __enter__(self: _T) -> _T:
        self.register()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.deregister()

    def __del__(self) -> None:
        if self.registered:
            text = repr(self)  # before deregistering changes what it says
            try:
                self.deregister()
            except Exception:
                return
            warnings.warn(f"{text} was still registered; deregistered it",
                          ResourceWarning, stacklevel=1)


class Closes:
    """``with obj:`` ends with ``close()``. Mixed in by classes that provide
    ``close()`` (their ``__enter__`` opens, or checks that they are open)."""

    if TYPE_CHECKING:

        def close(self) -> None: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class ClosesWhenCollected(Closes):
    """:class:`Closes`, and an object collected while still open is closed
    and warns with ``ResourceWarning`` (unless closing fails: a finalizer
    must not raise). Subclasses say whether they are open in ``_left_open``."""

    def _left_open(self) -> bool:
        raise NotImplementedError

    def __del__(self) -> None:
        if not self._left_open():
            return
        text = repr(self)  # before closing changes what it says
        try:
            self.close()
        except Exception:
            return
        warnings.warn(f"{text} was not closed", ResourceWarning, stacklevel=1)
