# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A stream-ordered submission planned before it is carried out (see
submit.pyx): its ranges parsed and checked against the buffer, a lone
range's task size, the files of a many-file operation checked, and the
staged path's plan (each range clipped at its file's end, one handle and
engine operation per operation, completion flags). Nothing here enqueues
stream work or hands chunks to the engine's threads."""

import errno
import os

from cpython.exc cimport PyErr_Clear, PyErr_Occurred, PyErr_SetFromErrno
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.ref cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.stdint cimport int64_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc, realloc
from posix.stat cimport fstat, struct_stat

from hipfile._lib.chipfile cimport hoff_t
from hipfile._lib._core cimport FileCore, c_as_index, check_file, io_range, range_fits
from hipfile._lib._runtime cimport hip_fn, hipapi, load_hip_capi, pointer_device
from hipfile._lib.engine.cengine cimport eng, hfe_op, hfe_piece, hfe_span
from hipfile._lib.engine.device cimport eng_cfg
from hipfile._lib.engine.handle cimport StreamIOHandle, new_handle
from hipfile._lib._errors import ClosedFileError, read_only_error


cdef object _numpy = None

# A lone range of less than one default task per thread (up to
# SPLIT_WAYS threads) is cut into chunks of at least SPLIT_MIN bytes, one
# per thread, so that several threads read it: on an H200, 2 MiB in 256 KiB
# chunks loaded in 0.2 ms, in one chunk in 0.5 ms.
cdef size_t SPLIT_MIN = 256 << 10
cdef int SPLIT_WAYS = 8


cdef int _check_slow(object r, size_t length, hfe_span *out) except -1:
    """One range as any object: a 3-sequence (not a dict or a string) of
    ints or ``None`` for the size, checked by the one range check."""
    t = None if isinstance(r, (dict, str, bytes)) else tuple(r)
    if t is None or len(t) != 3:
        raise TypeError("each range must be a (size, file_offset, buffer_offset) tuple, "
                        f"got {type(r).__name__} {r!r}")
    return io_range(length, t[0], t[1], t[2], <size_t *>&out.len,
                     <hoff_t *>&out.file_offset, <hoff_t *>&out.buffer_offset)


cdef inline bint _take_fitting(long long n, long long f, long long b, size_t length,
                               hfe_span *out) noexcept:
    """Store a range that fits the buffer; False (nothing stored) for any
    other, which then goes through the one range check."""
    if not range_fits(length, n, f, b):
        return 0
    out.len = <uint64_t>n
    out.file_offset = f
    out.buffer_offset = b
    return 1


cdef hfe_span *parse_ranges(object ranges, size_t length, Py_ssize_t *count) except NULL:
    """Every range checked against ``length`` into a C array (freed by the
    caller; ``count`` its length). ``ranges``: an iterable of
    ``(size, file_offset, buffer_offset)`` tuples, or an integer array of
    shape (N, 3), read without a Python object per range."""
    global _numpy
    cdef Py_ssize_t i, n
    cdef hfe_span *out = NULL
    cdef long long a0, a1, a2
    cdef int o0 = 0, o1 = 0, o2 = 0
    cdef const long long[:, ::1] view
    cdef PyObject *item
    if hasattr(ranges, "__array_interface__") and not isinstance(ranges, (list, tuple)):
        if _numpy is None:
            import numpy
            _numpy = numpy
        arr = _numpy.asarray(ranges)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"ranges given as an array must hold integers, got {arr.dtype}")
        if arr.ndim != 2 or arr.shape[1] != 3:
            raise ValueError("ranges given as an array must have shape (N, 3): "
                             f"(size, file_offset, buffer_offset) rows, got {arr.shape}")
        if arr.dtype.kind == "u" and arr.size and int(arr.max()) >= (1 << 63):
            raise ValueError(f"a range holds {int(arr.max())}, out of range (a size or "
                             "offset must be below 2**63)")
        view = _numpy.ascontiguousarray(arr, dtype=_numpy.int64)
        n = view.shape[0]
        out = <hfe_span *>malloc((n if n > 0 else 1) * sizeof(hfe_span))
        if out == NULL:
            raise MemoryError()
        try:
            for i in range(n):
                a0 = view[i, 0]
                a1 = view[i, 1]
                a2 = view[i, 2]
                if not _take_fitting(a0, a1, a2, length, &out[i]):
                    _check_slow((a0, a1, a2), length, &out[i])
        except BaseException:
            free(out)
            raise
        count[0] = n
        return out
    if not isinstance(ranges, (list, tuple)):
        ranges = list(ranges)
    n = len(ranges)
    out = <hfe_span *>malloc((n if n > 0 else 1) * sizeof(hfe_span))
    if out == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            r = ranges[i]
            if type(r) is tuple and PyTuple_GET_SIZE(r) == 3:
                item = PyTuple_GET_ITEM(r, 0)
                if (type(<object>item) is int and type(<object>PyTuple_GET_ITEM(r, 1)) is int
                        and type(<object>PyTuple_GET_ITEM(r, 2)) is int):
                    a0 = PyLong_AsLongLongAndOverflow(<object>item, &o0)
                    a1 = PyLong_AsLongLongAndOverflow(<object>PyTuple_GET_ITEM(r, 1), &o1)
                    a2 = PyLong_AsLongLongAndOverflow(<object>PyTuple_GET_ITEM(r, 2), &o2)
                    if not (o0 or o1 or o2) and _take_fitting(a0, a1, a2, length, &out[i]):
                        continue
            _check_slow(r, length, &out[i])
    except BaseException:
        free(out)
        raise
    count[0] = n
    return out


