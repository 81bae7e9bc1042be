"""Test configuration: every test runs against a real implementation of the
hipFile C ABI, chosen like a ROCm install.

* default: the emulated platform built by the package's own build;
* ``HIPFILE_PLATFORM=cuda`` (or ``ROCM_PATH`` naming a prefix): that platform.

Tests that need the emulated platform's hooks (fault injection, counters) are
marked ``emulated`` and skipped, with a reason, elsewhere.
"""

from __future__ import annotations

import gc
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import check, device_array, random_bytes, random_file
from hip import hip

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    if not os.environ.get("HIPFILE_PLATFORM") and not os.environ.get("ROCM_PATH"):
        os.environ["HIPFILE_PLATFORM"] = "emulated"
    # two emulated devices, so that the tests of buffers and streams on
    # device 1 run too (the emulated runtime reads this when it loads)
    os.environ.setdefault("HIPFILE_EMU_DEVICES", "2")
    import hipfile

from _platform import PLATFORM


def pytest_report_header(config: pytest.Config) -> str:
    return (f"hipfile platform: {PLATFORM} (ROCM_PATH={os.environ.get('ROCM_PATH')}, "
            f"HIPFILE_EMU_DEVICES={os.environ.get('HIPFILE_EMU_DEVICES')})")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "needs(func): skip unless the library implements func (probed once)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip tests of functions this libhipfile declares but does not
    implement (they answer hipFileInternalError), probing the capability."""
    from _capability import skip_reason

    for mark in item.iter_markers("needs"):
        for func in mark.args:
            reason = skip_reason(func)
            if reason:
                pytest.skip(reason)


_frozen_at_modules = 0


def _freeze_imported_modules() -> None:
    """Move every object alive now (imported modules, their classes and
    caches) out of the collector's sight: the leak check's ``gc.collect()``
    after each test then walks only what tests create. With torch and vLLM
    imported (half a million objects), each collect otherwise costs about
    0.3 s, which made the suite five times slower."""
    global _frozen_at_modules
    gc.collect()
    gc.freeze()
    _frozen_at_modules = len(sys.modules)


def pytest_collection_finish(session: pytest.Session) -> None:
    _freeze_imported_modules()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # the safetensors tests import torch, after which every gc.collect() of
    # the leak checks costs tens of milliseconds: they run last
    items.sort(key=lambda item: "safetensors" in item.path.parts)
    for item in items:
        if item.get_closest_marker("emulated") and PLATFORM != "emulated":
            item.add_marker(pytest.mark.skip(reason="needs the emulated platform"))
        differs = item.get_closest_marker("cufile_differs")
        if differs and PLATFORM == "cuda":
            item.add_marker(pytest.mark.skip(
                reason="the cuda platform follows cuFile here, not AMD's hipFile: "
                + str(differs.args[0] if differs.args else "")))


@pytest.fixture(autouse=True)
def _no_engine_faults() -> Iterator[None]:
    """Faults injected into the engine's staged file calls end with the test."""
    yield
    from hipfile._lib import _hipfile

    _hipfile.engine_inject_faults()


@pytest.fixture(autouse=True)
def _settings_environment() -> Iterator[None]:
    """The settings read the environment at import and at reset(): a test
    that changed a variable (monkeypatch puts it back after the test) and
    read it with reset() leaves the next test the environment it found."""
    yield
    from hipfile import defaults

    variables = {s.env for s in defaults.SETTINGS.values()}
    variables.update(v for v in {*os.environ, *defaults._environ} if v.startswith("KVIKIO_"))
    if any(defaults._environ.get(v) != os.environ.get(v) for v in variables):
        defaults.reset()


@pytest.fixture(autouse=True)
def _no_leaks(request: pytest.FixtureRequest) -> Iterator[None]:
    """On the emulated platform, every test must leave the counters at zero;
    the next test finds the driver's use count as this one found it."""
    if PLATFORM != "emulated":
        yield
        hipfile.release_process_driver()   # see below
        return
    from hipfile.platforms import emulated

    if len(sys.modules) > _frozen_at_modules + 100:
        _freeze_imported_modules()   # a test imported torch (or the like)
    emulated.reset()
    opened = hipfile.use_count()
    yield
    gc.collect()
    _trim_pools()
    # the process's own driver reference (hipfile.process_driver) is kept
    # until exit by design: drop it, so each test starts without it
    hipfile.release_process_driver()
    left = {k: v for k, v in emulated.counters().items() if v}
    emulated.reset()
    # registrations open the driver implicitly and leave it open (as AMD's
    # library does): give the next test the use count this one found
    from hipfile._lib import _hipfile

    while hipfile.use_count() > opened:
        _hipfile.driver_close()
    while hipfile.use_count() < opened:
        _hipfile.driver_open()
    assert not left, f"resources left behind by {request.node.name}: {left}"


