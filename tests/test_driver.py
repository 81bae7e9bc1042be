"""The driver: open/close per object, the process-wide count, the four setters."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from _util import run_python

import hipfile
from hipfile import (
    BoolConfigParameter,
    Driver,
    DriverControlFlags,
    SizeTConfigParameter,
    driver_get_properties,
    get_parameter,
    set_parameter,
)
from hipfile._lib import _hipfile

# -- open / close ---------------------------------------------------------------


def test_open_and_close_are_idempotent_per_object() -> None:
    base = hipfile.use_count()
    drv = Driver()
    assert not drv.is_open
    assert drv.open() is drv
    assert drv.is_open
    assert hipfile.use_count() == base + 1
    drv.open()
    assert hipfile.use_count() == base + 1
    drv.close()
    assert not drv.is_open
    assert hipfile.use_count() == base
    drv.close()
    assert hipfile.use_count() == base
    drv.open()
    assert hipfile.use_count() == base + 1
    drv.close()
    assert hipfile.use_count() == base


def test_use_count_tracks_nested_drivers() -> None:
    base = hipfile.use_count()
    with Driver() as outer:
        assert outer.is_open
        assert Driver.use_count() == base + 1
        with Driver() as inner:
            assert inner is not outer
            assert Driver.use_count() == base + 2
            assert hipfile.use_count() == base + 2
        assert not inner.is_open
        assert outer.is_open
        assert Driver.use_count() == base + 1
    assert not outer.is_open
    assert Driver.use_count() == base
    assert isinstance(Driver.use_count(), int)


def test_context_manager_closes_on_error() -> None:
    base = hipfile.use_count()
    drv = Driver()
    with pytest.raises(KeyError), drv:
        assert hipfile.use_count() == base + 1
        raise KeyError("boom")
    assert not drv.is_open
    assert hipfile.use_count() == base


def test_repr() -> None:
    drv = Driver()
    assert repr(drv) == "<hipfile.Driver closed>"
    with drv:
        assert repr(drv) == "<hipfile.Driver open>"


@pytest.mark.emulated
def test_fresh_process_without_open_driver() -> None:
    """In a new process nothing has opened the driver: closing it through the
    raw shim, reading properties and the setters are refused."""
    proc = run_python(
        """
        import json, warnings
        warnings.simplefilter("ignore")
        import hipfile
        from hipfile._lib import _hipfile

        def outcome(fn):
            try:
                fn()
            except Exception as exc:
                return [type(exc).__name__, getattr(exc, "hipfile_err", None),
                        getattr(exc, "func", None)]
            return None

        out = {"count0": hipfile.use_count()}
        out["raw_close"] = outcome(_hipfile.driver_close)
        out["object_close"] = outcome(hipfile.Driver().close)
        out["props"] = outcome(hipfile.driver_get_properties)
        out["setter"] = outcome(lambda: hipfile.Driver.set_max_cache_size(1024))
        drv = hipfile.Driver().open()
        out["count1"] = hipfile.use_count()
        drv.close()
        out["count2"] = hipfile.use_count()
        print(json.dumps(out))
        """
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["count0"] == 0
    assert out["raw_close"] == ["DriverNotInitializedError", 5001, "hipFileDriverClose"]
    assert out["object_close"] is None  # never opened by this object: nothing to do
    assert out["props"] == ["DriverNotInitializedError", 5001, "hipFileDriverGetProperties"]
    assert out["setter"] == ["DriverNotInitializedError", 5001, "hipFileDriverSetMaxCacheSize"]
    assert out["count1"] == 1
    assert out["count2"] == 0


# -- setters ---------------------------------------------------------------------


@pytest.mark.emulated
def test_set_poll_mode_is_reflected(saved_config: None) -> None:
    with Driver():
        Driver.set_poll_mode(True, 64)
        props = driver_get_properties()
        assert props.nvfs_poll_thresh_size == 64
        assert DriverControlFlags.USE_POLL_MODE in props.driver_control
        assert get_parameter(BoolConfigParameter.PROPERTIES_USE_POLL_MODE) is True
        assert get_parameter(SizeTConfigParameter.POLLTHRESHOLD_SIZE_KB) == 64

        Driver.set_poll_mode(False, 8)
        props = driver_get_properties()
        assert props.nvfs_poll_thresh_size == 8
        assert DriverControlFlags.USE_POLL_MODE not in props.driver_control
        assert get_parameter(BoolConfigParameter.PROPERTIES_USE_POLL_MODE) is False
        assert get_parameter(SizeTConfigParameter.POLLTHRESHOLD_SIZE_KB) == 8


SIZE_SETTERS = [
    (
        "set_max_direct_io_size",
        "nvfs_max_direct_io_size",
        SizeTConfigParameter.PROPERTIES_MAX_DIRECT_IO_SIZE_KB,
    ),
    (
        "set_max_cache_size",
        "max_device_cache_size",
        SizeTConfigParameter.PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB,
    ),
    (
        "set_max_pinned_mem_size",
        "max_device_pinned_mem_size",
        SizeTConfigParameter.PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB,
    ),
]


@pytest.mark.emulated
@pytest.mark.parametrize(("setter", "field", "param"), SIZE_SETTERS)
def test_size_setters_are_reflected(
    saved_config: None, setter: str, field: str, param: SizeTConfigParameter
) -> None:
    with Driver():
        before = driver_get_properties()[field]
        for kib in (before + 4096, 3072):
            getattr(Driver, setter)(kib)
            props = driver_get_properties()
            assert props[field] == kib
            assert getattr(props, field) == kib
            assert get_parameter(param) == kib
        # the parameter and the property are one value
        set_parameter(param, 5120)
        assert driver_get_properties()[field] == 5120


@pytest.mark.emulated
def test_zero_direct_io_size_is_refused(saved_config: None) -> None:
    with Driver():
        before = driver_get_properties().nvfs_max_direct_io_size
        with pytest.raises(hipfile.InvalidValueError) as info:
            Driver.set_max_direct_io_size(0)
        assert info.value.func == "hipFileDriverSetMaxDirectIOSize"
        assert driver_get_properties().nvfs_max_direct_io_size == before


@pytest.mark.parametrize("setter", [s for s, _, _ in SIZE_SETTERS])
@pytest.mark.parametrize("value", ["1024", 1.5, None, True, b"1"])
def test_setters_reject_wrong_types(setter: str, value: Any) -> None:
    with pytest.raises(TypeError):
        getattr(Driver, setter)(value)


@pytest.mark.parametrize("setter", [s for s, _, _ in SIZE_SETTERS])
def test_setters_reject_negative_sizes(setter: str) -> None:
    with pytest.raises(ValueError, match=r"^kib must be >= 0, got -1$"):
        getattr(Driver, setter)(-1)


def test_set_poll_mode_rejects_bad_thresholds() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        Driver.set_poll_mode(True, -4)
    with pytest.raises(TypeError):
        Driver.set_poll_mode(True, "4")  # type: ignore[arg-type]


def test_closing_the_driver_invalidates_registrations(tmp_path: Path) -> None:
    """When the count reaches 0 the library drops every registration: the
    objects stop using their stale handle and deregistration becomes a no-op."""
    from hip import hip

    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 4096)
    err, dev = hip.hipMalloc(4096)
    assert err == hip.hipError_t.hipSuccess
    try:
        while hipfile.use_count() > 0:  # start from a closed driver
            _hipfile.driver_close()
        epoch = _hipfile.driver_epoch()
        drv = hipfile.Driver().open()
        fh = hipfile.FileHandle(path, os.O_RDONLY).open()
        buf = hipfile.Buffer(dev)
        buf.register()
        assert fh.read(buf) == 4096
        drv.close()
        assert hipfile.use_count() == 0
        assert _hipfile.driver_epoch() == epoch + 1
        assert not buf.registered
        with pytest.raises(hipfile.HandleNotRegisteredError, match="reopen"):
            fh.read(buf)
        with pytest.raises(hipfile.HandleNotRegisteredError):
            fh.read_async(buf, 16, 0, 0, 0)
        buf.deregister()  # no stale call into the library
        fh.close()
        assert fh.closed
        with hipfile.FileHandle(path, os.O_RDONLY) as again:  # a fresh registration works
            assert again.read(buf) == 4096
    finally:
        hip.hipFree(dev)


# -- the process reference --------------------------------------------------------


def test_process_driver_is_opened_once_and_kept() -> None:
    base = hipfile.use_count()
    drv = hipfile.process_driver()
    assert drv.is_open and hipfile.use_count() == base + 1
    assert hipfile.process_driver() is drv             # no second open
    assert hipfile.use_count() == base + 1
    with Driver():                                     # a caller's own reference
        assert hipfile.use_count() == base + 2
    assert hipfile.use_count() == base + 1 and drv.is_open
    assert hipfile.release_process_driver() is True
    assert hipfile.use_count() == base and not drv.is_open
    assert hipfile.release_process_driver() is False   # nothing held


def test_process_driver_reopens_after_the_count_dropped_to_zero() -> None:
    """Closes that were not its own took the count to zero (the library then
    dropped every registration): the next use opens a fresh reference."""
    if hipfile.use_count():
        pytest.skip("the driver is held open by someone else")
    drv = hipfile.process_driver()
    _hipfile.driver_close()                            # someone else's close
    assert hipfile.use_count() == 0
    again = hipfile.process_driver()
    assert again is not drv and hipfile.use_count() == 1
    assert hipfile.release_process_driver() is True
    assert hipfile.use_count() == 0


def test_process_driver_across_fork_and_exit() -> None:
    """A child opens its own reference (the parent's is not inherited); the
    reference is closed at interpreter exit with nothing reported."""
    proc = run_python(
        """
        import json, os, warnings
        warnings.simplefilter("ignore")
        import hipfile
        from hipfile._lib import _hipfile

        parent = hipfile.process_driver()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            child = hipfile.process_driver()
            out = {"new": child is not parent, "open": child.is_open,
                   "gen": _hipfile.fork_generation()}
            os.write(w, json.dumps(out).encode())
            os._exit(0)
        os.close(w)
        _, status = os.waitpid(pid, 0)
        child = json.loads(os.read(r, 4096))
        print(json.dumps({"child": child, "status": status,
                          "same": hipfile.process_driver() is parent,
                          "count": hipfile.use_count()}))
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception" not in proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["status"] == 0
    assert out["child"] == {"new": True, "open": True, "gen": 1}
    assert out["same"] is True and out["count"] == 1


def test_one_fork_hook_for_the_package() -> None:
    """Importing the package and every module that resets state in a forked
    child registers one ``os.register_at_fork`` hook; each layer adds its
    reset to it."""
    code = """
        import os
        calls = []
        real = os.register_at_fork
        def counting(**kw):
            mods = {getattr(f, "__module__", None) or "" for f in kw.values()}
            if any(m.startswith("hipfile") for m in mods):
                calls.append(sorted(mods))
            return real(**kw)
        os.register_at_fork = counting
        import hipfile, hipfile.driver, hipfile.parallel, hipfile.engine, hipfile.batch
        import hipfile.safetensors, hipfile.compat.kvikio, hipfile.compat.cufile
        print("hooks", len(calls), calls)
    """
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    assert "hooks 1 [['hipfile._lib._runtime']]" in proc.stdout, proc.stdout
