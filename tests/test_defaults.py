"""hipfile.defaults: get/set, the context manager form, environment
variables, validation, and the parallel module reading them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hipfile
from hipfile import defaults, parallel

ENV = {name: s.env for name, s in defaults.SETTINGS.items()}


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in ENV.values():
        monkeypatch.delenv(var, raising=False)
    defaults.reset()
    yield
    defaults.reset()
    parallel.shutdown()


def test_builtin_defaults() -> None:
    cpu = min(8, os.cpu_count() or 1)
    assert dict(defaults.items()) == {
        "num_threads": cpu,
        "task_size": 4 << 20,
        "batch_max_entries": 128,
        "close_timeout": None,
        "wait_timeout": None,
        "allow_host_buffers": True,
        "engine_task_size": 2 << 20,
        "engine_threads": max(4, min(16, (os.cpu_count() or 8) // 2)),
        "engine_staging_size": 64 << 20,
        "engine_copy_streams": 1,
        "engine_copy_batch": 1,
        "engine_direct_io_size": 4 << 20,
        "engine_batch_copies": True,
        "engine_release": "auto",
        "engine_data_path": "auto",
        "safetensors_read_ahead": 256 << 20,
    }
    getters = {name: getattr(defaults, name) for name in defaults.SETTINGS}
    for name, getter in getters.items():
        assert getter() == defaults.get(name)


def test_every_setting_has_a_distinct_environment_variable() -> None:
    assert len(set(ENV.values())) == len(ENV)
    assert all(v.startswith("HIPFILE_") for v in ENV.values())
    assert ENV["num_threads"] == "HIPFILE_NTHREADS"
    assert ENV["task_size"] == "HIPFILE_TASK_SIZE"


def test_set_forms_and_context_manager() -> None:
    defaults.set("task_size", 1 << 20)
    assert defaults.task_size() == 1 << 20
    with defaults.set({"task_size": 8192, "num_threads": 3}) as ctx:
        assert ctx is not None
        assert defaults.task_size() == 8192
        assert defaults.num_threads() == 3
        with defaults.set(task_size=4096, wait_timeout=2.5):
            assert defaults.task_size() == 4096
            assert defaults.wait_timeout() == 2.5
        assert defaults.task_size() == 8192
        assert defaults.wait_timeout() is None
    assert defaults.task_size() == 1 << 20
    assert defaults.num_threads() == min(8, os.cpu_count() or 1)


def test_context_manager_restores_after_an_exception() -> None:
    with pytest.raises(KeyError, match="boom"), defaults.set("allow_host_buffers", False):
        assert defaults.allow_host_buffers() is False
        raise KeyError("boom")
    assert defaults.allow_host_buffers() is True


def test_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    # each setting's variable as text, and the value it gives
    texts_and_values = {
        "num_threads": ("5", 5),
        "task_size": ("256K", 256 << 10),
        "batch_max_entries": ("32", 32),
        "close_timeout": ("1.5", 1.5),
        "wait_timeout": ("none", None),
        "allow_host_buffers": ("off", False),
        "engine_task_size": ("0x10000", 1 << 16),
        "engine_threads": ("2", 2),
        "engine_staging_size": ("64M", 64 << 20),
        "engine_copy_streams": ("4", 4),
        "engine_copy_batch": ("8", 8),
        "engine_direct_io_size": ("8MiB", 8 << 20),
        "engine_batch_copies": ("0", False),
        "engine_release": (" Host ", "host-waits"),
        "engine_data_path": ("hipfile", "hipfile"),
        "safetensors_read_ahead": ("0", 0),
    }
    assert set(texts_and_values) == set(defaults.SETTINGS)
    for name, (text, _) in texts_and_values.items():
        monkeypatch.setenv(ENV[name], text)
    defaults.reset()      # the environment is read at import and by reset()
    assert dict(defaults.items()) == {name: value for name, (_, value) in
                                      texts_and_values.items()}
    # set() wins over the environment, and reset() gives it back
    defaults.set("task_size", 4096)
    assert defaults.task_size() == 4096
    defaults.reset("task_size")
    assert defaults.task_size() == 256 << 10
    monkeypatch.setenv("HIPFILE_TASK_SIZE", "")
    assert defaults.task_size() == 256 << 10     # until the next reset()
    defaults.reset("task_size")
    assert defaults.task_size() == 4 << 20


def test_a_variable_changed_after_import_means_one_thing_to_every_reader(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment is read at import and by reset(): a variable changed
    in between is seen neither by get() nor by the engine, and after
    reset() by both."""
    before = defaults.get("engine_task_size")
    assert hipfile.engine.settings()["task_size"] == before
    monkeypatch.setenv("HIPFILE_ENGINE_TASK_SIZE", "96K")
    assert defaults.get("engine_task_size") == before
    assert defaults.engine_task_size() == before
    assert hipfile.engine.settings()["task_size"] == before
    defaults.reset("engine_task_size")
    assert defaults.get("engine_task_size") == 96 << 10
    assert hipfile.engine.settings()["task_size"] == 96 << 10