cdef tuple entry_files(entries):
    """The distinct files of ``(file, size, file_offset, buffer_offset)``
    entries in order of first use, and each entry's index among them."""
    files = []
    where = {}            # id(file) -> its index in files
    idx = []
    for e in entries:
        t = None if isinstance(e, (dict, str, bytes)) else tuple(e)
        if t is None or len(t) != 4:
            raise TypeError("each entry must be a (file, size, file_offset, buffer_offset) "
                            f"tuple, got {type(e).__name__} {e!r}")
        fo = t[0]
        if not isinstance(fo, FileCore):
            raise TypeError(f"an entry's file must be an open hipfile.FileHandle, not "
                            f"{type(fo).__name__}")
        k = where.get(id(fo), -1)
        if k < 0:
            k = len(files)
            where[id(fo)] = k
            files.append(fo)
        idx.append(k)
    return files, idx


cdef object closed_entry(object exc, list files, list idx):
    """``exc`` (ClosedFileError of a many-file operation) naming the first of
    ``files`` closed or closing, with the first entry that uses it."""
    cdef FileCore f
    for k, fo in enumerate(files):
        f = <FileCore>fo
        if not f._is_open or f._closing:
            path = f._descriptors.path if f._descriptors is not None else None
            name = f" {os.fspath(path)!r}" if path is not None else ""
            return ClosedFileError(f"the file{name} of entry {idx.index(k)}: {exc}")
    return exc


cdef tuple enter_files(list files, int opcode, list entered, str call):
    """Check each file of a many-file operation ``call`` (open, current, a
    POSIX descriptor open for the operation, and for a write no append
    handle: the rows name file offsets) and count it as entering (appended
    to ``entered``; the first is counted by the preamble); returns each
    file's descriptor and, for a read, where its reads stop."""
    import fcntl

    cdef FileCore f
    cdef int fd
    file_fds = []
    file_ends = []
    for fo in files:
        f = <FileCore>fo
        check_file(f)
        if fo is not files[0]:
            f.add_entering(1)       # with the check: a close waits for it or refuses it
            entered.append(fo)
        fd = f._descriptors.engine()
        if fd < 0:
            raise NotImplementedError("a many-file operation needs files with a POSIX "
                                      "descriptor")
        acc = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
        if opcode == 0 and acc == os.O_WRONLY:
            raise OSError(errno.EBADF, "cannot read: the file was opened write-only",
                          f._descriptors.path)
        if opcode == 1 and acc == os.O_RDONLY:
            raise read_only_error(f._descriptors.mode, f._descriptors.path)
        if opcode == 1 and f._append is not None:
            f._append.refuse_ranges(call)
        file_fds.append(fd)
        file_ends.append(file_end(f, fd) if opcode == 0 else -1)
    return file_fds, file_ends


