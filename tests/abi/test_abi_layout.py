"""The hipFile structures as the package declares them (``hipfile.batch._abi``).

Two independent checks: the sizes and offsets the ABI states (LP64), and the
layout a C compiler gives the active platform's header.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from _platform import PLATFORM

from hipfile._lib import _hipfile
from hipfile.batch._abi import DESCR, DRIVER_PROPS_SIZE, IO_EVENTS, IO_PARAMS

ROOT = Path(__file__).resolve().parents[2]

#: (header, include folders) of each platform built from this tree.
HEADERS = {
    "emulated": ("platforms/emulated/hipfile/hipfile_abi.h", ["platforms/emulated/include"]),
    "cuda": ("platforms/cuda/src/hipfile_abi.h", []),
}

#: C member of each dtype field.
C_MEMBERS = {
    "hipFileIOParams_t": (IO_PARAMS, {
        "mode": "mode", "buffer": "u.batch.devPtr_base", "file_offset": "u.batch.file_offset",
        "buffer_offset": "u.batch.devPtr_offset", "size": "u.batch.size", "fh": "fh",
        "opcode": "opcode", "cookie": "cookie"}),
    "hipFileIOEvents_t": (IO_EVENTS, {"cookie": "cookie", "status": "status", "ret": "ret"}),
    "hipFileDescr_t": (DESCR, {"type": "type", "fd": "handle.fd", "handle": "handle.hFile",
                               "fs_ops": "fs_ops"}),
}


def offsets(dtype: np.dtype) -> dict[str, int]:  # type: ignore[type-arg]
    assert dtype.fields is not None
    return {name: int(field[1]) for name, field in dtype.fields.items()}


def test_layouts_are_those_the_abi_states() -> None:
    assert IO_PARAMS.itemsize == 64
    assert offsets(IO_PARAMS) == {
        "mode": 0, "buffer": 8, "file_offset": 16, "buffer_offset": 24, "size": 32,
        "fh": 40, "opcode": 48, "cookie": 56,
    }
    assert IO_EVENTS.itemsize == 24
    assert offsets(IO_EVENTS) == {"cookie": 0, "status": 8, "ret": 16}
    assert DESCR.itemsize == 24
    assert offsets(DESCR) == {"type": 0, "fd": 8, "handle": 8, "fs_ops": 16}
    assert DRIVER_PROPS_SIZE == 72


def test_member_widths() -> None:
    assert IO_PARAMS["mode"].itemsize == IO_PARAMS["opcode"].itemsize == 4
    for name in ("buffer", "file_offset", "buffer_offset", "size", "fh", "cookie"):
        assert IO_PARAMS[name].itemsize == 8, name
    # ret is a size_t holding a count or a negative error: read as signed
    assert IO_EVENTS["ret"].kind == "i" and IO_EVENTS["ret"].itemsize == 8
    assert IO_EVENTS["status"].itemsize == 4


def test_dtypes_agree_with_the_shim() -> None:
    assert IO_PARAMS.itemsize == _hipfile.SIZEOF_IO_PARAMS
    assert IO_EVENTS.itemsize == _hipfile.SIZEOF_IO_EVENTS
    assert DESCR.itemsize == _hipfile.SIZEOF_DESCR
    assert DRIVER_PROPS_SIZE == _hipfile.SIZEOF_DRIVER_PROPS


def test_dtypes_match_the_platform_header(tmp_path: Path) -> None:
    """Compile the active platform's header and compare every offset."""
    if PLATFORM not in HEADERS:
        pytest.skip(f"no header of the {PLATFORM} platform in this tree")
    header, includes = HEADERS[PLATFORM]
    if not (ROOT / header).exists():
        pytest.skip("the platform sources are not next to the tests")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    lines = [f'#include "{ROOT / header}"', "#include <stdio.h>", "int main(void) {"]
    for ctype, (_, members) in C_MEMBERS.items():
        lines.append(f'printf("{ctype} sizeof %zu\\n", sizeof({ctype}));')
        for name, member in members.items():
            lines.append(f'printf("{ctype} {name} %zu\\n", offsetof({ctype}, {member}));')
    lines.append('printf("hipFileDriverProps_t sizeof %zu\\n", sizeof(hipFileDriverProps_t));')
    lines += ["return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layout"
    cmd = [cc, "-o", str(exe), str(src)] + [f"-I{ROOT / d}" for d in includes]
    subprocess.run(cmd, check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    seen = {tuple(line.split()[:2]): int(line.split()[2]) for line in out.splitlines()}
    for ctype, (dtype, members) in C_MEMBERS.items():
        assert seen[(ctype, "sizeof")] == dtype.itemsize, ctype
        for name in members:
            assert seen[(ctype, name)] == offsets(dtype)[name], (ctype, name)
    assert seen[("hipFileDriverProps_t", "sizeof")] == DRIVER_PROPS_SIZE
