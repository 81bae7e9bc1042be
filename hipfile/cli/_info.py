"""The ``info`` command of ``hipfile``: the platform, the library, the devices and the
file systems of the given folders."""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import errno
import json
import mmap
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from hipfile.file._mounts import mount_of

# -- shared helpers ---------------------------------------------------------------------------


def _human(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def _platform() -> tuple[str, bool]:
    """(name, is a test platform)."""
    from hipfile import platforms

    name = platforms.active()
    if name is None:
        return "rocm", False
    return name, name != "rocm"



# -- info -------------------------------------------------------------------------------------

#: statfs f_type magic numbers (linux/magic.h and file system sources).
FS_MAGIC: dict[int, str] = {
    0xEF53: "ext2/3/4",
    0x58465342: "xfs",
    0x9123683E: "btrfs",
    0x01021994: "tmpfs",
    0x858458F6: "ramfs",
    0x6969: "nfs",
    0xFF534D42: "cifs",
    0xFE534D42: "smb2",
    0x794C7630: "overlayfs",
    0x65735546: "fuse",
    0x0BD00BD0: "lustre",
    0x47504653: "gpfs",
    0x19830326: "beegfs",
    0x2FC12FC1: "zfs",
    0xF2F52010: "f2fs",
    0x00C36400: "ceph",
    0x73717368: "squashfs",
    0x4D44: "vfat",
    0x5346544E: "ntfs",
    0x9FA0: "proc",
    0x62656572: "sysfs",
}

#: File systems on which hipFile's direct path can be used (ext4 in ordered
#: data mode, xfs); elsewhere it uses its buffered fallback.
DIRECT_FILE_SYSTEMS = ("ext4", "xfs")


class _Statfs(ctypes.Structure):
    # struct statfs on 64-bit Linux: f_type first, then f_bsize, ...
    _fields_ = [("f_type", ctypes.c_long), ("f_bsize", ctypes.c_long),
                ("_rest", ctypes.c_byte * 104)]


def _statfs_type(path: str) -> int | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        buf = _Statfs()
        if libc.statfs(os.fsencode(path), ctypes.byref(buf)) != 0:
            return None
        return int(buf.f_type) & 0xFFFFFFFF
    except (OSError, AttributeError):
        return None


def _logical_block_size(path: str) -> int | None:
    dev = os.stat(path).st_dev
    base = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    for cand in (base / "queue" / "logical_block_size",
                 base / ".." / "queue" / "logical_block_size"):
        try:
            return int(cand.read_text().strip())
        except (OSError, ValueError):
            continue
    return None


def _probe_o_direct(folder: str) -> dict[str, Any]:
    """Open a temporary file with O_DIRECT and find the smallest write
    alignment that works."""
    o_direct = getattr(os, "O_DIRECT", 0)
    out: dict[str, Any] = {"supported": False, "alignment": None, "error": None}
    if not o_direct:
        out["error"] = "O_DIRECT is not available on this system"
        return out
    fd, name = tempfile.mkstemp(prefix=".hipfile-odirect-", dir=folder)
    os.close(fd)
    try:
        try:
            fd = os.open(name, os.O_RDWR | o_direct)
        except OSError as exc:
            out["error"] = f"open with O_DIRECT: {exc.strerror} (errno {exc.errno})"
            return out
        try:
            with mmap.mmap(-1, 1 << 16) as page:  # page-aligned memory
                view = memoryview(page)
                for align in (512, 1024, 2048, 4096, 8192, 16384, 65536):
                    try:
                        os.pwrite(fd, view[:align], 0)
                    except OSError as exc:
                        if exc.errno != errno.EINVAL:
                            out["error"] = f"O_DIRECT write: {exc.strerror}"
                            return out
                        continue
                    out["supported"] = True
                    out["alignment"] = align
                    break
                view.release()
            if not out["supported"]:
                out["error"] = "O_DIRECT writes fail with EINVAL at every alignment up to 64 KiB"
        finally:
            os.close(fd)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)
    return out


