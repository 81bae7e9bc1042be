"""Exceptions: decoding of statuses and ssize_t results, fields, messages, pickling."""

from __future__ import annotations

import errno
import os
import pickle

import pytest

import hipfile
from hipfile import errors
from hipfile._lib import _errors, _hipfile
from hipfile.enums import OpError


@pytest.fixture
def library_strings() -> None:
    """Load the library so that messages use ``hipFileGetOpErrorString``."""
    hipfile.get_version()
    assert _hipfile.library_loaded()


# -- ssize_t results ---------------------------------------------------------


@pytest.mark.parametrize(
    ("err_no", "cls"),
    [
        (errno.ENOENT, FileNotFoundError),
        (errno.EACCES, PermissionError),
        (errno.EINTR, InterruptedError),
        (errno.EAGAIN, BlockingIOError),
        (errno.EISDIR, IsADirectoryError),
    ],
)
def test_minus_one_with_errno_is_the_matching_oserror(err_no: int, cls: type) -> None:
    exc = errors.error_for_result(-1, err_no, "hipFileRead")
    assert type(exc) is cls
    assert exc.errno == err_no
    assert os.strerror(err_no) in str(exc)
    assert "hipFileRead" in str(exc)


def test_minus_one_with_eio_is_a_plain_oserror() -> None:
    exc = errors.error_for_result(-1, errno.EIO, "hipFileWrite")
    assert type(exc) is OSError
    assert exc.errno == errno.EIO
    assert "hipFileWrite" in str(exc)


def test_minus_one_without_errno_is_a_hip_runtime_error() -> None:
    exc = errors.error_for_result(-1, 0, "hipFileRead")
    assert type(exc) is errors.HipRuntimeError
    assert exc.hipfile_err == OpError.HIP_DRIVER_ERROR
    assert exc.hip_err == 1
    assert exc.func == "hipFileRead"


def test_invalid_value_result(library_strings: None) -> None:
    exc = errors.error_for_result(-5022, 0, "hipFileRead")
    assert type(exc) is errors.InvalidValueError
    assert isinstance(exc, ValueError)
    assert isinstance(exc, hipfile.HipFileException)
    assert exc.hipfile_err == 5022
    assert exc.err is OpError.INVALID_VALUE
    text = str(exc)
    assert text.startswith("hipFileRead: ")
    assert "INVALID_VALUE (5022)" in text
    assert _hipfile.get_op_error_string(5022) in text


def test_hipfile_code_keeps_errno_in_the_message() -> None:
    exc = errors.error_for_result(-5022, errno.EINVAL, "hipFileWrite")
    assert isinstance(exc, errors.InvalidValueError)
    assert "EINVAL" in str(exc)


def test_internal_error_with_errno_lost() -> None:
    exc = errors.error_for_result(-5030, 0, "hipFileWrite")
    assert type(exc) is errors.InternalError
    assert exc.hipfile_err == OpError.INTERNAL_ERROR
    assert "hipFileWrite" in str(exc)


@pytest.mark.parametrize("ret", [-2, -3, -100, -4999])
def test_small_negative_is_a_negated_hip_error(ret: int) -> None:
    exc = errors.error_for_result(ret, 0, "hipFileRead")
    assert type(exc) is errors.HipRuntimeError
    assert exc.hip_err == -ret
    assert exc.hipfile_err == OpError.HIP_DRIVER_ERROR
    assert f"hipError_t {-ret}" in str(exc)


def test_raise_result_raises_what_error_for_result_builds() -> None:
    with pytest.raises(errors.HandleNotRegisteredError) as info:
        errors.raise_result(-5027, 0, "hipFileRead")
    assert info.value.hipfile_err == 5027
    with pytest.raises(FileNotFoundError):
        errors.raise_result(-1, errno.ENOENT, "hipFileRead")


def test_real_library_result_is_decoded(library_strings: None) -> None:
    """A stale handle read through the shim: the library's negative result
    becomes the matching exception naming the C function."""
    with hipfile.Driver():
        with pytest.raises(errors.HandleNotRegisteredError) as info:
            _hipfile.read(0xDEAD0, 0x1000, 16, 0, 0)
    assert info.value.func == "hipFileRead"
    assert _hipfile.get_op_error_string(5027) in str(info.value)