def test_the_engine_refuses_a_bad_variable_of_any_of_its_settings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's settings reach it in one push: a bad variable of a
    setting read when a staging ring is made is refused at once, as one of
    the thread count is, not when a ring is next made; a good value takes
    the refusal back."""
    hipfile.engine.settings()
    monkeypatch.setenv("HIPFILE_ENGINE_STAGING_SIZE", "1K")
    defaults.reset("engine_staging_size")
    with pytest.raises(ValueError, match="HIPFILE_ENGINE_STAGING_SIZE='1K'"):
        hipfile.engine.settings()
    with pytest.raises(ValueError, match="HIPFILE_ENGINE_STAGING_SIZE='1K'"):
        hipfile.engine.mechanism()
    defaults.set("engine_staging_size", "2M")    # set() wins over the variable
    assert hipfile.engine.settings()["task_size"] == defaults.engine_task_size()
    defaults.reset("engine_staging_size")
    with pytest.raises(ValueError, match="HIPFILE_ENGINE_STAGING_SIZE"):
        hipfile.engine.settings()
    monkeypatch.delenv("HIPFILE_ENGINE_STAGING_SIZE")
    defaults.reset("engine_staging_size")
    assert hipfile.engine.settings() == {"threads": defaults.engine_threads(),
                                         "task_size": defaults.engine_task_size()}


# A text that no setting of each kind accepts (by how its variable is parsed).
NOT_PARSED = {defaults._parse_int: "1.5", defaults.parse_size: "lots",
              defaults._parse_timeout: "soon", defaults._parse_bool: "maybe",
              str: "posix"}


@pytest.mark.parametrize("name", list(ENV))
def test_unparsable_environment_values(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Every setting's variable refuses a text of the wrong kind, naming the
    variable and the setting."""
    text = NOT_PARSED[defaults.SETTINGS[name].parse]
    monkeypatch.setenv(ENV[name], text)
    defaults.reset(name)
    match = f"{ENV[name]}={text!r} is not a valid {name}"
    with pytest.raises(ValueError, match=match):
        defaults.get(name)
    with pytest.raises(ValueError, match=match):
        getattr(defaults, name)()


@pytest.mark.parametrize(("name", "text", "match"), [
    ("num_threads", "0", "at least 1"),
    ("task_size", "-4", "not a byte count"),
    ("task_size", "0", "at least 1"),
    ("batch_max_entries", "256", "between 1 and 128"),
    ("close_timeout", "-1", "HIPFILE_CLOSE_TIMEOUT"),
    ("engine_staging_size", "1K", "HIPFILE_ENGINE_STAGING_SIZE"),
    ("engine_copy_streams", "9", "HIPFILE_ENGINE_COPY_STREAMS"),
    ("engine_release", "device", "engine_release must be one of 'auto'"),
])
def test_bad_environment_values(monkeypatch: pytest.MonkeyPatch, name: str, text: str,
                                match: str) -> None:
    monkeypatch.setenv(ENV[name], text)
    defaults.reset(name)
    with pytest.raises(ValueError, match=match):
        defaults.get(name)
    with pytest.raises(ValueError, match=match):
        getattr(defaults, name)()


@pytest.mark.parametrize(("name", "value", "exc", "match"), [
    ("num_threads", 0, ValueError, "at least 1"),
    ("num_threads", "4", TypeError, "must be an int"),
    ("num_threads", True, TypeError, "not bool"),
    ("task_size", 1.5, TypeError, "must be an int"),
    ("batch_max_entries", 129, ValueError, "between 1 and 128"),
    ("close_timeout", -0.5, ValueError, ">= 0"),
    ("wait_timeout", float("nan"), ValueError, ">= 0"),
    ("wait_timeout", "1", TypeError, "seconds or None"),
    ("allow_host_buffers", 1, TypeError, "must be a bool"),
    ("engine_threads", None, TypeError, "must be an int"),
    ("engine_batch_copies", 0, TypeError, "engine_batch_copies must be a bool"),
    ("engine_release", "stream", ValueError, "engine_release must be one of 'auto'"),
    ("engine_release", None, TypeError, "engine_release must be a str"),
    ("engine_data_path", "staged", ValueError, "engine_data_path must be one of 'auto', "
                                               "'hipfile'"),
])
def test_bad_values(name: str, value: object, exc: type[Exception], match: str) -> None:
    before = defaults.get(name)
    with pytest.raises(exc, match=match):
        defaults.set(name, value)
    assert defaults.get(name) == before


def test_set_is_all_or_nothing() -> None:
    with pytest.raises(ValueError, match="batch_max_entries"):
        defaults.set({"task_size": 8192, "batch_max_entries": 0})
    assert defaults.task_size() == 4 << 20


