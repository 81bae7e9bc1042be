"""Process-wide settings: one place to read and change hipfile's defaults.

In the style of ``kvikio.defaults``::

    import hipfile
    from hipfile import defaults

    defaults.get("task_size")                 # 4194304
    defaults.set("num_threads", 16)           # from now on
    with defaults.set({"task_size": 1 << 20, "num_threads": 4}):
        fh.pread(dev).result()                # these values inside the block only
    defaults.task_size()                      # one getter per setting

A value comes from, in this order: :func:`set` (innermost first), the
setting's environment variable, the built-in default. As in
``kvikio.defaults``, the environment is read once, when :mod:`hipfile` is
imported, and again by :func:`reset` (the variables of the settings it
names; all of them when it names none): a change of ``os.environ`` in
between is seen by no reader, neither :func:`get` nor the engine nor the
thread pool, until the next :func:`reset`. Every value is validated when
it is set and when it is read from the environment; a bad value raises
:class:`ValueError` (or :class:`TypeError`) naming the setting or the
variable.

=========================  =================================  =====================
setting                    environment variable               default
=========================  =================================  =====================
``num_threads``            ``HIPFILE_NTHREADS``               ``min(8, cpu count)``
``task_size``              ``HIPFILE_TASK_SIZE``              4 MiB
``batch_max_entries``      ``HIPFILE_BATCH_MAX_ENTRIES``      128
``close_timeout``          ``HIPFILE_CLOSE_TIMEOUT``          None (no limit)
``wait_timeout``           ``HIPFILE_WAIT_TIMEOUT``           None (no limit)
``allow_host_buffers``     ``HIPFILE_ALLOW_HOST_BUFFERS``     True
``engine_task_size``       ``HIPFILE_ENGINE_TASK_SIZE``       2 MiB
``engine_threads``         ``HIPFILE_ENGINE_THREADS``         ``cpus / 2, 4..16``
``engine_staging_size``    ``HIPFILE_ENGINE_STAGING_SIZE``    64 MiB
``engine_copy_streams``    ``HIPFILE_ENGINE_COPY_STREAMS``    1
``engine_copy_batch``      ``HIPFILE_ENGINE_COPY_BATCH``      1
``engine_direct_io_size``  ``HIPFILE_ENGINE_DIRECT_IO_SIZE``  4 MiB
``engine_batch_copies``    ``HIPFILE_ENGINE_BATCH_COPIES``    True
``engine_release``         ``HIPFILE_ENGINE_RELEASE``         ``"auto"``
``engine_data_path``       ``HIPFILE_ENGINE_DATA_PATH``       ``"auto"``
=========================  =================================  =====================

The stream-ordered engine (:mod:`hipfile.engine`) is handed its settings
rather than reading them at each call: the values of all its settings
(``engine_*``) are pushed to it in one call at import and again after every
:func:`set` or :func:`reset` (and on leaving a ``with`` block of
:func:`set`), so a change made that way takes effect at the next submission
(a new thread count once the engine is idle). A bad environment variable of
one of them is not raised there: the engine refuses its next submissions
with that :class:`ValueError` until a good value is set or read.
``num_threads`` and ``task_size`` reach the thread pool of
:func:`hipfile.pread`/:func:`hipfile.pwrite` the same way: read at its
first call and again after every :func:`set` or :func:`reset`.
``engine_staging_size`` is the pinned host memory of a device's staging ring
(in slots of ``engine_task_size``), ``engine_copy_streams`` the streams
its copies are spread over and ``engine_copy_batch`` how many read chunks
of one operation share one stream wait and one copy call (1: each chunk
its own; at most half the ring's slots), and ``engine_direct_io_size`` the
bytes one request reads from the disk (a cold read through an ``O_DIRECT``
descriptor: that many bytes of consecutive chunks in consecutive slots, in
whole slots, at most 8 slots and half the ring; a slot or less: one
request per chunk), all read when the ring is made (at the first
submission on a device, and again after :func:`hipfile.trim_pool`).

Three more choose how the engine works, and reach it in the same push.

* ``engine_batch_copies`` (bool): the staged path hands each chunk's copies
  to the stream in one ``hipMemcpyBatchAsync`` where the runtime has it
  (``False``: one ``hipMemcpyAsync`` per block), and a batch of read chunks
  (``engine_copy_batch``) hands its staging slots back with one
  ``hipMemsetD32Async`` (``False``: one ``hipStreamWriteValue32`` each). The variable takes
  ``1``/``true``/``yes``/``on`` or ``0``/``false``/``no``/``off``.
* ``engine_release``: how completion reaches GPU streams. ``"auto"``:
  stream waits on a flag (``hipStreamWaitValue32``) where the device can
  use them, else waits on the host; ``"host-waits"`` (also spelt
  ``"host"`` or ``"host-functions"``; read back as ``"host-waits"``):
  always wait on the host. It applies to the next submission; operations
  submitted before keep the way they were submitted with.
* ``engine_data_path``: ``"auto"``: device buffers of POSIX files go
  through the engine's pinned staging ring where streams can wait on a
  flag; ``"hipfile"``: every range goes through hipFile's own
  ``hipFileRead``/``hipFileWrite`` on the engine's threads.

Sizes take binary units, in environment variables and in :func:`set`
alike: ``4M``, ``512KiB``, ``1G``, ``65536`` or ``0x10000``
(``defaults.set("task_size", "1M")``).

:func:`set` is the one way to change a setting (the environment variables
are read here, at import and by :func:`reset`, and nowhere else). The older setters
``hipfile.set_num_threads(n)`` and ``hipfile.engine.configure(threads,
task_size)`` still work but are deprecated: each emits a
:class:`DeprecationWarning` naming its replacement, ``set("num_threads", n)``
and ``set(engine_threads=..., engine_task_size=...)``.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from hipfile._lib import _hipfile

__all__ = [
    "SETTINGS",
    "Setting",
    "allow_host_buffers",
    "batch_max_entries",
    "close_timeout",
    "engine_batch_copies",
    "engine_copy_batch",
    "engine_copy_streams",
    "engine_data_path",
    "engine_direct_io_size",
    "engine_release",
    "engine_staging_size",
    "engine_task_size",
    "engine_threads",
    "get",
    "items",
    "num_threads",
    "parse_size",
    "reset",
    "safetensors_read_ahead",
    "set",
    "task_size",
    "wait_timeout",
]

#: Entries one ``hipFileBatchIOSetUp`` accepts at most.
BATCH_MAX_ENTRIES_CAP = 128

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Parse a byte count: ``"4096"``, ``"0x1000"``, ``"256K"``, ``"4MiB"``,
    ``"1G"`` (binary units: K = 1024).

    Raises
    ------
    ValueError
        The text is not a byte count.
    """
    if not isinstance(text, str):
        raise TypeError(f"a size must be a str, not {type(text).__name__}")
    s = text.strip()
    if s.lower().startswith("0x"):
        try:
            return int(s, 16)
        except ValueError:
            pass
    else:
        m = _SIZE_RE.match(s)
        if m is not None:
            return int(m.group(1)) * _UNITS[m.group(2).lower()]
    raise ValueError(f"{text!r} is not a byte count (examples: 65536, 0x10000, 512K, 4MiB, 1G)")


