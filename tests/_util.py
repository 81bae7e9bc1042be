"""Helpers shared by the tests: device memory through HIP-Python."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hip import hip


def check(result: Any) -> Any:
    err = result[0]
    assert err == hip.hipError_t.hipSuccess, f"HIP call failed: {err!r}"
    return result[1] if len(result) == 2 else result[1:] if len(result) > 2 else None


@contextlib.contextmanager
def device_array(nbytes: int) -> Iterator[Any]:
    ptr = check(hip.hipMalloc(nbytes))
    try:
        yield ptr
    finally:
        check(hip.hipFree(ptr))


@contextlib.contextmanager
def opened_files(paths: list[Path], mode: str = "r") -> Iterator[list[Any]]:
    """Every path opened with ``hipfile.open(path, mode)``; all closed at
    the end."""
    import hipfile

    fhs: list[Any] = []
    try:
        for p in paths:
            fhs.append(hipfile.open(p, mode))
        yield fhs
    finally:
        for fh in fhs:
            fh.close()


def malloc_on(device: int, nbytes: int) -> Any:
    """``hipMalloc(nbytes)`` on ``device``; device 0 is current again after."""
    check(hip.hipSetDevice(device))
    try:
        return check(hip.hipMalloc(nbytes))
    finally:
        check(hip.hipSetDevice(0))


def run_threads(worker: Callable[[int], object], n: int, timeout: float) -> None:
    """Run ``worker(0)`` .. ``worker(n - 1)`` on threads of their own and
    join them, each within ``timeout`` seconds; fails if one is stuck."""
    import threading

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a thread is stuck"


@contextlib.contextmanager
def hip_stream(flags: int = 0) -> Iterator[Any]:
    s = check(hip.hipStreamCreateWithFlags(flags)) if flags else check(hip.hipStreamCreate())
    try:
        yield s
    finally:
        check(hip.hipStreamDestroy(s))


@contextlib.contextmanager
def returns_within(seconds: float, what: str = "the block") -> Iterator[None]:
    """Raise TimeoutError in the main thread if the block has not returned
    after ``seconds`` (a wait that checks for signals, or a blocking system
    call, is interrupted: a hang fails the test instead of the suite)."""
    import signal

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"{what} did not return within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def held_stream(s: Any) -> Iterator[Callable[[], None]]:
    """Hold the HIP stream ``s`` at a host flag (``hipStreamWaitValue32``):
    work enqueued on it after this stays in flight until ``release()``, which
    the exit also calls; yields ``release``. Skips where the runtime has no
    stream waits."""
    import ctypes

    flag = check(hip.hipHostMalloc(4, 0))
    word = ctypes.c_uint32.from_address(int(flag))
    word.value = 0

    def release() -> None:
        word.value = 1

    try:
        err = hip.hipStreamWaitValue32(s, flag, 1, 0, 0xFFFFFFFF)[0]
        if err != hip.hipError_t.hipSuccess:
            pytest.skip(f"the HIP runtime has no stream waits (hipStreamWaitValue32: {err!r})")
        yield release
    finally:
        release()
        check(hip.hipStreamSynchronize(s))
        check(hip.hipHostFree(flag))


class StreamBlocker:
    """Holds a HIP stream in a host function until :meth:`release`."""

    def __init__(self, stream: Any) -> None:
        import ctypes
        import threading

        self._go = threading.Event()
        started = threading.Event()

        def body(_arg: int | None) -> None:
            started.set()
            self._go.wait(30)

        self._fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(body)
        check(hip.hipLaunchHostFunc(stream, ctypes.cast(self._fn, ctypes.c_void_p).value, 0))
        assert started.wait(10), "the host function never ran"

    def release(self) -> None:
        self._go.set()


@contextlib.contextmanager
def gated_stream() -> Iterator[tuple[Any, Callable[[], None]]]:
    """A new HIP stream held at a host flag (:func:`held_stream`); yields
    (stream, release)."""
    with hip_stream() as s, held_stream(s) as release:
        yield s, release


@contextlib.contextmanager
def delayed_io(path: str | os.PathLike[str], nbytes: int, delay_us: int
               ) -> Iterator[tuple[Any, Any, Any]]:
    """With the emulated platform's completions delayed by ``delay_us``
    microseconds: ``nbytes`` of device memory, a new HIP stream and ``path``
    opened as a :class:`hipfile.FileHandle`; yields (memory, stream, handle)."""
    from hipfile import FileHandle

    emu().set_completion_delay(delay_us)
    with device_array(nbytes) as dev, hip_stream() as s, FileHandle(path) as fh:
        yield dev, s, fh


@contextlib.contextmanager
def delayed_read(path: str | os.PathLike[str], nbytes: int, delay_us: int
                 ) -> Iterator[tuple[Any, Any, Any]]:
    """:func:`delayed_io` with a read of the first ``nbytes`` bytes of ``path``
    submitted on its stream; yields (async handle, memory, file handle)."""
    with delayed_io(path, nbytes, delay_us) as (dev, s, fh):
        yield fh.read_async(dev, nbytes, 0, 0, s), dev, fh


def to_device(dst: Any, data: np.ndarray, offset: int = 0) -> None:
    check(hip.hipMemcpy(int(dst) + offset, data, data.nbytes,
                        hip.hipMemcpyKind.hipMemcpyHostToDevice))


def from_device(src: Any, nbytes: int, offset: int = 0) -> np.ndarray:
    out = np.empty(nbytes, dtype=np.uint8)
    check(hip.hipMemcpy(out, int(src) + offset, nbytes, hip.hipMemcpyKind.hipMemcpyDeviceToHost))
    return out


def check_range_errors(read: Callable[..., object], write: Callable[..., object],
                                fh: Any, dev: Any, nbytes: int) -> None:
    """Check the argument errors that a ``call(fh, buffer, size, file_offset,
    buffer_offset=)`` of the API raises, in its read and its write form, for a
    buffer of ``nbytes`` bytes."""
    for call in (read, write):
        with pytest.raises(ValueError, match="overruns"):
            call(fh, dev, nbytes + 1)
        with pytest.raises(ValueError, match="past"):
            call(fh, dev, None, 0, buffer_offset=nbytes + 1)
        with pytest.raises(ValueError, match="file_offset"):
            call(fh, dev, 10, -1)
        with pytest.raises(ValueError, match="buffer_offset"):
            call(fh, dev, 10, 0, buffer_offset=-1)
        for size in (-1, -5):
            with pytest.raises(ValueError, match="size"):
                call(fh, dev, size)
        with pytest.raises(TypeError, match="size"):
            call(fh, dev, 10.0)
        for offset in ("0", 1.0):
            with pytest.raises(TypeError, match="file_offset"):
                call(fh, dev, 10, offset)


def random_bytes(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def scattered_blocks(nblocks: int, block: int, seed: int) -> list[tuple[int, int, int]]:
    """``(size, file_offset, buffer_offset)`` of ``nblocks`` blocks of ``block``
    bytes, contiguous in the file and permuted over the buffer (a layer of a
    paged KV cache)."""
    perm = np.random.default_rng(seed).permutation(nblocks)
    return [(block, i * block, int(perm[i]) * block) for i in range(nblocks)]


def assert_ranges_equal(buffer: np.ndarray, file: np.ndarray,
                        ranges: list[tuple[int, int, int]]) -> None:
    """For every ``(size, file_offset, buffer_offset)``, the buffer's bytes
    equal the file's."""
    for k, (size, foff, boff) in enumerate(ranges):
        assert np.array_equal(buffer[boff:boff + size], file[foff:foff + size]), f"range {k}"


