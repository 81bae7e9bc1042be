"""Test platforms: implementations of the hipFile and HIP C ABIs.

A platform is laid out as a ROCm prefix (``<prefix>/lib/libamdhip64.so`` and
``<prefix>/lib/libhipfile.so``). Programs select one exactly as they select a
ROCm install: ``ROCM_PATH=<prefix>``. Setting ``HIPFILE_PLATFORM=<name>`` in the
environment does the same from inside ``import hipfile`` and warns once with
:class:`PlatformWarning`, unless ``HIPFILE_PLATFORM_QUIET=1``.

Downstream test suites that run with ``filterwarnings = ["error"]`` can name
the category in a filter (``ignore::hipfile.platforms.PlatformWarning``):
when the import of ``hipfile`` happens while Python or pytest resolves such a
filter, the warning is held back until the next import, when the filters are
in place.

Platforms:

``emulated``
    The HIP subset and the whole hipFile ABI on the CPU ("device" memory is
    host memory). Built by the package's own build.
``cuda``
    The same two libraries over the CUDA runtime and cuFile, for NVIDIA GPUs.
    Built on a CUDA machine with ``platforms/cuda/build.sh``.
``rocm``
    A real ROCm install; nothing to build.
"""

from __future__ import annotations

import ctypes
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import FrameType, ModuleType

from hipfile._lib._errors import NO_ROCM_HINT as _NO_ROCM_HINT

__all__ = ["NO_ROCM_HINT", "QUIET_ENV", "PlatformWarning", "activate", "active", "available",
           "prefix"]

#: Environment variable that silences :class:`PlatformWarning` when set to
#: ``1``/``true``/``yes``/``on`` (``0``/``false``/``no``/``off`` or empty: warn).
QUIET_ENV = "HIPFILE_PLATFORM_QUIET"

#: How to try the package on a machine without ROCm, for the messages of the
#: errors that a missing ROCm causes (:class:`hipfile.HipFileLibraryNotFound`,
#: a failure to load ``libamdhip64``, ``hipfile info``).
NO_ROCM_HINT = _NO_ROCM_HINT

_PACKAGE_DIR = Path(__file__).resolve().parent.parent
_REPO_DIR = _PACKAGE_DIR.parent
_active: str | None = None
_held: list[ctypes.CDLL] = []


class PlatformWarning(UserWarning):
    """A test platform (not AMD's ROCm) is active in this process.

    Emitted once by :func:`activate` (and so by ``import hipfile`` with
    ``HIPFILE_PLATFORM`` set), unless ``HIPFILE_PLATFORM_QUIET=1``. Filter it
    by name, for example in a pytest configuration::

        filterwarnings = ["error", "ignore::hipfile.platforms.PlatformWarning"]
    """


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def _quiet_from_environment() -> bool:
    text = os.environ.get(QUIET_ENV, "").strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(
        f"{QUIET_ENV}={os.environ[QUIET_ENV]!r} is not a boolean; "
        "use 1/true/yes/on or 0/false/no/off"
    )


def _resolving_warning_filter() -> bool:
    """Whether this import runs inside the resolution of a warning filter's
    category (``python -W``, ``PYTHONWARNINGS`` or pytest's ``filterwarnings``
    and ``-W``), before that filter is installed."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name in ("_resolve_warning_category", "_getcategory"):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


class _WarnAtNextImport:
    """A one-shot ``sys.meta_path`` entry: emits a held-back warning at the
    first import after the filter resolution has ended, then removes itself
    (it never finds a module)."""

    def __init__(self, message: str) -> None:
        self.message = message

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> None:
        if _resolving_warning_filter():
            return None  # hipfile's own imports, still inside the resolution
        try:
            sys.meta_path.remove(self)
        except ValueError:
            return None  # already fired (another thread)
        warnings.warn(self.message, PlatformWarning, stacklevel=2)
        return None


def _announce(name: str, path: Path, quiet: bool | None) -> None:
    if quiet is None:
        quiet = _quiet_from_environment()
    if quiet:
        return
    message = (f"hipfile: the {name} test platform is active ({path}); "
               f"this is not AMD's ROCm (set {QUIET_ENV}=1 to silence)")
    if _resolving_warning_filter():
        sys.meta_path.insert(0, _WarnAtNextImport(message))
    else:
        warnings.warn(message, PlatformWarning, stacklevel=_caller_stacklevel())


def _caller_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside this package, for a
    warning issued by the function that calls this one: the user's
    ``import hipfile`` or ``activate()`` line. Import machinery frames are
    not counted, as :func:`warnings.warn` skips them too."""
    level = 2  # that of the frame looked at: 1 is the warning's caller
    frame: FrameType | None = sys._getframe(2)
    package = str(_PACKAGE_DIR) + os.sep
    while frame is not None:
        name = frame.f_code.co_filename
        if "importlib" in name and name.startswith("<frozen"):
            frame = frame.f_back
            continue
        if not name.startswith(package):
            break
        level += 1
        frame = frame.f_back
    return level


def _installed_prefix_roots() -> list[Path]:
    roots = [_PACKAGE_DIR / "platforms" / "_prefix"]
    # Editable installs keep compiled files beside the compiled shim, which may
    # live outside the source tree.
    try:
        import importlib.util

        spec = importlib.util.find_spec("hipfile._lib._loader")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        roots.append(Path(spec.origin).resolve().parent.parent / "platforms" / "_prefix")
    return roots