# -- value checks ---------------------------------------------------------------------------


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    value = _hipfile.as_index(value, name)   # the package's one rule for integers
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return int(value)


def _check_timeout(name: str, value: Any) -> float | None:
    return _hipfile.as_timeout(value, name)


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
    return value


def _choice_check(choices: Mapping[str, str]) -> Callable[[str, Any], str]:
    """One of the names ``choices`` maps (case and surrounding blanks
    ignored), answered as the name it maps to."""
    def check(name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str, not {type(value).__name__}")
        try:
            return choices[value.strip().lower()]
        except KeyError:
            raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, "
                             f"got {value!r}") from None
    return check


def _parse_int(text: str) -> int:
    return int(text.strip(), 0)


def _parse_timeout(text: str) -> float | None:
    if text.strip().lower() in ("none", "inf", "infinity"):
        return None
    return float(text)


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _parse_bool(text: str) -> bool:
    t = text.strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise ValueError("expected 1/true/yes/on or 0/false/no/off")


def _cpu_threads() -> int:
    return min(8, os.cpu_count() or 1)


def _engine_threads() -> int:
    # half the CPUs, 4 to 16: measured on a 16-core H200 machine, 8 threads
    # leave the CPU time the thread enqueueing the compute needs (overlap
    # 1.05x against 1.33x with 16), at 0.95x the read throughput of 16
    return max(4, min(16, (os.cpu_count() or 8) // 2))


@dataclass(frozen=True)
class Setting:
    """One setting: its name, environment variable, default and checks."""

    name: str
    env: str
    default: Callable[[], Any]
    check: Callable[[str, Any], Any]
    parse: Callable[[str], Any]
    doc: str
    default_text: str

    def from_environment(self) -> tuple[bool, Any]:
        """``(True, value)`` when the variable is set and not empty in the
        environment as read at import or by the last :func:`reset`, else
        ``(False, None)``; raises :class:`ValueError` for a bad value."""
        text = _environ.get(self.env, "")
        if not text.strip():
            return False, None
        try:
            return True, self.check(self.name, self.parse(text))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{self.env}={text!r} is not a valid {self.name}: {exc}") from None


def _size_check(low: int, high: int | None = None) -> Callable[[str, Any], int]:
    return lambda name, value: _check_int(name, value, low, high)


def _bytes_check(low: int) -> Callable[[str, Any], int]:
    """A byte count: an int, or a str with units as the environment takes
    it (``"1M"``, ``"512KiB"``; :func:`parse_size`)."""
    def check(name: str, value: Any) -> int:
        if isinstance(value, str):
            try:
                value = parse_size(value)
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
        return _check_int(name, value, low)
    return check


#: Every setting, by name.
SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting("num_threads", "HIPFILE_NTHREADS", _cpu_threads, _size_check(1), _parse_int,
                "Threads of the default pool of pread/pwrite.", "min(8, CPU count)"),
        Setting("task_size", "HIPFILE_TASK_SIZE", lambda: 4 << 20, _bytes_check(1), parse_size,
                "Bytes per task of pread/pwrite when task_size is not given.", "4 MiB"),
        Setting("batch_max_entries", "HIPFILE_BATCH_MAX_ENTRIES",
                lambda: BATCH_MAX_ENTRIES_CAP, _size_check(1, BATCH_MAX_ENTRIES_CAP), _parse_int,
                "Entries per batch when a request is split into successive batches "
                f"(at most {BATCH_MAX_ENTRIES_CAP}, hipFile's cap).", str(BATCH_MAX_ENTRIES_CAP)),
        Setting("close_timeout", "HIPFILE_CLOSE_TIMEOUT", lambda: None, _check_timeout,
                _parse_timeout,
                "Seconds that closing an object waits for its operations in flight "
                "(None: no limit).", "None (no limit)"),
        Setting("wait_timeout", "HIPFILE_WAIT_TIMEOUT", lambda: None, _check_timeout,
                _parse_timeout,
                "Seconds that a wait without an explicit timeout blocks (None: no limit).",
                "None (no limit)"),
        Setting("allow_host_buffers", "HIPFILE_ALLOW_HOST_BUFFERS", lambda: True, _check_bool,
                _parse_bool, "Whether host (CPU) buffers are accepted for I/O.", "True"),
        Setting("engine_task_size", "HIPFILE_ENGINE_TASK_SIZE", lambda: 2 << 20, _bytes_check(1),
                parse_size, "Bytes per task of the stream-ordered engine.", "2 MiB"),
        Setting("engine_threads", "HIPFILE_ENGINE_THREADS", _engine_threads, _size_check(1),
                _parse_int, "Threads of the stream-ordered engine.",
                "half the CPU count, 4 to 16"),
        Setting("engine_staging_size", "HIPFILE_ENGINE_STAGING_SIZE", lambda: 64 << 20,
                _bytes_check(1 << 20), parse_size,
                "Bytes of pinned host memory in each device's staging ring of the "
                "stream-ordered engine.", "64 MiB"),
        Setting("engine_copy_streams", "HIPFILE_ENGINE_COPY_STREAMS", lambda: 1,
                _size_check(1, 8), _parse_int,
                "Streams of each device over which the stream-ordered engine spreads its "
                "copies (1: the submitting stream only).", "1"),
        Setting("engine_copy_batch", "HIPFILE_ENGINE_COPY_BATCH", lambda: 1,
                _size_check(1, 64), _parse_int,
                "Read chunks of one operation on one stream that the stream-ordered engine's "
                "staged path makes ready with one stream wait and one copy call "
                "(1: one of each per chunk).", "1"),
        Setting("engine_direct_io_size", "HIPFILE_ENGINE_DIRECT_IO_SIZE", lambda: 4 << 20,
                _bytes_check(1), parse_size,
                "Bytes one request of the stream-ordered engine's staged path reads from a "
                "file opened with O_DIRECT (a cold read): consecutive chunks in whole staging "
                "slots, at most 8 slots.", "4 MiB"),
        Setting("engine_batch_copies", "HIPFILE_ENGINE_BATCH_COPIES", lambda: True,
                _check_bool, _parse_bool,
                "Whether the stream-ordered engine's staged path hands a chunk's copies to "
                "the stream in one hipMemcpyBatchAsync (where the runtime has it).", "True"),
        Setting("engine_release", "HIPFILE_ENGINE_RELEASE", lambda: "auto",
                _choice_check({"auto": "auto", "host-waits": "host-waits",
                               "host": "host-waits", "host-functions": "host-waits"}),
                str,
                "How the stream-ordered engine releases GPU streams: 'auto' (stream waits "
                "on a flag where the device can) or 'host-waits'.", "'auto'"),
        Setting("engine_data_path", "HIPFILE_ENGINE_DATA_PATH", lambda: "auto",
                _choice_check({"auto": "auto", "hipfile": "hipfile"}), str,
                "How the stream-ordered engine moves data: 'auto' (the pinned staging ring "
                "where it can) or 'hipfile' (hipFile's own calls).", "'auto'"),
        Setting("safetensors_read_ahead", "HIPFILE_SAFETENSORS_READ_AHEAD", lambda: 256 << 20,
                _bytes_check(0), parse_size,
                "Bytes of device memory a hipfile.safetensors.safe_open handle reads ahead of "
                "get_tensor calls (0: none).", "256 MiB"),
    )
}