def path_report(folder: str, platform: str) -> dict[str, Any]:
    """The ``--path`` part of ``hipfile info``: file system, O_DIRECT and
    whether hipFile's direct path is eligible (and why not)."""
    rep: dict[str, Any] = {"path": folder}
    if not os.path.isdir(folder):
        rep["error"] = "not a folder"
        rep["fast_path"] = {"eligible": False, "reasons": ["not a folder"]}
        return rep
    magic = _statfs_type(folder)
    mount = mount_of(folder)
    fs = FS_MAGIC.get(magic, "unknown") if magic is not None else "unknown"
    if mount is not None and (fs == "ext2/3/4" or fs == "unknown"):
        fs = mount.fs_type
    rep["fs_type"] = fs
    rep["fs_magic"] = None if magic is None else f"0x{magic:x}"
    rep["mount_point"] = mount.point if mount else None
    rep["mount_options"] = mount.options if mount else []
    rep["logical_block_size"] = _logical_block_size(folder)
    try:
        rep["o_direct"] = _probe_o_direct(folder)
    except OSError as exc:
        rep["o_direct"] = {"supported": False, "alignment": None, "error": str(exc)}
    reasons = []
    if platform == "emulated":
        reasons.append("the emulated test platform moves data on the CPU (no GPU-direct path)")
    if not rep["o_direct"]["supported"]:
        reasons.append(f"O_DIRECT is not supported here ({rep['o_direct']['error']})")
    if fs not in DIRECT_FILE_SYSTEMS:
        reasons.append(f"file system {fs!r} is not one hipFile's direct path uses "
                       f"({', '.join(DIRECT_FILE_SYSTEMS)}); I/O goes through its "
                       "buffered fallback")
    elif fs == "ext4" and any(o.startswith("data=") and o != "data=ordered"
                              for o in rep["mount_options"]):
        reasons.append("ext4 is mounted without data=ordered")
    unsupported = os.environ.get("HIPFILE_UNSUPPORTED_FILE_SYSTEMS", "")
    if fs in {n.strip() for n in unsupported.replace(";", ",").split(",")}:
        reasons.append(f"HIPFILE_UNSUPPORTED_FILE_SYSTEMS lists {fs!r}")
    force = os.environ.get("HIPFILE_FORCE_COMPAT_MODE", "").strip().lower()
    if force and force not in ("0", "false", "no", "off"):
        reasons.append(f"HIPFILE_FORCE_COMPAT_MODE={force} forces the buffered fallback")
    rep["fast_path"] = {"eligible": not reasons, "reasons": reasons,
                        "note": "files must be opened with O_DIRECT "
                                "(hipfile.open(path, mode, direct=True))"}
    return rep


def cuda_bindings_report(path: Sequence[str] | None = None) -> dict[str, Any]:
    """Which installed distributions write ``cuda/bindings/cufile`` (the
    module of ``cuda.bindings.cufile``): HIP-Python's hip-python-interop
    provides it over hipFile, NVIDIA's cuda-bindings (which PyTorch pulls in)
    over cuFile, into the same files. ``owners`` are their names,
    ``in_place`` the one whose recorded hash matches the file on disk now
    (the last installed), ``conflict`` whether more than one writes it.
    Read from the installed packages' records in the folders of ``path``
    (default: ``sys.path``, the first record of a name wins as for imports);
    nothing is imported."""
    from importlib import metadata

    out: dict[str, Any] = {"owners": [], "in_place": None, "conflict": False}
    found = (metadata.distributions() if path is None
             else metadata.distributions(path=list(path)))
    first: dict[str, Any] = {}
    for dist in found:
        name = dist.metadata["Name"]
        if name and name not in first:
            first[name] = dist
    for name in sorted(first):
        _cufile_owner(first[name], name, out)
    out["conflict"] = len(out["owners"]) > 1
    return out