cdef class StagedPlan:
    """One staged submission, planned: its pieces (each range clipped at the
    end of its file, with its descriptor), one handle per operation (one
    for all ranges when grouped) with its engine operation, and where each
    read operation's completion flag is. Frees its arrays itself."""

    def __dealloc__(self):
        free(self.pieces)
        free(self.groups)
        free(self.cdev)
        free(self.cval)

    cdef int abandon(self) except -1:
        for o in self.handles:
            (<StreamIOHandle>o)._abandon()
        return 0


cdef StagedPlan plan_staged(FileCore f, Submission *sub, FlagPool pool):
    """Plan the staged path's submission ``sub`` (see :func:`_submit_staged`)
    into ``sub.staged``: its pieces, one handle and engine operation per
    operation, the read operations' completion flags (arrays of the plan,
    freed with it). On an error, what was made is abandoned."""
    cdef StagedPlan plan = StagedPlan.__new__(StagedPlan)
    cdef hfe_span *checked = sub.spans
    cdef int n = sub.n, opcode = sub.opcode, fd = sub.fd
    cdef uintptr_t base = sub.base
    cdef const int *fds = sub.fds
    cdef const long long *ends = sub.ends
    cdef bint grouped = sub.grouped
    cdef int direct_fd = -1, i
    cdef hfe_span whole
    cdef long long wend, end = -1
    cdef size_t nbytes, total = 0
    cdef hoff_t foff, boff
    cdef StreamIOHandle hd
    if fds == NULL and opcode == 0:
        end = file_end(f, fd)
        direct_fd = direct_descriptor(f, checked, n)
    elif fds == NULL:
        wend = 0
        for i in range(n):
            if checked[i].len and checked[i].file_offset + <long long>checked[i].len > wend:
                wend = checked[i].file_offset + <long long>checked[i].len
        record_write_end(f, wend)
    plan.ng = 1 if grouped else n
    plan.handles = []
    plan.pieces = <hfe_piece *>malloc(n * sizeof(hfe_piece))
    plan.groups = <hfe_op **>calloc(plan.ng, sizeof(hfe_op *))
    plan.cdev = <uint64_t *>calloc(plan.ng, sizeof(uint64_t))
    plan.cval = <uint32_t *>calloc(plan.ng, sizeof(uint32_t))
    if plan.pieces == NULL or plan.groups == NULL or plan.cdev == NULL or plan.cval == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            nbytes = checked[i].len
            foff = checked[i].file_offset
            boff = checked[i].buffer_offset
            if fds != NULL and opcode == 0:
                end = ends[i]
            if end >= 0:
                nbytes = 0 if foff >= end else <size_t>min(<long long>nbytes, end - foff)
            plan.pieces[i].file_offset = foff
            plan.pieces[i].device = base + boff
            plan.pieces[i].len = nbytes
            plan.pieces[i].group = 0 if grouped else i
            plan.pieces[i].fd = fds[i] if fds != NULL else direct_fd
            plan.pieces[i].fd_alt = fd if fds == NULL and direct_fd >= 0 else -1
            plan.pieces[i].alloc = sub.allocs[i] if sub.allocs != NULL else 0
            total += nbytes
        for i in range(plan.ng):      # one handle per operation (grouped: all its bytes)
            whole.len = total if grouped else plan.pieces[i].len
            whole.file_offset = checked[i].file_offset
            whole.buffer_offset = checked[i].buffer_offset
            plan.handles.append(new_handle(opcode, &whole, sub.device, sub.stream, pool,
                                           n if grouped else 1))
        for i in range(plan.ng):
            hd = <StreamIOHandle>plan.handles[i]
            hd.make_op(sub.task, NULL, NULL, NULL)
            plan.groups[i] = hd._op
            if opcode == 0:
                plan.cdev[i] = hd._flag.devptr
                plan.cval[i] = hd._value
    except BaseException:
        plan.abandon()
        raise
    sub.staged.opcode = opcode
    sub.staged.fd = fd
    sub.staged.pieces = plan.pieces
    sub.staged.npieces = n
    sub.staged.groups = plan.groups
    sub.staged.ngroups = plan.ng
    sub.staged.complete_dev = plan.cdev
    sub.staged.complete_value = plan.cval
    sub.staged.chunk_cap = sub.task
    return plan


