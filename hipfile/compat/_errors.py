"""Exceptions of the compat modules: ours, and also the peer's builtin type.

A peer package raises builtins where this package raises typed exceptions
(cufile-python raises :class:`RuntimeError` for every failed cuFile call,
KvikIO raises :class:`RuntimeError` from its C++ layer). :func:`also` makes
an exception of ours an instance of a class that derives from both its own
class and the peer's type, so that ``except RuntimeError`` written for the
peer catches it and ``except hipfile.HipFileException`` (or ``OSError``)
still does too. The classes are made once per pair and pickle.
"""

from __future__ import annotations

import threading
from typing import Any, TypeVar

__all__ = ["also"]

E = TypeVar("E", bound=BaseException)

_made: dict[tuple[type, type], type] = {}
_lock = threading.Lock()


def _rebuild(base: type, extra: type, args: tuple[Any, ...]) -> BaseException:
    obj: BaseException = twin(base, extra)(*args)
    return obj


def _reduce(self: BaseException) -> tuple[Any, ...]:
    # the class is made at run time: pickle the pair it is made of
    base, extra = type(self).__bases__
    reduced: Any = base.__reduce__(self)  # type: ignore[call-arg]
    return (_rebuild, (base, extra, tuple(reduced[1])), *reduced[2:])


def twin(base: type, extra: type) -> type:
    """The class deriving from ``base`` and ``extra`` (made once per pair)."""
    if issubclass(base, extra):
        return base
    key = (base, extra)
    with _lock:
        cls = _made.get(key)
        if cls is None:
            cls = type(base.__name__, (base, extra), {
                "__module__": base.__module__,
                "__qualname__": base.__qualname__,
                "__doc__": f"{base.__name__} that is also a {extra.__name__}.",
                "__reduce__": _reduce,
                "__str__": base.__str__,
            })
            _made[key] = cls
        return cls


def also(exc: E, extra: type) -> E:
    """``exc`` as an instance of a class deriving from both its class and
    ``extra``; raise what it returns. Its message, attributes, notes, cause
    and traceback are kept. An exception of a class defined in Python is
    changed in place; one of a builtin class (``FileNotFoundError``) is
    copied into a new instance, which is returned."""
    cls = twin(type(exc), extra)
    if cls is type(exc):
        return exc
    try:
        exc.__class__ = cls
        return exc
    except TypeError:           # a builtin class: make a new instance
        pass
    if isinstance(exc, OSError) and exc.errno is not None:
        new = cls(exc.errno, exc.strerror, exc.filename, None, exc.filename2)
    else:
        new = cls(*exc.args)
    new.__dict__.update(getattr(exc, "__dict__", {}))
    new.__cause__ = exc.__cause__
    new.__context__ = exc.__context__
    new.__suppress_context__ = exc.__suppress_context__
    result: E = new.with_traceback(exc.__traceback__)
    return result