_lock = threading.RLock()
#: The environment as read at import and by :func:`reset`: what every
#: setting's variable means until the next :func:`reset`.
_environ: dict[str, str] = dict(os.environ)
_explicit: dict[str, Any] = {}
_MISSING = object()
_watchers: list[Callable[[], None]] = []


def _watch(callback: Callable[[], None]) -> None:
    """Call ``callback()`` after every change made by :func:`set`,
    :func:`reset` or the end of a ``with`` block of :func:`set` (the thread
    pool keeps the settings it reads once; this tells it to read them
    again).
    The callback must be cheap and must not raise."""
    with _lock:
        if callback not in _watchers:
            _watchers.append(callback)


def _notify() -> None:
    for callback in list(_watchers):
        callback()


#: The settings the stream-ordered engine keeps (pushed to it by _push_engine).
_ENGINE_SETTINGS = ("engine_threads", "engine_task_size", "engine_staging_size",
                    "engine_copy_streams", "engine_copy_batch", "engine_direct_io_size",
                    "engine_batch_copies", "engine_release", "engine_data_path")


def _push_engine() -> None:
    """Hand the engine the values of its settings in effect now, in one call
    (``_hipfile.engine_push_settings``); a bad environment variable is
    handed over as the refusal the engine raises at its next submission
    (it is not raised here: importing hipfile and set() of another setting
    go on working)."""
    with _lock:     # two changes at once: the later one's values are pushed last
        try:
            values = {name: get(name) for name in _ENGINE_SETTINGS}
        except ValueError as exc:
            _hipfile.engine_push_settings({}, str(exc))
            return
        _hipfile.engine_push_settings(values)