cdef long long file_end(FileCore f, int fd) except -1:
    """Where reads of ``f`` stop: the end of the file as it is now, or as
    the staged writes submitted on it before will leave it (a write then a
    read of the same bytes, in stream order). ``fstat`` is called from C:
    the size is all that is needed, and ``os.fstat``'s result object cost
    as much as the rest of a small read's planning."""
    cdef struct_stat st
    cdef int rc
    with nogil:
        rc = fstat(fd, &st)
    if rc != 0:
        PyErr_SetFromErrno(OSError)
    return max(<long long>st.st_size, f._staged_write_end)


cdef int record_write_end(FileCore f, long long wend) except -1:
    """A staged write submitted on ``f`` ends at ``wend``: reads submitted
    after it stop there at the earliest (see :func:`file_end`)."""
    f.note_write_end(wend)
    return 0


# A one-file read of at least DIRECT_MIN bytes from a file the page cache
# mostly lacks goes to the disk with O_DIRECT (no copy through the page
# cache, requests the size of a chunk); so does every read of a file opened
# with O_DIRECT.
cdef size_t DIRECT_MIN = 16 << 20


cdef int direct_descriptor(FileCore f, hfe_span *checked, int n) except -2:
    """The ``O_DIRECT`` descriptor a read of these ranges should use, or -1
    (the file's buffered one)."""
    cdef size_t total = 0
    cdef int i
    fds = f._descriptors
    if fds is None:
        return -1
    for i in range(n):
        total += checked[i].len
    if total < DIRECT_MIN and fds.buffered is None:
        return -1     # a small read of a file not opened with O_DIRECT: no Python call
    return <int>fds.engine_direct(total >= DIRECT_MIN)


cdef int lone_range_batch(int opcode, int n, size_t total, size_t task) noexcept:
    """Read chunks per stream wait for ``n`` ranges (``total`` bytes in the
    first) at ``task`` bytes a chunk: SPLIT_WAYS for a lone read range cut
    below the default task (one stream wait, copy call and slot release
    serve its chunks), else 0 (the ring's ``engine_copy_batch``)."""
    if opcode == 0 and n == 1 and task < eng_cfg.task_size and task < total \
            and total <= <size_t>SPLIT_WAYS * task:
        return SPLIT_WAYS
    return 0


# A lone range of at most LONE_MAX bytes (submit.pyx's READ_FIRST_MAX) is cut
# into pieces of at most LONE_PIECE: read by the calling thread, each piece's
# copy runs while the next is read (an H100's lone 2 MiB read: 0.6x its floor
# in 1-2 MiB pieces, 1.0x in 256-512 KiB).
cdef size_t LONE_MAX = 4 << 20
cdef size_t LONE_PIECE = 512 << 10


