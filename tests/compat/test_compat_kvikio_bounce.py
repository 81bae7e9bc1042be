"""KvikIO's compatibility mode in hipfile.compat.kvikio: with
``compat_mode`` ON, ``CuFile.pread``/``pwrite`` of device memory move
through pinned bounce buffers of ``bounce_buffer_size`` bytes with POSIX
calls, and ``bounce_buffer_free()`` frees them and returns their bytes, as
KvikIO 26.10's ``test_basic_io.py::test_bounce_buffer_free`` expects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import check, device_array, from_device
from hip import hip

from hipfile.compat import kvikio

H2D = hip.hipMemcpyKind.hipMemcpyHostToDevice


def _on_device(dev: Any, a: np.ndarray) -> None:
    check(hip.hipMemcpy(dev, a, a.nbytes, H2D))


def test_bounce_buffer_free_returns_the_bytes_of_the_bounce_buffers(tmp_path: Path) -> None:
    filename = tmp_path / "test-file"
    a = np.arange(10, dtype=np.int64)
    kvikio.bounce_buffer_free()
    with device_array(a.nbytes) as dev:
        _on_device(dev, a)
        with kvikio.defaults.set({"compat_mode": kvikio.CompatMode.ON, "num_threads": 1}):
            with kvikio.CuFile(filename, "w") as f:
                with kvikio.defaults.set({"bounce_buffer_size": 1024}):
                    # the size is read when a buffer is used: fill the pool first
                    assert f.write(dev) == a.nbytes
                    assert kvikio.bounce_buffer_free() == 1024
                    assert kvikio.bounce_buffer_free() == 0
                    f.write(dev)
                with kvikio.defaults.set({"bounce_buffer_size": 2048}):
                    f.write(dev)
                    assert kvikio.bounce_buffer_free() == 2048
                    assert kvikio.bounce_buffer_free() == 0
    assert np.array_equal(np.fromfile(filename, np.int64), a)


@pytest.mark.parametrize("bounce", [16, 4096, 1 << 20])
def test_compat_mode_moves_every_byte_through_bounce_buffers(tmp_path: Path,
                                                              bounce: int) -> None:
    """Several buffers' worth, a read past the end (short), an offset."""
    n = 3 * 4096 + 8
    a = np.random.default_rng(3).integers(0, 256, n, dtype=np.uint8)
    path = tmp_path / "f.bin"
    with device_array(n) as src, device_array(n) as dst, \
            kvikio.defaults.set({"compat_mode": "on", "bounce_buffer_size": bounce}):
        _on_device(src, a)
        with kvikio.CuFile(path, "w") as f:
            assert f.pwrite(src).get() == n
        assert path.read_bytes() == a.tobytes()
        with kvikio.CuFile(path, "r") as f:
            assert f.read(dst) == n
            assert np.array_equal(from_device(dst, n), a)
            assert f.pread(dst, n, 100).get() == n - 100       # stops at the end
            assert np.array_equal(from_device(dst, n)[:n - 100], a[100:])
        assert kvikio.bounce_buffer_free() == bounce
    assert kvikio.bounce_buffer_free() == 0

