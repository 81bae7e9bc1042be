"""Generate hipfile/_lib/_bindings.{pxd,pyx,pyi}, the 1:1 layer over the
hipFile C ABI, from the function declarations of hipfile/_lib/chipfile.pxd.

Each ``ctypedef RET (*<name>_t)(PARAMS) noexcept nogil`` there becomes:

* a function pointer ``p_<name>``, bound with every other one when the
  library is first used (``bind``), exported to the other compiled modules
  through ``_bindings.pxd``;
* unless the function's Python form is not 1:1 (``HAND_WRITTEN``: a struct
  to fill, a string buffer, a timeout), a Python function named in
  ``NAMES`` that calls it with the GIL released and

  - takes pointers and handles as integers, C strings as ``str``;
  - returns the parameters whose name ends in ``_out`` (after the return
    value, for a function that returns neither a ``hipFileError_t`` nor
    ``void``);
  - raises the exception of :mod:`hipfile._lib._errors` for a failed
    ``hipFileError_t``; returns ``(result, errno)`` for an ``ssize_t``.

Usage::

    python tools/gen_bindings.py            # rewrite the three files
    python tools/gen_bindings.py --check    # exit 1 if they are out of date
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / "hipfile" / "_lib"

#: Python names of the functions.
NAMES = {
    "hipFileGetVersion": "get_version",
    "hipFileGetOpErrorString": "get_op_error_string",
    "hipFileDriverOpen": "driver_open",
    "hipFileDriverClose": "driver_close",
    "hipFileUseCount": "use_count",
    "hipFileDriverSetPollMode": "driver_set_poll_mode",
    "hipFileDriverSetMaxDirectIOSize": "driver_set_max_direct_io_size",
    "hipFileDriverSetMaxCacheSize": "driver_set_max_cache_size",
    "hipFileDriverSetMaxPinnedMemSize": "driver_set_max_pinned_mem_size",
    "hipFileGetParameterSizeT": "get_parameter_size_t",
    "hipFileGetParameterBool": "get_parameter_bool",
    "hipFileSetParameterSizeT": "set_parameter_size_t",
    "hipFileSetParameterBool": "set_parameter_bool",
    "hipFileSetParameterString": "set_parameter_string",
    "hipFileHandleDeregister": "handle_deregister",
    "hipFileBufRegister": "buf_register",
    "hipFileBufDeregister": "buf_deregister",
    "hipFileRead": "read_raw",
    "hipFileWrite": "write_raw",
    "hipFileReadAsync": "read_async",
    "hipFileWriteAsync": "write_async",
    "hipFileStreamRegister": "stream_register",
    "hipFileStreamDeregister": "stream_deregister",
    "hipFileBatchIOSetUp": "batch_io_set_up",
    "hipFileBatchIOSubmit": "batch_io_submit",
    "hipFileBatchIOCancel": "batch_io_cancel",
    "hipFileBatchIODestroy": "batch_io_destroy",
    "hipFileStatsCreateContext": "stats_create_context",
    "hipFileStatsCloseContext": "stats_close_context",
    "hipFileStatsConnectToTargetProcess": "stats_connect_to_target_process",
    "hipFileStatsPollTargetProcess": "stats_poll_target_process",
    "hipFileStatsGenerateReport": "stats_generate_report",
}

#: Functions whose Python form is hand-written in _api.pyx (not 1:1).
HAND_WRITTEN = {
    "hipFileDriverGetProperties": "fills a struct (returned as a dict)",
    "hipFileGetParameterString": "fills a caller-sized string buffer",
    "hipFileHandleRegister": "takes a descriptor struct",
    "hipFileBatchIOGetStatus": "takes a timeout and an in/out count",
}

#: Default values of trailing parameters.
DEFAULTS = {
    ("hipFileBufRegister", "flags"): "0",
    ("hipFileStreamRegister", "flags"): "0",
    ("hipFileBatchIOSubmit", "flags"): "0",
}

#: Opaque handle types, passed as integers.
HANDLES = {"hipFileHandle_t", "hipStream_t", "hipFileBatchHandle_t", "hipFileStatsContext_p"}
#: Scalar types passed through as they are, and their stub types.
SCALARS = {"bint": "bool", "int": "int", "unsigned": "int", "size_t": "int", "hoff_t": "int",
           "hipFileOpError_t": "int", "int64_t": "int", "hipFileStatsError_t": "int",
           "ssize_t": "int"}

DECL = re.compile(r"^ctypedef (?P<ret>.+?)\s*\(\*(?P<name>hipFile\w+)_t\)\((?P<params>.*)\)"
                  r" noexcept nogil$")


class Param:
    def __init__(self, text: str) -> None:
        m = re.match(r"^(?P<type>.*?)(?P<name>\w+)$", text.strip())
        if m is None:
            raise SystemExit(f"cannot parse parameter {text!r}")
        self.ctype = m.group("type").strip()
        self.name = m.group("name")
        self.out = self.name.endswith("_out")
        self.pyname = self.name[:-4] if self.out else self.name

    @property
    def pointee(self) -> str:
        return self.ctype[:-1].strip()

    def is_address(self) -> bool:
        return "*" in self.ctype or self.ctype in HANDLES


class Func:
    def __init__(self, name: str, ret: str, params: str) -> None:
        self.name = name
        self.ret = ret.strip()
        self.params = [Param(p) for p in params.split(",")] if params.strip() else []
        self.pyname = NAMES.get(name)
        self.stub = ""

    @property
    def pointer(self) -> str:
        return f"p_{self.name}"


def parse(pxd: Path) -> list[Func]:
    funcs = []
    for line in pxd.read_text().splitlines():
        m = DECL.match(line)
        if m:
            funcs.append(Func(m.group("name"), m.group("ret"), m.group("params")))
    if not funcs:
        raise SystemExit(f"no function declarations found in {pxd}")
    for f in funcs:
        if f.pyname is None and f.name not in HAND_WRITTEN:
            raise SystemExit(f"{f.name}: add it to NAMES or HAND_WRITTEN")
    return funcs


HEADER = "# Code generated by tools/gen_bindings.py from chipfile.pxd. DO NOT EDIT.\n"


def gen_pxd(funcs: list[Func]) -> str:
    out = [HEADER, "# cython: language_level=3\n",
           "from hipfile._lib.chipfile cimport *\n\n",
           "# The library's functions, bound all at once on first use (NULL until\n"
           "# then, and for a function the library lacks).\n"]
    out += [f"cdef {f.name}_t {f.pointer}\n" for f in funcs]
    out.append("\ncdef void *bind(const char *name) except NULL\n")
    return "".join(out)


def _wrapper(f: Func) -> str:
    args, stub_args, call, pre, outs, stub_outs = [], [], [], [], [], []
    for p in f.params:
        if p.out:
            zero = "NULL" if p.pointee in HANDLES or "*" in p.pointee else "0"
            pre.append(f"    cdef {p.pointee} {p.pyname} = {zero}\n")
            call.append(f"&{p.pyname}")
            if p.pointee in HANDLES or "*" in p.pointee:
                outs.append(f"<uintptr_t>{p.pyname}")
            elif p.pointee == "bint":
                outs.append(f"bool({p.pyname})")
            else:
                outs.append(p.pyname)
            stub_outs.append(SCALARS.get(p.pointee, "int"))
            continue
        default = DEFAULTS.get((f.name, p.name))
        suffix = f"={default}" if default is not None else ""
        stub_suffix = " = ..." if default is not None else ""
        if p.ctype == "const char *":
            args.append(f"str {p.name}{suffix}")
            stub_args.append(f"{p.name}: str{stub_suffix}")
            pre.append(f"    cdef bytes {p.name}_b = {p.name}.encode()\n"
                       f"    if b\"\\0\" in {p.name}_b:\n"
                       f"        raise ValueError(\"{p.name} must not contain NUL characters\")\n"
                       f"    cdef const char *{p.name}_c = {p.name}_b\n")
            call.append(f"{p.name}_c")
        elif p.is_address():
            args.append(f"uintptr_t {p.name}{suffix}")
            stub_args.append(f"{p.name}: int{stub_suffix}")
            call.append(f"<{p.ctype}>{p.name}")
        else:
            args.append(f"{p.ctype} {p.name}{suffix}")
            stub_args.append(f"{p.name}: {SCALARS[p.ctype]}{stub_suffix}")
            call.append(p.name)
    c_call = f"{f.pointer}({', '.join(call)})"
    body = [f"def {f.pyname}({', '.join(args)}):\n"]
    ret_stub: list[str] = []
    doc = f"Wraps ``{f.name}``."
    if f.ret == "hipFileError_t":
        if not outs:
            doc += " Raises the exception of its status."
        body_call = f"        check_status({c_call}, b\"{f.name}\")\n"
        result: list[str] = []
    elif f.ret == "void":
        body_call = f"        {c_call}\n"
        result = []
    elif f.ret == "ssize_t":
        doc += " Returns ``(result, errno)`` and never raises for the result."
        pre.append("    cdef ssize_t r\n    cdef int err = 0\n")
        body_call = ("        libc.errno.errno = 0\n"
                     f"        r = {c_call}\n"
                     "        if r < 0:\n"
                     "            err = libc.errno.errno\n")
        result = ["r", "err"]
        ret_stub = ["int", "int"]
    elif f.ret == "const char *":
        doc += " Returns None where it answers NULL."
        pre.append("    cdef const char *r\n")
        body_call = f"        r = {c_call}\n"
        result = []
    else:
        pre.append(f"    cdef {f.ret} r\n")
        body_call = f"        r = {c_call}\n"
        result = ["r"]
        ret_stub = [SCALARS[f.ret]]
    body.append(f"    \"\"\"{doc}\"\"\"\n")
    body += pre
    body.append(f"    if {f.pointer} == NULL:\n        bind(b\"{f.name}\")\n")
    body.append("    with nogil:\n")
    body.append(body_call)
    values = result + outs
    stub_types = ret_stub + stub_outs
    if f.ret == "const char *":
        body.append("    return None if r == NULL else r.decode(errors=\"replace\")\n")
        stub_ret = "str | None"
    elif len(values) == 1:
        body.append(f"    return {values[0]}\n")
        stub_ret = stub_types[0]
    elif values:
        body.append(f"    return ({', '.join(values)})\n")
        stub_ret = f"tuple[{', '.join(stub_types)}]"
    else:
        stub_ret = "None"
    f.stub = f"def {f.pyname}({', '.join(stub_args)}) -> {stub_ret}: ...\n"
    if len(f.stub) > 100:
        lines, line = [], "   "
        for arg in stub_args:
            if len(line) + len(arg) + 2 > 100:
                lines.append(line)
                line = "   "
            line += f" {arg},"
        inner = "\n".join([*lines, line])
        f.stub = f"def {f.pyname}(\n{inner}\n) -> {stub_ret}: ...\n"
    return "".join(body)


#: What the generated module imports: (module, cimport?, names).
IMPORTS = [
    ("libc.errno", True, None),
    ("libc.stdint", True, "int64_t, uintptr_t"),
    ("posix.dlfcn", True, "dlsym"),
    ("hipfile._lib", True, "_loader"),
    ("hipfile._lib._loader", True, "check_status"),
    ("hipfile._lib", False, "_errors"),
    ("hipfile._lib._loader", False, "library_loaded"),
]


def _prelude() -> str:
    out = ["# cython: language_level=3, boundscheck=False, wraparound=False\n",
           '"""The 1:1 layer over the hipFile C ABI (see tools/gen_bindings.py)."""\n\n']
    for module, c, names in IMPORTS:
        verb = "cimport" if c else "import"
        out.append(f"{verb} {module}\n" if names is None else f"from {module} {verb} {names}\n")
    out.append("\ncdef bint _bound = 0\n\n\ncdef int _bind_all() except -1:\n    global _bound\n")
    return "".join(out)




def gen_pyx(funcs: list[Func]) -> str:
    out = [HEADER, _prelude()]
    out.append("    global " + ", ".join(f.pointer for f in funcs) + "\n")
    out.append("    with _loader.lock:\n        if _bound:\n            return 0\n"
               "        lib = _loader.handle()\n")
    for f in funcs:
        out.append(f"        {f.pointer} = <{f.name}_t>dlsym(lib, b\"{f.name}\")\n")
    out.append("        _bound = 1\n    return 0\n")
    out.append('''

cdef void *bind(const char *name) except NULL:
    """Bind every function (loading the library); return ``name``'s address."""
    _bind_all()
    return _loader.symbol(name)

''')
    for f in funcs:
        if f.pyname is None:
            continue
        out.append("\n" + _wrapper(f) + "\n")
    out.append("\n# What the exceptions need of the library (they sit below this module).\n"
               "_errors._library_queries = (library_loaded, get_op_error_string, get_version)\n")
    return "".join(out)


def gen_pyi(funcs: list[Func]) -> str:
    out = [HEADER, '"""The 1:1 layer over the hipFile C ABI."""\n\n']
    for f in funcs:
        if f.pyname is not None:
            out.append(f.stub)
    return "".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="only check that the files are up to date (exit 1 if not)")
    args = ap.parse_args()
    funcs = parse(LIB / "chipfile.pxd")
    texts = {"_bindings.pxd": gen_pxd(funcs), "_bindings.pyx": gen_pyx(funcs),
             "_bindings.pyi": gen_pyi(funcs)}
    stale = []
    for name, text in texts.items():
        path = LIB / name
        if path.exists() and path.read_text() == text:
            continue
        stale.append(name)
        if not args.check:
            path.write_text(text)
    if args.check and stale:
        print("out of date (run python tools/gen_bindings.py): " + ", ".join(stale),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