cdef size_t lone_range_task(size_t total, size_t task) noexcept:
    """The task size of a lone range submitted with the default one: a chunk
    of at least SPLIT_MIN bytes per thread (up to SPLIT_WAYS) when it is less
    than one default task per thread; at most LONE_PIECE up to LONE_MAX."""
    cdef int ways = min(SPLIT_WAYS, max(eng_cfg.threads, 1))
    cdef size_t piece = task
    if total > SPLIT_MIN and total < ways * task:
        piece = max(SPLIT_MIN, ((total + ways - 1) // ways + 4095) & ~4095)
    if total <= LONE_MAX and piece > LONE_PIECE:
        piece = LONE_PIECE
    return piece


# ---- Ranges by device address: (file index, file offset, address, size) rows

ctypedef int (*mem_range_fn)(void **, size_t *, void *) noexcept nogil
cdef mem_range_fn _mem_range = NULL
cdef bint _mem_range_tried = 0
# hipMemGetAddressRange queries made by address submissions (a test hook reads it)
cdef unsigned long long _address_queries = 0


def engine_address_queries():
    """Test hook: the ``hipMemGetAddressRange`` queries of address submissions."""
    return _address_queries


cdef object _rows_array(object ranges, bint *unsigned):
    """``ranges`` as a C-contiguous int64 array of shape (N, 4), without a
    copy when it is one already (a uint64 array is viewed as int64:
    ``*unsigned`` is set, and a negative value there is 2**63 or more); a
    sequence of 4-sequences of ints (the package's integer rule: no float,
    no bool) otherwise."""
    global _numpy
    cdef Py_ssize_t i, j, n
    cdef long long[:, ::1] out
    if _numpy is None:
        import numpy
        _numpy = numpy
    if not isinstance(ranges, (list, tuple)) and (hasattr(ranges, "__array_interface__")
                                                  or hasattr(ranges, "__array__")):
        arr = _numpy.asarray(ranges)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"ranges given as an array must hold integers, got {arr.dtype}")
        if arr.ndim != 2 or arr.shape[1] != 4:
            raise ValueError("ranges must have shape (N, 4): (file index, file offset, device "
                             f"address, size) rows, got {arr.shape}")
        if arr.dtype.kind == "u" and arr.dtype.itemsize == 8:
            unsigned[0] = 1
            return _numpy.ascontiguousarray(arr).view(_numpy.int64)
        return _numpy.ascontiguousarray(arr, dtype=_numpy.int64)
    if not isinstance(ranges, (list, tuple)):
        ranges = list(ranges)
    n = len(ranges)
    arr = _numpy.empty((n, 4), dtype=_numpy.int64)
    out = arr
    names = ("file index", "file offset", "address", "size")
    for i in range(n):
        r = ranges[i]
        t = None if isinstance(r, (dict, str, bytes)) else tuple(r)
        if t is None or len(t) != 4:
            raise TypeError("each range must be a (file index, file offset, device address, "
                            f"size) row, got {type(r).__name__} {r!r} (row {i})")
        for j in range(4):
            out[i, j] = c_as_index(t[j], f"row {i}'s {names[j]}")
    return arr


cdef int _row_error(Py_ssize_t i, str what) except -1:
    raise ValueError(f"row {i}: {what}; nothing was submitted")


cdef hfe_span *parse_address_ranges(object ranges, Py_ssize_t nfiles, Py_ssize_t *count,
                                    int **fidx) except NULL:
    """Rows ``(file index, file offset, device address, size)`` checked (an
    index of one of ``nfiles`` files, offsets and sizes >= 0 and below
    2**63, no range that wraps) into spans whose buffer offset is the
    address (freed by the caller, as ``*fidx``: each row's file index).
    An array is read without a Python object per row."""
    cdef Py_ssize_t i, n
    cdef const long long[:, ::1] v
    cdef hfe_span *out = NULL
    cdef int *idx = NULL
    cdef long long fi, fo, sz
    cdef uint64_t addr
    cdef bint u = 0
    arr = _rows_array(ranges, &u)
    v = arr
    n = v.shape[0]
    if n == 0:
        raise ValueError("ranges by address need at least one (file index, file offset, "
                         "device address, size) row")
    out = <hfe_span *>malloc(n * sizeof(hfe_span))
    idx = <int *>malloc(n * sizeof(int))
    try:
        if out == NULL or idx == NULL:
            raise MemoryError()
        for i in range(n):
            fi = v[i, 0]
            fo = v[i, 1]
            addr = <uint64_t>v[i, 2]
            sz = v[i, 3]
            if fi < 0 or fi >= nfiles:
                _row_error(i, f"file index {_shown(fi, u)} names none of the {nfiles} file(s)")
            if fo < 0:
                _row_error(i, f"file offset {_shown(fo, u)} must be >= 0 and below 2**63")
            if sz < 0:
                _row_error(i, f"size {_shown(sz, u)} must be >= 0 and below 2**63")
            if fo > 0x7FFFFFFFFFFFFFFF - sz:
                _row_error(i, f"file offset {fo} + size {sz} is past 2**63")
            if addr + <uint64_t>sz < addr:
                _row_error(i, f"the address range {addr:#x} + {sz} wraps around")
            out[i].len = <uint64_t>sz
            out[i].file_offset = fo
            out[i].buffer_offset = <int64_t>addr
            idx[i] = <int>fi
    except BaseException:
        free(out)
        free(idx)
        raise
    count[0] = n
    fidx[0] = idx
    return out


cdef str _shown(long long x, bint unsigned):
    """A value of the rows as given (a uint64 array's, unsigned)."""
    return f"{<unsigned long long>x}" if unsigned else f"{x}"


cdef int _query_allocation(Py_ssize_t row, uint64_t a, uint64_t e, int device,
                           uint64_t *lo, uint64_t *hi) except -1:
    """The device allocation holding address ``a`` of row ``row`` (range
    ``[a, e)``), asked of the runtime (``hipMemGetAddressRange``, then its
    device from ``hipPointerGetAttributes``); ValueError naming the row when
    there is none, or it is not device memory of ``device``."""
    global _address_queries, _mem_range, _mem_range_tried
    cdef void *base = NULL
    cdef size_t size = 0
    cdef int err = 0
    cdef bint is_device = 0
    if not _mem_range_tried:
        load_hip_capi()
        _mem_range = <mem_range_fn>hip_fn("hipMemGetAddressRange", b"void **, size_t *, void *")
        _mem_range_tried = 1
    _address_queries += 1
    h = hipapi()
    if _mem_range != NULL:
        err = _mem_range(&base, &size, <void *>a)
        if PyErr_Occurred() != NULL:
            PyErr_Clear()
        lo[0] = <uint64_t>base
    else:
        res = h.hip.hipMemGetAddressRange(a)
        err = int(res[0])
        lo[0] = int(res[1]) if err == 0 and res[1] is not None else 0
        size = int(res[2]) if err == 0 else 0
    hi[0] = lo[0] + size
    what = f"the address range [{a:#x}, {e:#x}) ({e - a} bytes)"
    if err != 0:
        _row_error(row, f"{what} lies in no device allocation (hipMemGetAddressRange "
                        f"answered {h.error_name(err)})")
    found = f"the allocation [{lo[0]:#x}, {hi[0]:#x}) ({size} bytes)"
    if not (lo[0] <= a < hi[0]):
        _row_error(row, f"{what}: hipMemGetAddressRange answered {found}, which does not "
                        "hold its start")
    dev = pointer_device(lo[0], &is_device)
    if not is_device:
        _row_error(row, f"{what} lies in {found}, which is not device memory")
    if dev != device:
        _row_error(row, f"{what} lies in {found} of device {dev}, not of the stream's "
                        f"device {device}")
    return 0


cdef int check_allocations(hfe_span *spans, Py_ssize_t n, int device, int *allocs) except -1:
    """Every span's ``[address, address + len)`` (its buffer offset is the
    address) lies inside one device allocation of ``device``; ValueError
    naming the first row that does not, the range and the allocation
    found. ``allocs[i]``: the allocation of span i, numbered in the order
    found (0 for a span of 0 bytes, which touches no memory and is not
    checked). Each allocation is asked of the runtime once (its bounds
    kept, sorted, for this call only: memory may be freed and made again
    between calls)."""
    cdef uint64_t *lo = NULL
    cdef uint64_t *hi = NULL
    cdef uint64_t *ids = NULL
    cdef uint64_t a, e, qlo = 0, qhi = 0
    cdef Py_ssize_t i, j, k = 0, cap = 0, last = -1
    try:
        for i in range(n):
            allocs[i] = 0
            if spans[i].len == 0:
                continue
            a = <uint64_t>spans[i].buffer_offset
            e = a + spans[i].len
            if last >= 0 and lo[last] <= a < hi[last]:
                j = last
            else:
                j = _known(lo, hi, k, a)
                if j < 0:
                    _query_allocation(i, a, e, device, &qlo, &qhi)
                    if k == cap:
                        cap = cap * 2 + 16
                        lo = _grown(lo, cap)
                        hi = _grown(hi, cap)
                        ids = _grown(ids, cap)
                    j = _insert(lo, hi, ids, k, qlo, qhi)
                    k += 1
            if e > hi[j]:
                _row_error(i, f"the address range [{a:#x}, {e:#x}) ({e - a} bytes) runs past "
                              f"the end of the device allocation [{lo[j]:#x}, {hi[j]:#x}) "
                              f"({hi[j] - lo[j]} bytes) that holds its start")
            allocs[i] = <int>ids[j]
            last = j
    finally:
        free(lo)
        free(hi)
        free(ids)
    return 0


cdef uint64_t *_grown(uint64_t *p, Py_ssize_t cap) except NULL:
    """``p`` with room for ``cap`` bounds; MemoryError leaves ``p`` as it
    was (the caller frees it)."""
    cdef uint64_t *q = <uint64_t *>realloc(p, cap * sizeof(uint64_t))
    if q == NULL:
        raise MemoryError()
    return q


cdef Py_ssize_t _known(const uint64_t *lo, const uint64_t *hi, Py_ssize_t k,
                       uint64_t a) noexcept nogil:
    """The known allocation holding ``a`` (binary search), or -1."""
    cdef Py_ssize_t l = 0, r = k, m
    while l < r:                    # the first allocation starting after a
        m = (l + r) // 2
        if lo[m] <= a:
            l = m + 1
        else:
            r = m
    if l > 0 and a < hi[l - 1]:
        return l - 1
    return -1


cdef Py_ssize_t _insert(uint64_t *lo, uint64_t *hi, uint64_t *ids, Py_ssize_t k,
                        uint64_t qlo, uint64_t qhi) noexcept nogil:
    """Insert ``[qlo, qhi)``, the ``k``-th allocation found, in the sorted
    bounds (room for one more); returns its index."""
    cdef Py_ssize_t j = k
    while j > 0 and lo[j - 1] > qlo:
        lo[j] = lo[j - 1]
        hi[j] = hi[j - 1]
        ids[j] = ids[j - 1]
        j -= 1
    lo[j] = qlo
    hi[j] = qhi
    ids[j] = <uint64_t>k
    return j


cdef int plan_addresses(object ranges, list files, list file_fds, list file_ends,
                        Submission *sub) except -1:
    """A submission of ranges by device address planned into ``sub``: its
    rows parsed (:func:`parse_address_ranges`) into ``sub.spans`` (buffer
    offset: the address) and checked against the allocations of
    ``sub.device`` (:func:`check_allocations`: ``sub.allocs``); each row's
    descriptor and, for a read, its file's end (``sub.fds``, ``sub.ends``);
    for a write, each file's staged writes recorded to end where its last
    row does. The caller frees the four arrays (NULL on an error)."""
    cdef Py_ssize_t i, f, n = 0, nf = len(files)
    cdef int *fidx = NULL
    cdef hfe_span *spans = parse_address_ranges(ranges, nf, &n, &fidx)
    cdef long long *per_file = NULL     # each file's end, then where its writes end
    cdef int *file_fd = NULL
    try:
        sub.fds = <int *>malloc(n * sizeof(int))
        sub.ends = <long long *>malloc(n * sizeof(long long))
        sub.allocs = <int *>malloc(n * sizeof(int))
        per_file = <long long *>malloc(nf * sizeof(long long))
        file_fd = <int *>malloc(nf * sizeof(int))
        if (sub.fds == NULL or sub.ends == NULL or sub.allocs == NULL or per_file == NULL
                or file_fd == NULL):
            raise MemoryError()
        check_allocations(spans, n, sub.device, sub.allocs)
        for f in range(nf):
            file_fd[f] = file_fds[f]
            per_file[f] = file_ends[f]
        for i in range(n):
            sub.fds[i] = file_fd[fidx[i]]
            sub.ends[i] = per_file[fidx[i]]
        if sub.opcode == 1:
            for f in range(nf):
                per_file[f] = 0
            for i in range(n):
                if spans[i].len:
                    per_file[fidx[i]] = max(per_file[fidx[i]],
                                            spans[i].file_offset + <long long>spans[i].len)
            for f in range(nf):
                record_write_end(<FileCore>files[f], per_file[f])
    except BaseException:
        free(spans)
        free(sub.fds)
        free(sub.ends)
        free(sub.allocs)
        sub.fds = NULL
        sub.ends = NULL
        sub.allocs = NULL
        raise
    finally:
        free(fidx)
        free(per_file)
        free(file_fd)
    sub.spans = spans
    sub.n = <int>n
    return 0
