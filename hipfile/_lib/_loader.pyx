# cython: language_level=3
"""Finding and opening libhipfile.

Invariants
- The library is opened at most once per process, on first use, under
  ``lock``; the handle never changes afterwards.
- The paths tried, in order: ``HIPFILE_LIBRARY`` alone when set, else
  ``$ROCM_PATH/lib``, ``/opt/rocm/lib``, then the system loader.
- Binding its functions is the business of :mod:`hipfile._lib._bindings`;
  a function the library lacks is named, with the library's version, by
  ``symbol``. ``check_status`` turns a failed ``hipFileError_t`` into its
  exception.
"""

import os
import threading

from posix.dlfcn cimport dlopen, dlerror, dlsym, RTLD_NOW, RTLD_LOCAL

from hipfile._lib.chipfile cimport hipFileError_t, hipFileGetVersion_t
from hipfile._lib._errors import (
    NO_ROCM_HINT, HipFileLibraryNotFound, HipFileSymbolNotFound, raise_status)

cdef void *_lib = NULL
cdef object _lib_path = None
lock = threading.RLock()


def candidate_paths():
    """The paths tried, in order, to load libhipfile."""
    explicit = os.environ.get("HIPFILE_LIBRARY")
    if explicit:
        return [explicit]
    paths = []
    rocm = os.environ.get("ROCM_PATH")
    if rocm:
        paths += [os.path.join(rocm, "lib", "libhipfile.so"),
                  os.path.join(rocm, "lib", "libhipfile.so.0")]
    paths += ["/opt/rocm/lib/libhipfile.so", "/opt/rocm/lib/libhipfile.so.0",
              "libhipfile.so.0", "libhipfile.so"]
    return paths


cdef int _open_library() except -1:
    global _lib, _lib_path
    cdef void *h = NULL
    cdef bytes bpath
    cdef const char *reason
    tried = []
    for p in candidate_paths():
        if os.sep in p and not os.path.exists(p):
            tried.append(f"{p} (no such file)")
            continue
        bpath = os.fsencode(p)
        h = dlopen(bpath, RTLD_NOW | RTLD_LOCAL)
        if h != NULL:
            _lib_path = p
            _lib = h
            return 0
        reason = dlerror()
        tried.append(f"{p} ({reason.decode(errors='replace') if reason != NULL else 'failed'})")
    raise HipFileLibraryNotFound(
        "libhipfile could not be loaded; tried: " + "; ".join(tried)
        + ". Install hipFile (ROCm 7.2 or later), set ROCM_PATH to its prefix, "
        "or set HIPFILE_LIBRARY to the library's path. " + NO_ROCM_HINT)


cdef void *handle() except NULL:
    """The library's ``dlopen`` handle, opening it on first use."""
    if _lib == NULL:
        with lock:
            if _lib == NULL:
                _open_library()
    return _lib


cdef object path():
    return _lib_path


cdef bint loaded() noexcept:
    return _lib != NULL


def load_library():
    """Load libhipfile now (it is otherwise loaded on first use).

    Returns
    -------
    str
        The path that was loaded.

    Raises
    ------
    HipFileLibraryNotFound
        No candidate could be loaded; the message lists each path and why.
    """
    handle()
    return _lib_path


def library_loaded():
    """Whether libhipfile has been loaded in this process."""
    return _lib != NULL


def library_path():
    """The path libhipfile was loaded from, or None."""
    return _lib_path


def has_symbol(name):
    """Whether the loaded libhipfile exports ``name`` (loads the library)."""
    cdef bytes b = name.encode()
    return dlsym(handle(), b) != NULL


cdef void *symbol(const char *name) except NULL:
    """``name``'s address in the library (opening it); raises
    HipFileSymbolNotFound, naming the library and its version, when it does
    not export it."""
    cdef void *sym = dlsym(handle(), name)
    if sym == NULL:
        raise HipFileSymbolNotFound(
            f"{name.decode()} is not exported by {_lib_path} (hipFile {_version_text()}); "
            "it needs a newer hipFile release")
    return sym


cdef str _version_text():
    cdef unsigned major = 0, minor = 0, patch = 0
    cdef hipFileGetVersion_t get_version = <hipFileGetVersion_t>dlsym(_lib, b"hipFileGetVersion")
    if get_version == NULL or get_version(&major, &minor, &patch).err != 0:
        return "version unknown"
    return f"{major}.{minor}.{patch}"


cdef int check_status(hipFileError_t e, const char *func) except -1 nogil:
    """Raise the exception for a failed hipFileError_t (takes the GIL only then)."""
    if e.err != 0:
        with gil:
            raise_status(e.err, e.hip_drv_err, func.decode())
    return 0