def _cufile_owner(dist: Any, name: str, out: dict[str, Any]) -> None:
    """Add ``name`` to ``out["owners"]`` when ``dist`` writes
    ``cuda/bindings/cufile.*``, and make it ``in_place`` when the file on
    disk is the one it recorded."""
    import base64
    import hashlib

    mine = [f for f in dist.files or []
            if tuple(f.parts[:2]) == ("cuda", "bindings") and len(f.parts) == 3
            and f.parts[2].startswith("cufile.") and not f.parts[2].endswith(".pyc")]
    if not mine:
        return
    out["owners"].append(name)
    for f in mine:
        if f.hash is None or f.hash.mode != "sha256":
            continue
        try:
            data = Path(str(dist.locate_file(f))).read_bytes()
        except OSError:
            continue
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        if digest.decode() == f.hash.value:
            out["in_place"] = name


def _flag_names(flags: Any) -> list[str]:
    return [m.name for m in type(flags) if m.value and (flags & m) == m and m.name]


def info_report(paths: Sequence[str]) -> dict[str, Any]:
    """Everything ``hipfile info`` reports, as a JSON-ready dict. Parts
    that fail are reported with an ``error`` entry instead of raising."""
    import hipfile
    from hipfile import defaults
    from hipfile._lib import _hipfile
    from hipfile.errors import HipFileException, InternalError

    name, test = _platform()
    rep: dict[str, Any] = {
        "hipfile": hipfile.__version__,
        "platform": {"name": name, "test_platform": test,
                     "rocm_path": os.environ.get("ROCM_PATH")},
    }
    lib: dict[str, Any] = {}
    try:
        lib["path"] = _hipfile.load_library()
        lib["version"] = ".".join(map(str, hipfile.get_version()))
    except Exception as exc:
        lib["error"] = f"{type(exc).__name__}: {exc}"
    rep["library"] = lib

    try:
        from importlib.metadata import version

        rep["hip_python"] = version("hip-python")
    except Exception:
        rep["hip_python"] = None

    devices: dict[str, Any] = {}
    try:
        from hipfile._lib import _hip

        check = _hip.check
        hip: Any = _hip.hip
        count = int(check(hip.hipGetDeviceCount(), "hipGetDeviceCount"))
        listed = []
        for i in range(count):
            props = check(hip.hipGetDeviceProperties(i), "hipGetDeviceProperties")
            dev_name = props.name
            if isinstance(dev_name, bytes):
                dev_name = dev_name.decode(errors="replace")
            listed.append({"index": i, "name": str(dev_name),
                           "total_memory": int(getattr(props, "totalGlobalMem", 0))})
        devices["count"] = count
        devices["devices"] = listed
        runtime = check(hip.hipRuntimeGetVersion(), "hipRuntimeGetVersion")
        devices["runtime_version"] = int(runtime)
    except Exception as exc:
        devices["error"] = f"{type(exc).__name__}: {exc}"
    rep["hip"] = devices

    driver: dict[str, Any] = {}
    if "error" not in lib:
        try:
            with hipfile.Driver():
                props = hipfile.driver_get_properties()
                driver["properties"] = dict(props)
                driver["status_flags"] = _flag_names(props.driver_status)
                driver["control_flags"] = _flag_names(props.driver_control)
                driver["feature_flags"] = _flag_names(props.features)
                driver["supports_async"] = hipfile.supports_async()
        except InternalError:
            driver["error"] = ("hipFileDriverGetProperties is not implemented by this "
                               "library (hipFileInternalError 5030)")
        except HipFileException as exc:
            driver["error"] = f"{type(exc).__name__}: {exc}"
    else:
        driver["error"] = "the library could not be loaded"
    rep["driver"] = driver
    if not test and ("error" in lib or "error" in devices):
        from hipfile.platforms import NO_ROCM_HINT

        rep["hint"] = NO_ROCM_HINT
    rep["defaults"] = dict(defaults.items())
    try:
        rep["cuda_bindings"] = cuda_bindings_report()
    except Exception as exc:        # a broken installed record: report, go on
        rep["cuda_bindings"] = {"error": f"{type(exc).__name__}: {exc}"}
    rep["paths"] = [path_report(p, name) for p in paths]
    return rep