# -- hipFileError_t statuses --------------------------------------------------


@pytest.mark.parametrize(
    ("code", "cls", "builtin"),
    [
        (5001, errors.DriverNotInitializedError, None),
        (5022, errors.InvalidValueError, ValueError),
        (5023, errors.MemoryAlreadyRegisteredError, None),
        (5024, errors.MemoryNotRegisteredError, None),
        (5027, errors.HandleNotRegisteredError, None),
        (5028, errors.HandleAlreadyRegisteredError, None),
        (5025, errors.PermissionDeniedError, PermissionError),
        (5012, errors.PointerError, ValueError),
        (5013, errors.PointerError, ValueError),
        (5014, errors.PointerError, ValueError),
        (5007, errors.NotSupportedError, NotImplementedError),
        (5008, errors.NotSupportedError, NotImplementedError),
        (5009, errors.NotSupportedError, NotImplementedError),
        (5038, errors.AsyncNotSupportedError, NotImplementedError),
        (5037, errors.BatchFullError, None),
        (5030, errors.InternalError, None),
        (5011, errors.HipRuntimeError, None),
        (5002, errors.HipFileException, None),
        (5020, errors.HipFileException, None),
    ],
)
def test_exception_for_picks_the_class(code: int, cls: type, builtin: type | None) -> None:
    exc = errors.exception_for(code, 0, "hipFileSomething")
    assert type(exc) is cls
    assert exc.hipfile_err == code
    assert exc.func == "hipFileSomething"
    if builtin is not None:
        assert isinstance(exc, builtin)


def test_raise_status() -> None:
    with pytest.raises(errors.MemoryAlreadyRegisteredError) as info:
        errors.raise_status(5023, 0, "hipFileBufRegister")
    assert str(info.value).startswith("hipFileBufRegister: MEMORY_ALREADY_REGISTERED (5023)")


def test_hip_driver_error_message_names_the_hip_error() -> None:
    exc = errors.exception_for(OpError.HIP_DRIVER_ERROR, 1, "hipFileReadAsync")
    assert exc.hip_err == 1
    text = str(exc)
    assert "hipError_t 1" in text
    assert "hipErrorInvalidValue" in text
    assert text.startswith("hipFileReadAsync: ")


def test_unknown_code_keeps_the_int() -> None:
    exc = hipfile.HipFileException(6123, 0)
    assert exc.err == 6123
    assert not isinstance(exc.err, OpError)
    assert "6123" in str(exc)


def test_upstream_constructor_and_fields(library_strings: None) -> None:
    exc = hipfile.HipFileException(OpError.INVALID_VALUE, 0)
    assert exc.hipfile_err == 5022
    assert exc.hip_err == 0
    assert exc.func is None
    assert exc.err is OpError.INVALID_VALUE
    assert "5022" in str(exc)
    assert _hipfile.get_op_error_string(5022) in str(exc)
    exc = hipfile.HipFileException(OpError.HIP_DRIVER_ERROR, 100)
    assert exc.hip_err == 100
    assert "100" in str(exc)
    with pytest.raises(hipfile.HipFileException):
        raise errors.InvalidValueError(5022)


def test_detail_is_in_the_message() -> None:
    exc = errors.exception_for(5030, 0, "hipFileRead", "extra context")
    assert str(exc).endswith("[extra context]")


def test_in_flight_error() -> None:
    exc = errors.InFlightError(detail="cannot close: 2 in flight")
    assert isinstance(exc, RuntimeError)
    assert isinstance(exc, hipfile.HipFileException)
    assert str(exc) == "cannot close: 2 in flight"
    assert str(errors.InFlightError()) == "operations are still in flight"
    # raised by the package: no library status of its own
    assert exc.hipfile_err == 0 and exc.hip_err == 0
    assert exc.from_library is False
    assert errors.exception_for(5022).from_library is True


def test_closed_file_error_is_value_and_runtime_error() -> None:
    assert issubclass(errors.ClosedFileError, ValueError)
    assert issubclass(errors.ClosedFileError, RuntimeError)
    assert issubclass(errors.ClosedFileError, hipfile.HipFileException)
    exc = errors.ClosedFileError("I/O operation on a closed FileHandle")
    assert exc.hipfile_err == 0 and exc.from_library is False
    assert str(exc) == "I/O operation on a closed FileHandle" == str(errors.ClosedFileError())