def test_unknown_names_and_call_forms() -> None:
    with pytest.raises(KeyError, match=r"unknown hipfile setting 'tasksize'.*task_size"):
        defaults.get("tasksize")
    with pytest.raises(KeyError, match="nthreads"):
        defaults.set(nthreads=4)
    with pytest.raises(KeyError):
        defaults.reset("bogus")
    with pytest.raises(TypeError, match="str"):
        defaults.get(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        defaults.set("task_size")
    with pytest.raises(TypeError):
        defaults.set("task_size", 1, 2)
    with pytest.raises(TypeError):
        defaults.set("task_size", 1, num_threads=2)


def test_timeouts_accept_infinity_as_no_limit() -> None:
    defaults.set("close_timeout", float("inf"))
    assert defaults.close_timeout() is None
    defaults.set("close_timeout", 0)
    assert defaults.close_timeout() == 0.0


@pytest.mark.parametrize(("text", "value"), [
    ("4096", 4096), ("0x1000", 4096), ("4k", 4096), ("4KiB", 4096), ("4 KB", 4096),
    ("256M", 256 << 20), ("1G", 1 << 30), ("2TiB", 2 << 40),
])
def test_parse_size(text: str, value: int) -> None:
    assert defaults.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "M", "-1", "1.5G", "4 X", "0xZZ"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a byte count"):
        defaults.parse_size(text)


# -- the parallel module reads them ---------------------------------------------------------


def test_parallel_reads_the_settings(tmp_path: Path) -> None:
    with defaults.set(num_threads=3, task_size=8192):
        assert hipfile.get_num_threads() == 3
        assert parallel.default_task_size() == 8192
        assert parallel._default_executor()._max_workers == 3
        with defaults.set(num_threads=2):
            assert parallel._default_executor()._max_workers == 2
    defaults.set("num_threads", 4)
    assert defaults.num_threads() == 4
    assert parallel._default_executor()._max_workers == 4


def test_pread_uses_task_size_from_defaults(tmp_path: Path) -> None:
    from _util import device_array

    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(256)) * 256)  # 64 KiB
    tasks = []

    class Counting(parallel.ThreadPoolExecutor):
        def submit(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            tasks.append(args)
            return super().submit(*args, **kwargs)

    pool = Counting(2)
    try:
        with hipfile.Driver(), device_array(1 << 16) as dev, hipfile.FileHandle(path) as fh, \
                defaults.set("task_size", 4096):
            assert fh.pread(dev, executor=pool).result(timeout=30) == 1 << 16
    finally:
        pool.shutdown()
    assert len(tasks) == 16


def test_sizes_take_units_in_set_as_in_the_environment() -> None:
    # HIPFILE_TASK_SIZE=1M is accepted; so is the same text in set()
    defaults.set("task_size", "1M")
    assert defaults.task_size() == 1 << 20
    with defaults.set(engine_task_size="512KiB", task_size="0x2000"):
        assert defaults.engine_task_size() == 512 << 10
        assert defaults.task_size() == 0x2000
    assert defaults.task_size() == 1 << 20
    with pytest.raises(ValueError, match="task_size: '1 parsec' is not a byte count"):
        defaults.set("task_size", "1 parsec")
    with pytest.raises(ValueError, match="at least 1"):
        defaults.set("task_size", "0")
    with pytest.raises(TypeError, match="num_threads must be an int"):
        defaults.set("num_threads", "4")  # counts are not sizes
    assert defaults.task_size() == 1 << 20



def _pread_task_size(value: Any, tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 4096)
    out = bytearray(4096)
    with hipfile.open(path) as fh:
        hipfile.pread(fh, out, 4096, 0, task_size=value).result()


INT_ARGUMENTS = [
    ("defaults.set(num_threads)", lambda v, _: hipfile.defaults.set(num_threads=v)),
    ("Driver.set_max_cache_size(kib)", lambda v, _: hipfile.Driver.set_max_cache_size(v)),
    ("Buffer(length)", lambda v, _: hipfile.Buffer(4096, v)),
    ("pread(task_size)", _pread_task_size),
]


@pytest.mark.parametrize("call", [c for _, c in INT_ARGUMENTS],
                         ids=[n for n, _ in INT_ARGUMENTS])
def test_one_rule_for_integer_arguments(call: Any, tmp_path: Path) -> None:
    """Every integer argument follows one rule (the core's): a bool or a
    float is a TypeError that names the type, 2**63 or more a ValueError."""
    with pytest.raises(TypeError, match="must be an int, not bool"):
        call(True, tmp_path)
    with pytest.raises(TypeError, match="must be an int, not float"):
        call(4.0, tmp_path)
    with pytest.raises(ValueError, match="out of range"):
        call(1 << 63, tmp_path)
