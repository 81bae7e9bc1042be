"""KvikIO's ``kvikio.utils``: the deprecation helpers its modules and
functions use (:func:`kvikio_deprecation_notice`,
:func:`kvikio_deprecate_module`). KvikIO's ``LocalHttpServer`` serves its
remote files, which are not here."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["kvikio_deprecate_module", "kvikio_deprecation_notice"]

F = TypeVar("F", bound=Callable[..., Any])


def kvikio_deprecation_notice(msg: str = "This function is deprecated.", *,
                              since: str) -> Callable[[F], F]:
    """A decorator that marks a function deprecated: each call warns with
    ``msg`` (:class:`FutureWarning`, attributed to the caller), and the
    docstring starts with a Sphinx ``.. deprecated:: since msg`` line.

    Parameters
    ----------
    msg
        The deprecation notice.
    since
        The version since which the function is deprecated.

    Returns
    -------
    Callable
        The decorator; the function it returns keeps the name of the one
        it wraps.

    Examples
    --------
    >>> @kvikio_deprecation_notice("Use bar() instead.", since="25.02")
    ... def foo():
    ...     return 1
    """

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def deprecated(*args: Any, **kwargs: Any) -> Any:
            warnings.warn(msg, FutureWarning, stacklevel=2)
            return func(*args, **kwargs)

        deprecated.__doc__ = f".. deprecated:: {since} {msg}\n\n{func.__doc__ or ''}"
        return deprecated  # type: ignore[return-value]

    return decorate


def kvikio_deprecate_module(msg: str = "", *, since: str) -> None:
    """Warn (:class:`FutureWarning`, attributed to the importer of the
    calling module) that the module calling this is deprecated:
    ``"This module is deprecated since <since>. <msg>"``.

    Parameters
    ----------
    msg
        The deprecation notice.
    since
        The version since which the module is deprecated.
    """
    warnings.warn(f"This module is deprecated since {since}. {msg}", FutureWarning,
                  stacklevel=2)