def _setting(name: str) -> Setting:
    if not isinstance(name, str):
        raise TypeError(f"a setting name must be a str, not {type(name).__name__}")
    try:
        return SETTINGS[name]
    except KeyError:
        raise KeyError(f"unknown hipfile setting {name!r}; known settings: "
                       + ", ".join(SETTINGS)) from None


def get(name: str) -> Any:
    """The current value of a setting.

    Parameters
    ----------
    name
        A key of :data:`SETTINGS`, e.g. ``"task_size"``.

    Raises
    ------
    KeyError
        Unknown setting.
    ValueError
        The setting comes from its environment variable, whose value is bad.
    """
    setting = _setting(name)
    with _lock:
        value = _explicit.get(name, _MISSING)
    if value is not _MISSING:
        return value
    found, value = setting.from_environment()
    return value if found else setting.default()


class _Restore:
    """What :func:`set` returns: the values are already set; leaving a
    ``with`` block restores the previous ones."""

    def __init__(self, store: dict[str, Any], lock: threading.RLock | threading.Lock,
                 previous: dict[str, Any], notify: Callable[[], None] | None = None) -> None:
        self._store = store
        self._lock = lock
        self._previous = previous
        self._notify = notify

    def __enter__(self) -> _Restore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        with self._lock:
            for name, value in self._previous.items():
                if value is _MISSING:
                    self._store.pop(name, None)
                else:
                    self._store[name] = value
        if self._notify is not None:
            self._notify()