def _trim_pools() -> None:
    """Give idle pooled pinned pages back so that only real leaks remain."""
    try:
        from hipfile import async_io
    except ImportError:
        return
    trim = getattr(async_io, "trim_pool", None)
    if trim is not None:
        trim()


@pytest.fixture(scope="session")
def cuda_platform_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cuda platform's ``lib`` folder, built here by
    ``platforms/cuda/build.sh`` (a C compiler is all it needs: CUDA and
    cuFile are opened at run time)."""
    import shutil
    import subprocess

    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("needs a C compiler to build the cuda platform")
    out = tmp_path_factory.mktemp("cuda-platform")
    env = dict(os.environ, HIPFILE_CUDA_BUILD_DIR=str(out / "build"))
    root = Path(__file__).resolve().parent.parent
    subprocess.run(["bash", str(root / "platforms/cuda/build.sh")], check=True, env=env,
                   capture_output=True)
    return out / "build/prefix/lib"


@pytest.fixture
def platform() -> str:
    return PLATFORM


@pytest.fixture
def hipfile_module() -> object:
    return hipfile


def _module_size(request: pytest.FixtureRequest) -> int:
    """The test module's ``N`` (bytes of its data file and device array)."""
    return int(getattr(request.module, "N", 1 << 16))


@pytest.fixture
def driver() -> Iterator[hipfile.Driver]:
    """The hipFile driver, open for the test."""
    with hipfile.Driver() as drv:
        yield drv


@pytest.fixture
def data_file(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, np.ndarray]:
    """A file of the module's ``N`` random bytes, and those bytes."""
    path = tmp_path / "data.bin"
    data = random_file(path, _module_size(request), seed=11)
    return path, data


@pytest.fixture
def truncate_after_header(monkeypatch: pytest.MonkeyPatch) -> None:
    """The safetensors loader's file loses all but 10 bytes of its data
    between the header check and the read (another process truncated it)."""
    import hipfile.safetensors._index as loader

    real = loader.read_header

    def then_truncate(path: Any, **kwargs: Any) -> Any:
        header = real(path, **kwargs)
        os.truncate(path, header.data_offset + 10)
        return header

    monkeypatch.setattr(loader, "read_header", then_truncate)


@pytest.fixture
def nb_stream() -> Iterator[object]:
    """A non-blocking HIP stream, synchronised and destroyed after the test."""
    s = check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
    yield s
    check(hip.hipStreamSynchronize(s))
    check(hip.hipStreamDestroy(s))


@pytest.fixture
def dev(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Device memory of the module's ``N`` bytes."""
    with device_array(_module_size(request)) as ptr:
        yield ptr


@pytest.fixture
def payload(request: pytest.FixtureRequest) -> np.ndarray:
    """The module's ``N`` random bytes (the content of ``data_path``)."""
    return random_bytes(_module_size(request), seed=7)


@pytest.fixture
def data_path(tmp_path: Path, payload: np.ndarray) -> Path:
    """A file holding ``payload``."""
    path = tmp_path / "data.bin"
    path.write_bytes(payload.tobytes())
    return path


@pytest.fixture
def saved_config() -> Iterator[None]:
    """Put every configuration parameter back as it was (they are process-wide)."""
    from hipfile import (
        BoolConfigParameter,
        SizeTConfigParameter,
        StringConfigParameter,
        get_parameter,
        set_parameter,
    )

    saved = [
        (p, get_parameter(p))
        for enum in (SizeTConfigParameter, BoolConfigParameter, StringConfigParameter)
        for p in enum
    ]
    yield
    with hipfile.Driver():
        for p, v in saved:
            set_parameter(p, v)


try:  # property-based tests: a bounded budget in CI
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "ci", max_examples=40, deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    settings.register_profile(
        "dev", max_examples=10, deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:  # pragma: no cover
    pass