def random_file(path: Path, n: int, seed: int = 0) -> np.ndarray:
    """Write ``n`` random bytes (:func:`random_bytes`) to ``path``; returns them."""
    data = random_bytes(n, seed)
    path.write_bytes(data.tobytes())
    return data


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load_example(name: str) -> ModuleType:
    """Import ``examples/NAME.py`` as module ``NAME`` (registered in
    ``sys.modules``, as dataclasses and pickling need), with ``examples/`` on
    ``sys.path`` as when the example runs as a script (for ``_support``)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def emu() -> Any:
    """The emulated platform's hooks (tests that call it are marked ``emulated``)."""
    from hipfile.platforms import emulated

    return emulated


class CudaArray:
    """An object exposing memory only through ``__cuda_array_interface__``
    (version 3): built from a pointer, a shape (or a byte count), a typestr
    and strides, or from a whole interface dict."""

    def __init__(self, ptr: int | dict[str, Any], shape: int | tuple[int, ...] = 0,
                 typestr: str = "|u1", strides: tuple[int, ...] | None = None) -> None:
        if isinstance(ptr, dict):
            self.__cuda_array_interface__ = ptr
            return
        self.__cuda_array_interface__ = {
            "shape": (shape,) if isinstance(shape, int) else shape,
            "typestr": typestr,
            "data": (ptr, False),
            "strides": strides,
            "version": 3,
        }


