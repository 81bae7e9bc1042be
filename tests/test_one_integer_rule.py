"""The integer arguments checked outside the compiled I/O paths follow the
package's one rule (``hipfile._interop.as_int``, over ``_core.c_as_index``):
an int or anything with ``__index__`` (numpy integers), never a bool or a
float, and one message form, ``{name} must be {what}, not {type}``."""

from __future__ import annotations

import mmap
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hipfile
from hipfile import Driver, HipFileException
from hipfile.compat.kvikio import defaults as kvikio_defaults
from hipfile.compat.kvikio.mmap import Mmap
from hipfile.compat.kvikio.numpy import fromfile
from hipfile.enums import SizeTConfigParameter
from hipfile.file._residency import cached_fraction
from hipfile.hipMalloc import hipFree, hipMalloc
from hipfile.properties import get_parameter, set_parameter
from hipfile.safetensors import parse_device
from hipfile.stats import StatsContext

_PARAM = SizeTConfigParameter.EXECUTION_MAX_IO_QUEUE_DEPTH


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "data"
    p.write_bytes(bytes(range(256)) * 64)
    return p


def _open_flags(path: Path, v: Any) -> None:
    hipfile.open(path, v).close()


def _open_mode(path: Path, v: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        hipfile.open(path, mode=v).close()


def _malloc(path: Path, v: Any) -> None:
    hipFree(hipMalloc(v))


def _parameter(path: Path, v: Any) -> None:
    with Driver():
        if not isinstance(v, np.integer):
            set_parameter(_PARAM, v)      # refused before the library is called
            return
        try:
            old = get_parameter(_PARAM)
        except HipFileException as e:
            pytest.skip(f"the library has no size_t parameters to read back: {e}")
        set_parameter(_PARAM, v)
        set_parameter(_PARAM, old)


def _fromfile(path: Path, v: Any) -> None:
    fromfile(path, dtype=np.uint8, offset=v)


def _mmap(path: Path, v: Any) -> None:
    Mmap(path, map_flags=v).close()


def _kvikio_size(path: Path, v: Any) -> None:
    with kvikio_defaults.set("task_size", v):
        pass


def _kvikio_codes(path: Path, v: Any) -> None:
    with kvikio_defaults.set("http_status_codes", [429, v]):
        pass


#: (call with one integer argument, the argument's name in the message,
#:  what the message says it takes, a good value of that argument)
CHECKS: list[tuple[Callable[[Path, Any], object], str, str, int]] = [
    (_open_flags, "flags", "a mode string or an int", os.O_RDONLY),
    (_open_mode, "mode", "a mode string", 0o644),
    (lambda p, v: cached_fraction(p, sample_pages=v), "sample_pages", "an int or None", 16),
    (_malloc, "size_bytes", "an int", 64),
    (lambda p, v: StatsContext(v), "pid", "an int", -1),
    (_parameter, _PARAM.name, "an int", 4),
    (lambda p, v: parse_device(v, "numpy"), "device", "a str, an int or a torch.device", -1),
    (_fromfile, "offset", "an int", 8),
    (_mmap, "map_flags", "an int", mmap.MAP_PRIVATE),
    (_kvikio_size, "task_size", "an int", 1 << 20),
    (_kvikio_codes, "http_status_codes[1]", "an int", 503),
]

IDS = [name for _, name, _, _ in CHECKS]


@pytest.mark.parametrize(("call", "name", "what", "good"), CHECKS, ids=IDS)
@pytest.mark.parametrize("bad", [1.0, True, "8"], ids=["float", "bool", "str"])
def test_one_message_for_a_value_of_the_wrong_type(path: Path, call: Any, name: str, what: str,
                                                    good: int, bad: Any) -> None:
    if name in ("flags", "mode") and isinstance(bad, str):
        pytest.skip("a string is a mode string there")
    if name == "device" and isinstance(bad, str):
        pytest.skip("a string names a device there")
    with pytest.raises(TypeError) as info:
        call(path, bad)
    assert str(info.value) == f"{name} must be {what}, not {type(bad).__name__}"


@pytest.mark.parametrize(("call", "name", "what", "good"),
                         [c for c in CHECKS if c[3] >= 0], ids=[c[1] for c in CHECKS if c[3] >= 0])
def test_numpy_integers_are_taken_as_ints(path: Path, call: Any, name: str, what: str,
                                          good: int) -> None:
    call(path, np.int64(good))