def _apply(store: dict[str, Any], lock: threading.RLock | threading.Lock,
           values: Mapping[str, Any], notify: Callable[[], None] | None = None) -> _Restore:
    """Put checked ``values`` into ``store`` (under ``lock``), then call
    ``notify`` (when given); returns what puts back the values before (and
    calls ``notify`` again) (also for :mod:`hipfile.compat.kvikio`)."""
    with lock:
        previous = {name: store.get(name, _MISSING) for name in values}
        store.update(values)
    if notify is not None:
        notify()
    return _Restore(store, lock, previous, notify)


def set(*args: Any, **kwargs: Any) -> _Restore:
    """Set one or more settings, for the process or for a ``with`` block.

    Call forms: ``set("task_size", 1 << 20)``, ``set({"task_size": 1 << 20,
    "num_threads": 4})`` or ``set(task_size=1 << 20, num_threads=4)``. The
    values take effect at once; used as a context manager, leaving the block
    restores the values in effect before the call. All values are checked
    before any is applied.

    Returns
    -------
    context manager
        Restores the previous values on exit.

    Raises
    ------
    KeyError
        Unknown setting.
    TypeError, ValueError
        A bad value, or bad call form.
    """
    if len(args) == 2:
        if kwargs:
            raise TypeError("set(name, value) takes no keyword arguments")
        updates: Mapping[str, Any] = {args[0]: args[1]}
    elif len(args) == 1:
        if not isinstance(args[0], Mapping):
            raise TypeError("set() takes (name, value), a mapping, or keyword arguments")
        updates = {**args[0], **kwargs}
    elif not args:
        updates = kwargs
    else:
        raise TypeError(f"set() takes at most 2 positional arguments ({len(args)} given)")
    checked = {}
    for name, value in updates.items():
        checked[name] = _setting(name).check(name, value)
    return _apply(_explicit, _lock, checked, _notify)


def reset(*names: str) -> None:
    """Forget values given to :func:`set` (all settings when no name is
    given) and read their environment variables again (the whole
    environment when no name is given): the variable as it is now, or the
    default, applies again.

    Raises
    ------
    KeyError
        Unknown setting.
    """
    for name in names:
        _setting(name)
    global _environ
    with _lock:
        if names:
            environ = dict(_environ)
            for name in names:
                _explicit.pop(name, None)
                env = SETTINGS[name].env
                if env in os.environ:
                    environ[env] = os.environ[env]
                else:
                    environ.pop(env, None)
        else:
            _explicit.clear()
            environ = dict(os.environ)
        _environ = environ
    _notify()


_watch(_push_engine)
_push_engine()      # the engine's compiled defaults give way to the settings


def items() -> Iterator[tuple[str, Any]]:
    """``(name, current value)`` for every setting."""
    for name in SETTINGS:
        yield name, get(name)


_T = TypeVar("_T")


def _getter(name: str, cast: Callable[[Any], _T]) -> Callable[[], _T]:
    """The one-setting getter of ``name``: ``cast(get(name))``, documented
    from the setting."""
    setting = SETTINGS[name]

    def getter() -> _T:
        return cast(get(name))

    getter.__name__ = getter.__qualname__ = name
    getter.__doc__ = f"""{setting.doc}

    ``get({name!r})``: the value given to :func:`set`, else
    ``{setting.env}``, else {setting.default_text}.

    Raises
    ------
    ValueError
        ``{setting.env}`` holds a bad value.
    """
    return getter


def _timeout(value: Any) -> float | None:
    return None if value is None else float(value)


num_threads = _getter("num_threads", int)
task_size = _getter("task_size", int)
batch_max_entries = _getter("batch_max_entries", int)
close_timeout = _getter("close_timeout", _timeout)
wait_timeout = _getter("wait_timeout", _timeout)
allow_host_buffers = _getter("allow_host_buffers", bool)
engine_task_size = _getter("engine_task_size", int)
engine_threads = _getter("engine_threads", int)
engine_copy_streams = _getter("engine_copy_streams", int)
engine_copy_batch = _getter("engine_copy_batch", int)
engine_direct_io_size = _getter("engine_direct_io_size", int)
engine_staging_size = _getter("engine_staging_size", int)
engine_batch_copies = _getter("engine_batch_copies", bool)
engine_release = _getter("engine_release", str)
engine_data_path = _getter("engine_data_path", str)
safetensors_read_ahead = _getter("safetensors_read_ahead", int)