def test_library_errors_are_oserrors() -> None:
    assert issubclass(errors.HipFileLibraryNotFound, OSError)
    assert issubclass(errors.HipFileSymbolNotFound, OSError)
    assert issubclass(errors.HipFileLibraryNotFound, errors.HipFileLibraryError)
    assert issubclass(errors.HipFileSymbolNotFound, errors.HipFileLibraryError)


def test_op_error_string_without_library_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    queries = _errors._library_queries
    assert queries is not None       # set by the bindings when they are imported
    monkeypatch.setattr(_errors, "_library_queries", (lambda: False, *queries[1:]))
    assert errors.op_error_string(5022) == "invalid value"
    assert errors.op_error_string(4242) == "unknown hipFile error 4242"


# -- pickling -----------------------------------------------------------------


def _status_exceptions() -> list[Exception]:
    out: list[Exception] = []
    for name in errors.__all__:
        cls = getattr(errors, name)
        if not issubclass(cls, errors.HipFileException) or not cls.from_library:
            continue
        out.append(cls(5011 if cls is errors.HipRuntimeError else 5022, 7, "hipFileRead", "d"))
    return out


@pytest.mark.parametrize("exc", _status_exceptions(), ids=lambda e: type(e).__name__)
def test_status_exceptions_pickle(exc: errors.HipFileException) -> None:
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc)
    assert back.hipfile_err == exc.hipfile_err
    assert back.hip_err == 7
    assert back.func == "hipFileRead"
    assert str(back) == str(exc)


@pytest.mark.parametrize(
    "exc",
    [
        errors.ClosedFileError("I/O operation on a closed FileHandle"),
        errors.ClosedError("operation on a closed BatchIO"),
        errors.InFlightError("cannot close the file: 2 in flight", "close"),
        errors.InFlightTimeoutError("cannot close the file: 2 in flight after 1.0 s"),
        errors.ForkedProcessError("the file was opened in process 1"),
        errors.HipFileLibraryNotFound("libhipfile could not be loaded; tried: /x"),
        errors.HipFileSymbolNotFound("hipFileDriverOpen is not exported"),
        errors.HipFileLibraryError("libhipfile lacks a function"),
        errors.error_for_result(-1, errno.ENOENT, "hipFileRead"),
        errors.error_for_result(-2, 0, "hipFileRead"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_other_exceptions_pickle(exc: Exception) -> None:
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc)
    assert str(back) == str(exc)
    assert back.args == exc.args


def test_every_exported_exception_is_covered() -> None:
    exported = {getattr(errors, n) for n in errors.__all__}
    covered = {type(e) for e in _status_exceptions()} | {
        errors.ClosedError,
        errors.ClosedFileError,
        errors.InFlightError,
        errors.InFlightTimeoutError,
        errors.ForkedProcessError,
        errors.HipFileLibraryError,
        errors.HipFileLibraryNotFound,
        errors.HipFileSymbolNotFound,
    }
    assert exported <= covered
    for name in errors.__all__:
        assert getattr(hipfile, name) is getattr(errors, name)


def test_one_base_for_objects_used_after_close() -> None:
    """ClosedError: a package error (hipfile_err 0), a ValueError as for
    closed Python files, a RuntimeError as upstream raised; a closed file's
    error is one of them."""
    exc = errors.ClosedError()
    assert isinstance(exc, errors.HipFileException) and not exc.from_library
    assert isinstance(exc, ValueError) and isinstance(exc, RuntimeError)
    assert str(exc) == "operation on a closed object"
    assert issubclass(errors.ClosedFileError, errors.ClosedError)
    assert str(errors.ClosedFileError()) == "I/O operation on a closed FileHandle"


def test_in_flight_timeout_is_both_an_in_flight_error_and_a_timeout() -> None:
    exc = errors.InFlightTimeoutError("cannot close the file: 2 in flight after 1.0 s")
    assert isinstance(exc, errors.InFlightError)
    assert isinstance(exc, TimeoutError)
    assert exc.hipfile_err == 0 and not exc.from_library
    assert str(exc) == "cannot close the file: 2 in flight after 1.0 s"
    assert str(errors.InFlightTimeoutError()) == "operations are still in flight after the timeout"
