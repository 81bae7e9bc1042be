# Finding and opening libhipfile, and resolving its symbols.
#
# Invariants
# - The library is opened at most once per process, on first use, under
#   ``_lock``; ``_lib`` never changes afterwards.
# - Opening it binds every function pointer of the module at once
#   (_bind_symbols), before ``_lib`` is set; a function the library lacks
#   stays NULL, and calling it raises HipFileSymbolNotFound naming it and the
#   library's version (_resolve). Bound pointers never change and may be
#   called without the GIL.

cdef void *_lib = NULL
cdef object _lib_path = None
_lock = threading.RLock()


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
    cdef void *handle = NULL
    cdef bytes bpath
    cdef const char *reason
    tried = []
    for path in candidate_paths():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} (no such file)")
            continue
        bpath = os.fsencode(path)
        handle = dlopen(bpath, RTLD_NOW | RTLD_LOCAL)
        if handle != NULL:
            _bind_symbols(handle)
            _lib = handle
            _lib_path = path
            return 0
        reason = dlerror()
        tried.append(f"{path} ({reason.decode(errors='replace') if reason != NULL else 'failed'})")
    from hipfile.platforms import NO_ROCM_HINT
    raise HipFileLibraryNotFound(
        "libhipfile could not be loaded; tried: " + "; ".join(tried)
        + ". Install hipFile (ROCm 7.2 or later), set ROCM_PATH to its prefix, "
        "or set HIPFILE_LIBRARY to the library's path. " + NO_ROCM_HINT)


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
    with _lock:
        if _lib == NULL:
            _open_library()
        return _lib_path


def library_loaded():
    """Whether libhipfile has been loaded in this process."""
    return _lib != NULL


def library_path():
    """The path libhipfile was loaded from, or None."""
    return _lib_path


cdef void *_resolve(const char *name) except NULL:
    cdef void *sym
    with _lock:
        if _lib == NULL:
            _open_library()
        sym = dlsym(_lib, name)
    if sym == NULL:
        pyname = name.decode()
        raise HipFileSymbolNotFound(
            f"{pyname} is not exported by {_lib_path} (hipFile {_version_text()}); "
            "it needs a newer hipFile release")
    return sym


def has_symbol(name):
    """Whether the loaded libhipfile exports ``name`` (loads the library)."""
    load_library()
    cdef bytes b = name.encode()
    return dlsym(_lib, b) != NULL