#: Variables that select a platform or a library.
PLATFORM_VARS = ("ROCM_PATH", "HIPFILE_PLATFORM", "HIPFILE_LIBRARY")


def run_python(code: str, clear: tuple[str, ...] = (), **env: str
               ) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (dedented) in a new interpreter, with this environment
    less ``clear`` plus ``env``; the output is captured as text."""
    clean = {k: v for k, v in os.environ.items() if k not in clear}
    clean.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=clean,
                          capture_output=True, text=True, timeout=120, check=False)


CUFILE_LOST_WRITE = ("cuFile 1.15's compatibility mode reported 0 bytes for a stream-ordered "
                     "write and wrote nothing, with the right values in its slots; the same "
                     "call again wrote every byte (docs/platform-cuda.md, 'cuFile and a lost "
                     "first write')")


CUFILE_LOST_FIRST_READ = ("cuFile 1.15's compatibility mode lost the first stream-ordered read "
                         "on a new stream into unregistered device memory (a count of 0, or "
                         "the full count with nothing written); the same read again moved the "
                         "right bytes (docs/platform-cuda.md, 'cuFile and a lost first write')")


def check_chunks(counts: list[int], got: np.ndarray, want: np.ndarray, chunk: int,
                 again: Callable[[], np.ndarray]) -> None:
    """Check stream-ordered reads of ``chunk`` bytes each, submitted in turn on
    a new stream into device memory zeroed before them: ``counts`` are their
    results, ``got`` the memory afterwards, ``want`` the file's bytes.

    On the cuda platform, when the one wrong read is the stream's first, it
    reported 0 or its full count, its chunk is still all zeros, and the same
    read again (``again()`` returns its chunk's bytes after it) is right, the
    loss is cuFile's and the test is marked xfail. Any other difference fails
    the test, naming what was seen."""
    import hipfile

    got_rows, want_rows = got.reshape(-1, chunk), want.reshape(-1, chunk)
    zeros = ~got_rows.any(axis=1)
    right = (got_rows == want_rows).all(axis=1)
    bad = [k for k, n in enumerate(counts) if n != chunk or not right[k]]
    if not bad:
        return
    states = ", ".join(f"read {k}: count {counts[k]}, "
                       + ("all zeros" if zeros[k] else "right bytes" if right[k] else "wrong bytes")
                       for k in bad[:8])
    seen = f"{len(bad)} of {len(counts)} reads wrong ({states})"
    if hipfile.platforms.active() == "cuda" and bad == [0] and counts[0] in (0, chunk) and zeros[0]:
        if np.array_equal(again(), want_rows[0]):
            pytest.xfail(f"{CUFILE_LOST_FIRST_READ}: {seen}")
        seen += "; the same read again was wrong too"
    pytest.fail(seen)


def lost_first_write(got: int, slots: tuple[int, int, int], expected: tuple[int, int, int],
                     on_disk: bytes, again: Callable[[], int], path: Path,
                     want: bytes) -> None:
    """After a stream-ordered write that reported ``got`` bytes of
    ``expected[0]``: on the cuda platform, when the write reported 0, the
    slots still hold what was submitted, nothing reached the file, and the
    same write (``again()``) then moves every byte, the loss is cuFile's and
    the test is marked xfail; anything else fails it, with what was seen."""
    import hipfile

    retry = again()
    landed = path.read_bytes() == want
    cufile = (hipfile.platforms.active() == "cuda" and got == 0 and slots == expected
              and on_disk == b"" and retry == expected[0] and landed)
    if cufile:
        pytest.xfail(CUFILE_LOST_WRITE)
    pytest.fail(f"the write reported {got} of {expected[0]} bytes; slots (size, file offset, "
                f"buffer offset) {slots} for {expected}; file {len(on_disk)} bytes before "
                f"the retry; the same write again: {retry}, the bytes then landed: {landed}")


def direct_io_supported(folder: Path) -> bool:
    """Whether files in ``folder`` can be opened with ``O_DIRECT``."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return False
    try:
        fd = os.open(folder / "direct-probe", os.O_RDWR | os.O_CREAT | flag, 0o644)
    except OSError:
        return False
    os.close(fd)
    return True
