# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The stream-ordered parallel engine's submissions:
FileHandle.pread_async/pwrite_async and their _ranges, scatter and gather
forms, and the many-file operation. Each entry point checks its arguments,
has plan.pyx plan the submission and carries it out: the staged path hands
the plan to the engine's C side, the worker path makes operations of
hipFile calls (see ops.pyx for the invariants)."""

import os

from hipfile._lib._errors import ClosedFileError

from cpython.ref cimport PyObject
from libc.stdint cimport uint32_t, uintptr_t
from libc.stdlib cimport free, malloc

from hipfile._lib.chipfile cimport hoff_t
from hipfile._lib._bindings cimport bind, p_hipFileRead, p_hipFileWrite
from hipfile._lib._core cimport (
    BufferCore, FileCore, c_as_positive, check_file, ensure_registered, io_range, stream_preamble,
    submit_preamble)
from hipfile._lib._runtime cimport (
    HIP_ERROR_NOT_READY, HIP_SUCCESS, current_device, pointer_device, stream_device, stream_fail,
    stream_query)
from hipfile._lib._wait cimport WAIT_STREAM, wait_interruptible
from hipfile._lib.engine.cengine cimport eng, hfe_io_fn, hfe_op, hfe_runtime, hfe_span
from hipfile._lib.engine.device cimport (
    Flag, FlagPool, destroy_event_handle, device_arg, eng_settings_ok, eng_runtime, eng_cfg,
    internal_stream, pool_for, record_gate_event, staged_path, stream_after, wait_value32,
    write_value32)
from hipfile._lib.engine.handle cimport GateRef, StreamIOHandle, new_handle
from hipfile._lib.engine.ops cimport Ring, eng_start, eng_sweep, ring_for
from hipfile._lib.engine.plan cimport (
    StagedPlan, Submission, closed_entry, enter_files, entry_files, lone_range_batch,
    lone_range_task, new_submission, parse_ranges, plan_addresses, plan_staged, record_write_end)


cdef void *_get_io(int opcode) except NULL:
    if opcode == 0:
        return <void *>p_hipFileRead if p_hipFileRead != NULL else bind(b"hipFileRead")
    return <void *>p_hipFileWrite if p_hipFileWrite != NULL else bind(b"hipFileWrite")


# Lone reads (one operation, its stream idle) the page cache holds are read
# by the submitting thread, chunk by chunk, each chunk's copy enqueued as its
# bytes arrive (one preadv and one copy, overlapped): up to INLINE_MAX bytes
# for a read ahead (ordered=False, no prefetch: it returns at once), up to
# READ_FIRST_MAX for reads the caller waits for (its stream, or pread's
# prefetch). Not cached, a read of at most READ_FIRST_MAX is read by idle
# workers before its copies are enqueued (the submitter waits at most 1 ms),
# so that the copies wait on no flag in host memory.
cdef size_t INLINE_MAX = 256 << 10
cdef size_t READ_FIRST_MAX = 4 << 20
cdef bint READ_HERE = 1


def engine_read_here(on=None):
    """Test and benchmark hook: whether the submitting thread reads lone
    reads up to ``READ_FIRST_MAX`` (else ``INLINE_MAX``); returns the setting
    before the call, set to ``on`` when given."""
    global READ_HERE
    cdef bint before = READ_HERE
    if on is not None:
        READ_HERE = bool(on)
    return before


def engine_read_first_max(n=None):
    """Test and benchmark hook: the largest lone read read before its copies
    are enqueued (bytes; 0: none), set to ``n`` when given; returns the bound
    before the call. :class:`ValueError` for a negative ``n``."""
    global READ_FIRST_MAX
    cdef size_t before = READ_FIRST_MAX
    if n is not None:
        if n < 0:
            raise ValueError(f"read-first bound must be >= 0 bytes, not {n}")
        READ_FIRST_MAX = <size_t>n
    return before


def engine_submit(FileCore f, buffer, ranges, stream=0, *, bint write=False, task_size=None,
                  int fd=-1, bint ordered=True, bint grouped=False, bint prefetch=False):
    """Submit stream-ordered ranges ``(size, file_offset, buffer_offset)`` of
    ``buffer`` to the engine; returns one :class:`StreamIOHandle` per range
    (``grouped``: one for all of them). ``ranges`` is an iterable of tuples
    (a size of None: the rest of the buffer), or an integer array of shape
    (N, 3), which is read without a Python object per range.

    The ranges start together once ``stream`` passes the submit point
    (``prefetch``: a read on the staging path reads the file at once, and
    only its copies into ``buffer`` wait for ``stream``; on the worker path
    hipFile writes into ``buffer`` itself, so there a prefetch starts with
    the stream, as any read). ``write``: a write, else a read. With
    ``fd`` (a POSIX descriptor of the file) and stream waits on the buffer's
    device, the bytes move through the device's staging ring and the copies
    to or from device memory are enqueued on ``stream`` (``ordered``) or on
    the device's own stream; otherwise worker threads call
    ``hipFileRead``/``hipFileWrite``.

    Raises
    ------
    TypeError, ValueError
        A bad buffer, stream, range or task size (nothing is submitted).
    ClosedFileError, HandleNotRegisteredError
        The file is closed, or its registration was dropped.
    HipRuntimeError
        The runtime refused a stream operation of the submission.
    """
    cdef int opcode = 1 if write else 0
    cdef uintptr_t base, sh
    cdef size_t length, task
    cdef BufferCore bc = None
    cdef object buf_owner, stream_owner = None
    cdef int n
    cdef PyObject *state = NULL

    cdef Py_ssize_t count = 0
    cdef hfe_span *checked = NULL
    cdef Submission sub
    buf_owner = submit_preamble(f, buffer, stream, &base, &length, &sh, &state)
    try:   # counted in f._entering by the preamble until the handles hold the file
        if isinstance(buffer, BufferCore):
            bc = <BufferCore>buffer
        if stream is not None and type(stream) is not int:
            stream_owner = stream
        eng_settings_ok()
        if task_size is None:
            task = eng_cfg.task_size
        else:
            task = <size_t>c_as_positive(task_size, "task_size")
        checked = parse_ranges(ranges, length, &count)
        n = <int>count
        if n == 0:
            return []
        if write:
            # a read-only handle: the one error of every write path, after
            # the arguments' checks and before any byte moves
            if f._descriptors is not None:
                f._descriptors.refuse_read_only()
        if task_size is None and n == 1:
            task = lone_range_task(checked[0].len, task)
        sub = new_submission(opcode, fd, base, sh)
        sub.spans = checked
        sub.n = n
        sub.task = task
        sub.ordered = ordered
        sub.grouped = grouped
        sub.prefetch = prefetch
        return _submit_checked(f, &sub, bc, buf_owner, stream_owner)
    finally:
        free(checked)
        f.add_entering(-1)


def engine_transfer(FileCore f, buffer, size, file_offset, buffer_offset, *,
                    bint write=False, task_size=None, int fd=-1):
    """One range of device memory moved on the engine's threads:
    :func:`hipfile.pread`/:func:`hipfile.pwrite` of device memory. The
    file side starts at once (no gate); on the staged path the copies go to
    the device's own stream after the null stream's work so far (as
    hipFile's own copies through the null stream), and hipFile's own calls
    start at once. Returns the range's
    :class:`StreamIOHandle`, watched: once the range has ended, the next
    sweep (any submission, a close) releases the file and buffer even if
    nobody looks. Returns None, with nothing submitted, when ``buffer`` is
    not device memory (hipFile's own calls, which the caller then makes,
    take pinned host memory too).

    Raises
    ------
    TypeError, ValueError
        A bad buffer, range or task size (nothing is submitted).
    ClosedFileError, HandleNotRegisteredError
        The file is closed, or its registration was dropped.
    """
    cdef int opcode = 1 if write else 0
    cdef uintptr_t base, sh
    cdef size_t length, task
    cdef BufferCore bc = None
    cdef object buf_owner
    cdef PyObject *state = NULL
    cdef hfe_span span
    cdef int device
    cdef bint is_device = 0
    cdef FlagPool pool
    cdef StreamIOHandle hd
    cdef Submission sub
    buf_owner = submit_preamble(f, buffer, 0, &base, &length, &sh, &state)
    try:   # counted in f._entering by the preamble until the handle holds the file
        if isinstance(buffer, BufferCore):
            bc = <BufferCore>buffer
        eng_settings_ok()
        io_range(length, size, file_offset, buffer_offset, <size_t *>&span.len,
                 <hoff_t *>&span.file_offset, <hoff_t *>&span.buffer_offset)
        if task_size is None:
            task = lone_range_task(span.len, eng_cfg.task_size)
        else:
            task = <size_t>c_as_positive(task_size, "task_size")
        pool = _engine_for(base, bc, &device, &is_device)
        if not is_device:
            return None
        sub = new_submission(opcode, fd, base, 0)
        sub.spans = &span
        sub.n = 1
        sub.device = device
        sub.task = task
        sub.ordered = False
        if staged_path(fd, pool, is_device):
            # the file side at once (a prefetch); the copies on the device's
            # own stream, after the work enqueued on the null stream so far
            # (hipFileRead/hipFileWrite's own copies go through the null
            # stream: a buffer a kernel there still writes or reads is
            # copied after it, as before)
            sh = 0
            if current_device() != device:
                # the buffer's device's null stream, made current for the order
                sh = <uintptr_t>int(internal_stream(pool))
                stream_after(sh, 0, device)
            sub.stream = sh
            sub.prefetch = True
            handles = _submit_staged(f, &sub, pool)
        else:
            sub.gated = False       # at once, ordered after no stream
            handles = _submit_workers(f, &sub, pool)
        _hand_over(handles, f, bc, buf_owner, None)
        hd = <StreamIOHandle>handles[0]
        hd.watch()
        return hd
    finally:
        f.add_entering(-1)


cdef int _record_write_ends(list files, list idx, hfe_span *checked, int n) except -1:
    """A many-file write: each file's staged writes end where its last
    range does (see :func:`plan.record_write_end`)."""
    cdef int i
    wends = [0] * len(files)
    for i in range(n):
        if checked[i].len:
            wends[idx[i]] = max(wends[idx[i]], checked[i].file_offset + <long long>checked[i].len)
    for i in range(len(files)):
        record_write_end(<FileCore>files[i], wends[i])
    return 0


cdef int _entry_ranges(object entries, list idx, list file_fds, list file_ends, size_t length,
                       hfe_span *checked, int *fds, long long *ends) except -1:
    """Each entry's range checked against the buffer (the one range check),
    with its file's descriptor and end."""
    cdef Py_ssize_t i
    for i in range(len(entries)):
        t = tuple(entries[i])
        io_range(length, t[1], t[2], t[3], <size_t *>&checked[i].len,
                 <hoff_t *>&checked[i].file_offset, <hoff_t *>&checked[i].buffer_offset)
        fds[i] = file_fds[idx[i]]
        ends[i] = file_ends[idx[i]]
    return 0


cdef tuple _scatter_entries(object entries, int opcode):
    """``(entries as a sequence, their files, each entry's file index)``; ValueError if none."""
    if not isinstance(entries, (list, tuple)):
        entries = list(entries)
    if len(entries) == 0:
        raise ValueError(("pread_async_scatter" if opcode == 0 else "pwrite_async_gather")
                         + " needs at least one range")
    files, idx = entry_files(entries)
    return entries, files, idx


def engine_submit_files(buffer, entries, stream=0, *, bint write=False, task_size=None,
                        bint ordered=True, bint prefetch=False):
    """Submit ``(file, size, file_offset, buffer_offset)`` entries (ranges of
    several open files, one buffer) to the staged path as one operation;
    returns its one :class:`StreamIOHandle`, which holds every file until
    completion is observed. Each file and range is checked before anything
    is submitted; a read stops at each file's end. Raises as
    :func:`hipfile.pread_async_scatter` says (TypeError, ValueError,
    ClosedFileError, HandleNotRegisteredError, OSError, NotImplementedError)."""
    cdef uintptr_t base, sh
    cdef size_t length, task
    cdef BufferCore bc = None
    cdef object buf_owner, stream_owner = None
    cdef PyObject *state = NULL
    cdef Py_ssize_t n
    cdef hfe_span *checked = NULL
    cdef int *fds = NULL
    cdef long long *ends = NULL
    cdef int device
    cdef bint is_device = 0
    cdef FlagPool pool
    cdef int opcode = 1 if write else 0
    cdef Submission sub
    entries, files, idx = _scatter_entries(entries, opcode)
    n = len(entries)
    try:
        buf_owner = submit_preamble(<FileCore>files[0], buffer, stream, &base, &length, &sh,
                                    &state)
    except ClosedFileError as exc:
        raise closed_entry(exc, files, idx) from None
    entered = [files[0]]   # counted in _entering until the handle holds them
    try:
        bc = <BufferCore>buffer if isinstance(buffer, BufferCore) else None
        stream_owner = stream if stream is not None and type(stream) is not int else None
        eng_settings_ok()
        task = eng_cfg.task_size if task_size is None else <size_t>c_as_positive(task_size,
                                                                                 "task_size")
        try:
            file_fds, file_ends = enter_files(files, opcode, entered, "pwrite_async_gather")
        except ClosedFileError as exc:
            raise closed_entry(exc, files, idx) from None
        checked = <hfe_span *>malloc(n * sizeof(hfe_span))
        fds = <int *>malloc(n * sizeof(int))
        ends = <long long *>malloc(n * sizeof(long long))
        try:
            if checked == NULL or fds == NULL or ends == NULL:
                raise MemoryError()
            _entry_ranges(entries, idx, file_fds, file_ends, length, checked, fds, ends)
            pool = _engine_for(base, bc, &device, &is_device)
            if not staged_path(fds[0], pool, is_device):
                raise NotImplementedError(
                    "a many-file operation needs the staging path (device memory on a device "
                    "with stream waits, and the engine_data_path setting 'auto')")
            if opcode == 1:
                _record_write_ends(files, idx, checked, <int>n)
            sub = new_submission(opcode, fds[0], base, sh)
            sub.spans = checked
            sub.n = <int>n
            sub.device = device
            sub.task = task
            sub.ordered = ordered
            sub.grouped = True
            sub.prefetch = prefetch
            sub.fds = fds
            sub.ends = ends
            handles = _submit_staged(<FileCore>files[0], &sub, pool)
        finally:
            free(checked)
            free(fds)
            free(ends)
        _hand_over(handles, tuple(files) if len(files) > 1 else files[0], bc, buf_owner,
                   stream_owner)
        return handles[0]
    finally:
        for fo in entered:
            (<FileCore>fo).add_entering(-1)


def engine_submit_addresses(files, ranges, stream=0, *, bint write=False, task_size=None,
                            bint ordered=True, bint prefetch=False):
    """Submit ``(file index, file offset, device address, size)`` rows over
    the open ``files`` to the staged path as one operation; returns its one
    :class:`StreamIOHandle`, which holds every file until completion is
    observed. Everything, each address range against its allocation too, is
    checked before anything is submitted (:func:`plan.plan_addresses`); the
    spans are planned with buffer base 0 and the addresses as offsets.
    Raises as :func:`hipfile.pread_async_addresses` says.
    """
    cdef uintptr_t sh
    cdef size_t task
    cdef PyObject *state = NULL
    cdef Py_ssize_t nf
    cdef int opcode = 1 if write else 0
    cdef FlagPool pool
    cdef FileCore f0
    cdef Submission sub
    files = _address_files(files)
    nf = len(files)
    stream_owner = stream if stream is not None and type(stream) is not int else None
    stream_preamble(stream, &sh, &state)
    f0 = <FileCore>files[0]
    check_file(f0)
    f0.add_entering(1)              # with the check: a close waits for it or refuses it
    entered = [f0]                  # counted in _entering until the handle holds them
    try:
        eng_settings_ok()
        task = eng_cfg.task_size if task_size is None else <size_t>c_as_positive(task_size,
                                                                                 "task_size")
        file_fds, file_ends = enter_files(files, opcode, entered, "pwrite_async_addresses")
        sub = new_submission(opcode, -1, 0, sh)
        sub.device = stream_device(sh)
        sub.task = task
        sub.ordered = ordered
        sub.grouped = True
        sub.prefetch = prefetch
        eng_sweep()
        eng_start()
        pool = pool_for(sub.device)
        if not staged_path(file_fds[0], pool, 1):
            raise NotImplementedError(
                "ranges by address need the staging path (a device with stream waits, and "
                "the engine_data_path setting 'auto')")
        try:
            plan_addresses(ranges, files, file_fds, file_ends, &sub)
            sub.fd = sub.fds[0]
            handles = _submit_staged(f0, &sub, pool)
        finally:
            free(sub.spans)
            free(sub.fds)
            free(sub.ends)
            free(sub.allocs)
        _hand_over(handles, tuple(files) if nf > 1 else f0, None, None, stream_owner)
        return handles[0]
    finally:
        for fo in entered:
            (<FileCore>fo).add_entering(-1)


cdef list _address_files(object files):
    """The files of a submission by address, as a list of FileHandles (one
    at least; each checked again by :func:`plan.enter_files`)."""
    if isinstance(files, FileCore):
        raise TypeError("files must be a sequence of open hipfile.FileHandle objects (one "
                        "file: a list of one)")
    files = list(files)
    if not files:
        raise ValueError("ranges by address need at least one file")
    for fo in files:
        if not isinstance(fo, FileCore):
            raise TypeError(f"files must be open hipfile.FileHandle objects, not "
                            f"{type(fo).__name__}")
    return files


cdef list _submit_checked(FileCore f, Submission *sub, BufferCore bc, object buf_owner,
                          object stream_owner):
    """Carry out ``sub`` (its device found here) on the staged or worker path."""
    cdef bint is_device = 0, staged
    cdef FlagPool pool = _engine_for(sub.base, bc, &sub.device, &is_device)
    staged = staged_path(sub.fd, pool, is_device)
    if staged:
        handles = _submit_staged(f, sub, pool)
    else:
        handles = _submit_workers(f, sub, pool)
    # submitted: the handles now hold the file, buffer and stream (before any
    # wait below, which may raise the operation's error: they still own it)
    _hand_over(handles, f, bc, buf_owner, stream_owner)
    if not staged and sub.ordered and handles:
        _order_after(handles, sub.stream)
    return handles


cdef FlagPool _engine_for(uintptr_t base, BufferCore bc, int *device, bint *is_device):
    """The engine started (parked handles swept) and the flag pool of the
    buffer's device; ``device`` and ``is_device`` from one pointer query
    (a registered Buffer keeps the device it found first)."""
    eng_sweep()
    eng_start()
    device[0] = pointer_device(base, is_device)
    if bc is not None:
        device[0] = bc.engine_device(device[0])
    return pool_for(device[0])


cdef int _order_after(list handles, uintptr_t sh) except -1:
    """Order later work on ``sh`` after every handle (the default order of
    the worker path): stream waits on their flags, or, without stream waits,
    a wait on the host."""
    for o in handles:
        (<StreamIOHandle>o)._release_to(sh)
    return 0


cdef list _submit_staged(FileCore f, Submission *sub, FlagPool pool):
    """The staged path: plan (:func:`plan_staged`), gate
    (:func:`_staged_gate`), hand the chunks to the engine and enqueue the
    stream's side (``hfe_stage_submit`` with ``sub.staged``). ``sub.fds``/
    ``sub.ends`` (a many-file submission, else NULL): each range's
    descriptor and, for a read, the end of its file (the caller then keeps
    the files' write ends itself). A one-file read goes through the file's
    ``O_DIRECT`` descriptor (``sub.fd`` for what that refuses) where
    ``direct_descriptor`` says so."""
    cdef Ring ring = ring_for(sub.device)
    cdef StagedPlan plan = plan_staged(f, sub, pool)
    cdef int opcode = sub.opcode
    cdef uintptr_t sh = sub.stream
    cdef bint ordered = sub.ordered, prefetch = sub.prefetch
    cdef Flag gflag = None
    cdef const uint32_t *gate = NULL
    cdef uint32_t gvalue = 0
    cdef uintptr_t target = sh
    cdef hfe_runtime rt
    cdef StreamIOHandle hd
    cdef int rc = 0
    cdef bint idle = 0
    cdef int batch = lone_range_batch(opcode, sub.n, sub.spans[0].len if sub.n else 0, sub.task)
    cdef size_t lone_max = max(INLINE_MAX, READ_FIRST_MAX if READ_HERE and (ordered or prefetch) else 0)
    try:
        if opcode == 0:
            gflag = _staged_gate(sh, prefetch, &idle)
            if gflag is not None:
                gate = gflag.ptr
                gvalue = gflag.value
        if not ordered:
            target = <uintptr_t>int(internal_stream(pool))
            # the engine's stream after the caller's work so far: nothing to
            # wait for when the caller's stream was found idle
            if target != sh and not (idle or stream_query(sh) == HIP_SUCCESS):
                stream_after(target, sh, sub.device)
        sub.staged.stream = <void *>target
        sub.staged.gate = gate
        sub.staged.gate_value = gvalue
        sub.staged.inline_max = lone_max
        sub.staged.read_first = READ_FIRST_MAX if ordered or prefetch else 0
        sub.staged.copy_batch = batch
        eng_runtime(&rt)     # the table with the settings in effect now, the engine's copy
        with nogil:
            rc = eng.stage_submit(ring.ring, &rt, &sub.staged)
        if rc < 0:
            raise OSError(-rc, f"the stream engine refused the submission: {os.strerror(-rc)}")
    except BaseException:
        plan.abandon()
        if gflag is not None and rc == 0:
            gflag.pool.free.append(gflag)
        raise
    handles = plan.handles
    _share_gate(handles, gflag, 1)
    if rc > 0:
        # the runtime refused a stream operation part way: what was enqueued
        # runs; the handles report the failure and are parked until done
        _submitted_anyway(f, handles)
        stream_fail(rc, "the stream-engine submission", sh)
    if opcode == 1 and ordered:
        # later work on the stream sees the file written, as after write_async
        # (a read of the same bytes submitted next starts after it)
        for o in handles:
            hd = <StreamIOHandle>o
            wait_value32(sh, hd._flag.devptr, hd._value)
    return handles


cdef int _hand_over(list handles, object files, BufferCore bc, object buf_owner,
                    object stream_owner) except -1:
    """The submitted handles hold the file(s) (one, or a tuple of them),
    buffer and stream until their completion is observed."""
    cdef Py_ssize_t ng = len(handles)
    for o in (files if type(files) is tuple else (files,)):
        (<FileCore>o).add_held(ng)
    if bc is not None:
        bc.add_held(ng)
    for o in handles:
        (<StreamIOHandle>o).hand_over(files, bc, buf_owner, stream_owner)
    return 0


cdef int _submitted_anyway(FileCore f, list handles) except -1:
    for o in handles:
        f.add_held(1)
        (<StreamIOHandle>o).hand_over(f, None, None, None)
    return 0


cdef Flag _write_gate(FlagPool spool, uintptr_t sh, int *qerr):
    """A flag of ``spool`` that ``sh`` writes at this point of the stream
    (its value is ``flag.value``), or None when the write could not be
    enqueued (``qerr``: the error; the flag went back)."""
    cdef Flag gflag = spool.take()
    qerr[0] = write_value32(sh, gflag.devptr, gflag.next_value())
    if qerr[0] != HIP_SUCCESS:
        spool.free.append(gflag)
        return None
    return gflag


cdef Flag _staged_gate(uintptr_t sh, bint prefetch, bint *idle):
    """The gate of a staged read: its file I/O starts once the caller's
    stream has passed this point, a flag the stream writes. A stream found
    idle needs none (what it ran before, the writes of this engine
    included, is done; the copies are enqueued behind anything enqueued
    meanwhile; ``idle`` says so); a prefetch reads at once (its copies
    still wait for the stream). Returns the flag, or None."""
    cdef FlagPool spool = pool_for(stream_device(sh))
    cdef Flag gflag
    cdef int qerr
    if not spool.memops:
        raise ValueError("the stream's device cannot use stream waits: "
                         "the buffer and the stream must be on one device")
    if prefetch:
        return None
    if stream_query(sh) == HIP_SUCCESS:
        idle[0] = 1
        return None
    gflag = _write_gate(spool, sh, &qerr)
    if gflag is None:
        stream_fail(qerr, "hipStreamWriteValue32", sh)
    return gflag


cdef Flag _gate_workers(hfe_op **ops, int m, uintptr_t sh):
    """Hand the worker path's operations to the engine behind the caller's
    stream: at once when the stream is idle, else gated on a flag the
    stream writes, or on an event a gate thread polls, or (neither) after
    an interruptible wait here. Returns the gate flag, or None."""
    cdef int sdev, rc = -1
    cdef int qerr = stream_query(sh)
    cdef FlagPool spool
    cdef Flag gflag = None
    cdef uintptr_t gate_event
    if qerr == HIP_SUCCESS:
        rc = eng.submit(ops, m, NULL, 0, NULL)
    elif qerr != HIP_ERROR_NOT_READY:
        stream_fail(qerr, "hipStreamQuery", sh)
    else:
        sdev = stream_device(sh)
        spool = pool_for(sdev)
        if spool.memops:
            gflag = _write_gate(spool, sh, &qerr)
            if gflag is not None:
                rc = eng.submit(ops, m, gflag.ptr, gflag.value, NULL)
        if rc == -1:
            # an event the gate thread polls (no host function)
            gate_event = record_gate_event(sh, sdev)
            if gate_event:
                rc = eng.submit(ops, m, NULL, 0, <void *>gate_event)
                if rc:
                    destroy_event_handle(gate_event)
            else:
                # no event: wait here (interruptibly) for the stream
                qerr = wait_interruptible(WAIT_STREAM, sh, -1.0)
                if qerr != HIP_SUCCESS:
                    stream_fail(qerr, "hipStreamQuery", sh)
                rc = eng.submit(ops, m, NULL, 0, NULL)
    if rc:
        if gflag is not None:
            gflag.pool.free.append(gflag)
        raise OSError(rc, f"the stream engine refused the submission: {os.strerror(rc)}")
    return gflag


cdef list _submit_workers(FileCore f, Submission *sub, FlagPool pool):
    """The worker path: each range's chunks run as hipFileRead/hipFileWrite
    calls on the engine's threads (no staging ring: no POSIX descriptor, no
    stream waits, or the ``engine_data_path`` setting ``"hipfile"``). A
    grouped submission is one operation whose chunks walk its ranges. Not
    ``sub.gated``: they start at once, ordered after no stream."""
    cdef hfe_span *checked = sub.spans
    cdef int i, rc, n = sub.n, opcode = sub.opcode
    cdef bint grouped = sub.grouped
    cdef hfe_io_fn fn = <hfe_io_fn>_get_io(opcode)
    cdef hfe_op **ops = NULL
    cdef Flag gflag = None
    cdef StreamIOHandle hd
    cdef int m = 1 if grouped else n     # operations: a group is one, over its ranges
    ensure_registered(f)                # hipFile's own calls move the bytes
    ops = <hfe_op **>malloc(m * sizeof(hfe_op *))
    if ops == NULL:
        raise MemoryError()
    handles = []
    try:
        for i in range(m):
            hd = new_handle(opcode, &checked[i], sub.device, sub.stream, pool,
                            n if grouped else 1)
            handles.append(hd)          # abandoned below on an error
            hd.make_op(sub.task, fn, <void *>f._fh, <void *>sub.base)
            if grouped:
                hd.set_spans(checked, n)
            ops[i] = hd._op

        if sub.gated:
            gflag = _gate_workers(ops, m, sub.stream)
        else:
            rc = eng.submit(ops, m, NULL, 0, NULL)
            if rc:
                raise OSError(rc, f"the stream engine refused the submission: "
                                  f"{os.strerror(rc)}")
    except BaseException:
        for o in handles:
            (<StreamIOHandle>o)._abandon()
        raise
    finally:
        free(ops)
    _share_gate(handles, gflag, 0)
    return handles


cdef int _share_gate(list handles, Flag gflag, bint staged) except -1:
    """Give the submission's handles its gate flag (returned to its pool
    once none of them needs it) and say which path moves their bytes."""
    cdef GateRef gate_ref = None
    if gflag is not None:
        gate_ref = GateRef.__new__(GateRef)
        gate_ref.flag = gflag
    for o in handles:
        (<StreamIOHandle>o).set_gate(gate_ref, staged)
    return 0


def engine_prepare(device=-1):
    """hipfile.engine.prepare: a device's flags, internal stream and staging
    ring, made now (what is there already is kept). TypeError for a
    non-int device, ValueError for no such device."""
    cdef int dev = device_arg(device)
    eng_start()
    cdef FlagPool pool = pool_for(dev)
    if pool.nflags == 0:
        pool._grow()
    internal_stream(pool)
    if staged_path(0, pool, 1):
        ring_for(dev)
    return None