def _candidates(name: str) -> list[Path]:
    if name == "rocm":
        return [Path(os.environ.get("HIPFILE_ROCM_PREFIX", "/opt/rocm"))]
    env = os.environ.get(f"HIPFILE_{name.upper()}_PREFIX")
    found = [Path(env)] if env else []
    found += [root / name for root in _installed_prefix_roots()]
    found.append(_REPO_DIR / "platforms" / name / "build" / "prefix")
    return found


def _is_prefix(path: Path) -> bool:
    return (path / "lib" / "libhipfile.so").is_file() and (
        path / "lib" / "libamdhip64.so"
    ).is_file()


#: How each platform is made, for the message of a platform not found.
_BUILD_HINTS = {
    "emulated": "It is built by the package's own build: reinstall the package "
                "(pip install -e . in a checkout)",
    "cuda": "Build it on a machine with CUDA and cuFile: bash platforms/cuda/build.sh "
            "(in a checkout), or set HIPFILE_CUDA_PREFIX to a built prefix",
    "rocm": "Install ROCm with hipFile there, or set HIPFILE_ROCM_PREFIX (or ROCM_PATH "
            "without HIPFILE_PLATFORM) to its prefix",
}


def prefix(name: str = "emulated") -> Path:
    """Return the ROCm-style prefix of a platform.

    Parameters
    ----------
    name
        ``"emulated"``, ``"cuda"`` or ``"rocm"``.

    Returns
    -------
    pathlib.Path
        A folder holding ``lib/libamdhip64.so`` and ``lib/libhipfile.so``.

    Raises
    ------
    ValueError
        For an unknown platform name.
    FileNotFoundError
        If the platform has not been built (the message lists where it looked).
    """
    if name not in ("emulated", "cuda", "rocm"):
        raise ValueError(f"unknown platform {name!r}; expected 'emulated', 'cuda' or 'rocm'")
    tried = _candidates(name)
    for path in tried:
        if _is_prefix(path):
            return path
    raise FileNotFoundError(
        f"platform {name!r} is not built; looked in: " + ", ".join(str(p) for p in tried)
        + f". {_BUILD_HINTS[name]}"
    )


def available() -> list[str]:
    """Names of the platforms whose libraries are present on this machine."""
    names = []
    for name in ("emulated", "cuda", "rocm"):
        try:
            prefix(name)
        except FileNotFoundError:
            continue
        names.append(name)
    return names


def active() -> str | None:
    """The platform named by ``activate()``/``HIPFILE_PLATFORM``, or None."""
    return _active


def activate(name: str, *, quiet: bool | None = None) -> Path:
    """Make this process use a platform, before anything loads HIP or hipFile.

    Sets ``ROCM_PATH`` (HIP-Python 10.x and hipfile resolve libraries through
    it) and loads ``libamdhip64.so`` globally under its bare SONAME (HIP-Python
    6.x/7.x ``dlopen`` it by name). Warns once with :class:`PlatformWarning`
    unless the platform is ``rocm``.

    Parameters
    ----------
    name
        ``"emulated"``, ``"cuda"`` or ``"rocm"``.
    quiet
        Skip the warning. ``None`` (the default) reads ``HIPFILE_PLATFORM_QUIET``.

    Raises
    ------
    ValueError
        Unknown platform name, or ``HIPFILE_PLATFORM_QUIET`` is not a boolean.
    FileNotFoundError
        The platform is not built.
    RuntimeError
        Another platform is already active in this process.
    """
    global _active
    if _active is not None:
        if _active == name:
            return prefix(name)
        raise RuntimeError(f"platform {_active!r} is already active in this process")
    path = prefix(name)
    if quiet is None:
        quiet = _quiet_from_environment()
    os.environ["ROCM_PATH"] = str(path)
    if name != "rocm":
        lib = path / "lib"
        _held.append(ctypes.CDLL(str(lib / "libamdhip64.so"), mode=ctypes.RTLD_GLOBAL))
        _held.append(ctypes.CDLL(str(lib / "libhipfile.so"), mode=ctypes.RTLD_GLOBAL))
        _announce(name, path, quiet)
    _active = name
    return path


#: The error of ``HIPFILE_PLATFORM`` when the ``hipfile`` command imported
#: the package (it reports it in one line instead of a traceback).
environment_error: Exception | None = None


def _is_command() -> bool:
    """Whether this process is the ``hipfile`` command (the console script,
    or ``python -m hipfile``)."""
    argv0 = os.path.basename(sys.argv[0]) if sys.argv else ""
    if argv0 in ("hipfile", "__main__.py") and "hipfile" in sys.argv[0]:
        return True
    from itertools import pairwise

    orig = list(getattr(sys, "orig_argv", []))
    return any(a == "-m" and b == "hipfile" for a, b in pairwise(orig))


def _activate_from_environment() -> None:
    """Activate ``HIPFILE_PLATFORM``. An unknown or unbuilt platform fails
    the import, except in the ``hipfile`` command, which reports it
    (:data:`environment_error`)."""
    global environment_error
    name = os.environ.get("HIPFILE_PLATFORM", "").strip()
    if name:
        try:
            activate(name)
        except (ValueError, FileNotFoundError) as exc:
            if not _is_command():
                raise
            environment_error = exc
