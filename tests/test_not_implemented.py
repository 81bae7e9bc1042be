"""A library that declares a function without implementing it answers
hipFileInternalError (5030): the error names the function and the library's
version and says it may not be implemented; capability probes skip tests."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
from _capability import implemented, skip_reason

import hipfile
from hipfile import errors


def test_5030_names_function_version_and_hint() -> None:
    exc = errors.exception_for(5030, 0, "hipFileBatchIOGetStatus")
    assert type(exc) is errors.InternalError
    version = ".".join(map(str, hipfile.get_version()))
    text = str(exc)
    assert text.startswith("hipFileBatchIOGetStatus: INTERNAL_ERROR (5030)")
    assert f"hipFile {version}: this library may not implement hipFileBatchIOGetStatus" in text
    again = pickle.loads(pickle.dumps(exc))
    assert str(again) == text


def test_5030_keeps_a_given_detail_and_needs_a_function() -> None:
    assert "may not implement" not in str(errors.exception_for(5030, 0, "hipFileRead", "x"))
    assert "may not implement" not in str(errors.exception_for(5030))
    assert "may not implement" not in str(errors.exception_for(5022, 0, "hipFileRead"))


def test_result_decoding_gives_the_hint_too() -> None:
    exc = errors.error_for_result(-5030, 0, "hipFileBatchIOCancel")
    assert "may not implement hipFileBatchIOCancel" in str(exc)


@pytest.mark.parametrize("func", ["hipFileHandleRegister", "hipFileBufRegister",
                                  "hipFileRead", "hipFileWrite", "hipFileReadAsync",
                                  "hipFileDriverOpen", "hipFileStreamRegister"])
def test_5030_of_a_function_every_release_implements_is_a_failure_not_a_hint(
        func: str) -> None:
    """Every release implements registration and I/O: an INTERNAL_ERROR
    from one of them is the library failing, not a missing function."""
    for exc in (errors.exception_for(5030, 0, func), errors.error_for_result(-5030, 0, func)):
        assert type(exc) is errors.InternalError
        assert str(exc).startswith(f"{func}: INTERNAL_ERROR (5030)")
        assert "may not implement" not in str(exc)


def test_5030_of_a_registration_through_the_binding_has_no_hint(tmp_path: Path) -> None:
    """The registration path itself (emulated fault injection of 5030)."""
    if hipfile.platforms.active() != "emulated":
        pytest.skip("needs the emulated platform's fault injection")
    import errno

    from hipfile.platforms import emulated

    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 4096)
    fh = hipfile.FileHandle(path, os.O_RDONLY)
    fh.open()                       # the descriptor; registration at first need
    emulated.inject_fault("register", errno.EIO)   # the call answers 5030
    try:
        with pytest.raises(hipfile.InternalError) as info:
            fh.handle  # noqa: B018
        assert info.value.func == "hipFileHandleRegister"
        assert "may not implement" not in str(info.value)
    finally:
        emulated.inject_fault("register", errno.EIO, count=0)
        fh.close()


def test_probe_agrees_with_a_direct_call() -> None:
    reason = skip_reason("hipFileDriverGetProperties")
    with hipfile.Driver():
        try:
            hipfile.driver_get_properties()
        except hipfile.InternalError as e:
            assert reason is not None and "hipFileDriverGetProperties" in reason
            assert "5030" in reason and not implemented("hipFileDriverGetProperties")
            assert "may not implement hipFileDriverGetProperties" in str(e)
        else:
            assert reason is None and implemented("hipFileDriverGetProperties")


def test_probe_of_an_unknown_function_is_an_error() -> None:
    with pytest.raises(KeyError, match="no capability probe"):
        skip_reason("hipFileNoSuchFunction")
