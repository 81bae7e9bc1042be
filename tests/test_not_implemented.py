"""A library that declares a function without implementing it answers
hipFileInternalError (5030): the error names the function and the library's
version and says it may not be implemented; capability probes skip tests."""

from __future__ import annotations

import pickle

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
    exc = errors.error_for_result(-5030, 0, "hipFileWrite")
    assert "may not implement hipFileWrite" in str(exc)


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