def _print_info(rep: dict[str, Any], out: TextIO) -> None:
    def row(label: str, value: object, width: int = 18) -> None:
        print(f"{label:<{width}}: {value}", file=out)

    def failed(part: dict[str, Any], label: str, prefix: str = "unavailable: ",
               width: int = 18) -> bool:
        """Print the error of a part of the report in one row, if it has
        one; returns whether it had."""
        if "error" in part:
            row(label, f"{prefix}{part['error']}", width)
        return "error" in part

    plat = rep["platform"]
    label = " (a TEST platform, not AMD's ROCm)" if plat["test_platform"] else ""
    print(f"hipfile {rep['hipfile']}", file=out)
    row("platform", f"{plat['name']}{label}")
    row("ROCM_PATH", plat["rocm_path"])
    lib = rep["library"]
    if not failed(lib, "library", "NOT LOADED: "):
        row("library", lib["path"])
        row("library version", lib["version"])
    row("HIP-Python", rep["hip_python"])
    hipinfo = rep["hip"]
    if not failed(hipinfo, "devices"):
        row("HIP runtime", hipinfo["runtime_version"])
        for d in hipinfo["devices"]:
            row(f"device {d['index']}", d["name"])
    drv = rep["driver"]
    if not failed(drv, "driver properties"):
        # the three flag words are printed once, decoded, with their raw value
        raw = {"status_flags": "nvfs_driver_status_flags",
               "control_flags": "nvfs_driver_control_flags",
               "feature_flags": "feature_flags"}
        for key, value in drv["properties"].items():
            if key not in raw.values():
                row(f"  {key}", value, 30)
        for key, prop in raw.items():
            value = drv["properties"].get(prop)
            row(f"  {key}", f"{', '.join(drv[key]) or '-'} ({value})", 30)
        row("  supports_async", drv["supports_async"], 30)
    if "hint" in rep:
        row("without a GPU", rep["hint"])
    row("defaults", ", ".join(f"{k}={v}" for k, v in rep["defaults"].items()))
    cb = rep["cuda_bindings"]
    if not failed(cb, "cuda.bindings") and cb["owners"]:
        if cb["conflict"]:
            now = (f"the file on disk is {cb['in_place']}'s" if cb["in_place"]
                   else "the file on disk matches neither's record")
            row("cuda.bindings", f"CONFLICT: {' and '.join(cb['owners'])} both write "
                f"cuda/bindings/cufile ({now}); keep them in separate environments "
                "(docs/integrations/nvidia-cufile.md)")
        else:
            row("cuda.bindings", f"cufile from {cb['owners'][0]}")
    for p in rep["paths"]:
        print(f"path {p['path']}", file=out)
        if failed(p, "  error", "", 20):
            continue
        od = p["o_direct"]
        row("  file system", f"{p['fs_type']} (magic {p['fs_magic']}, "
                             f"mounted at {p['mount_point']})", 20)
        row("  mount options", ",".join(p["mount_options"]) or "(unknown)", 20)
        row("  logical block", p["logical_block_size"], 20)
        direct = (f"yes, alignment {od['alignment']} B" if od["supported"]
                  else f"no: {od['error']}")
        row("  O_DIRECT", direct, 20)
        fast = p["fast_path"]
        row("  direct path", "eligible" if fast["eligible"] else "not eligible", 20)
        for reason in fast["reasons"]:
            print(f"    - {reason}", file=out)


def cmd_info(args: argparse.Namespace) -> int:
    rep = info_report(args.path or [])
    if args.json:
        json.dump(rep, sys.stdout, indent=2, default=str)
        print()
    else:
        _print_info(rep, sys.stdout)
    # a folder that cannot be examined fails the command, as the library does
    bad = "error" in rep["library"] or any("error" in p for p in rep["paths"])
    return 1 if bad else 0
