"""The emulated prefix has the layout of a ROCm install: a program linked
against ``libhipfile.so.0`` (the SONAME upstream-style linking records) runs
with only ``LD_LIBRARY_PATH`` or ``ROCM_PATH`` pointing at it, and exactly
one copy of the library is loaded whichever name is asked for."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hipfile import platforms

LIB = platforms.prefix("emulated") / "lib"

# Runs in a clean process: opens the library by both names (by path and by
# name), compares the symbols, and lists the mapped files of the library.
PROBE = textwrap.dedent("""
    import ctypes, json, os, sys
    lib = sys.argv[1]
    names = [os.path.join(lib, "libhipfile.so.0"), os.path.join(lib, "libhipfile.so"),
             "libhipfile.so.0", "libhipfile.so"]
    addrs = [ctypes.cast(ctypes.CDLL(n).hipFileGetVersion, ctypes.c_void_p).value
             for n in names]
    maps = sorted({line.split()[-1] for line in open("/proc/self/maps")
                   if "libhipfile" in line})
    print(json.dumps({"addrs": addrs, "maps": maps}))
""")

PROGRAM = textwrap.dedent("""
    #include <dlfcn.h>
    #include <stdio.h>
    #include <string.h>
    typedef struct { int err; int hip_drv_err; } hipFileError_t;
    hipFileError_t hipFileGetVersion(unsigned *major, unsigned *minor, unsigned *patch);
    hipFileError_t hipFileDriverOpen(void);
    hipFileError_t hipFileDriverClose(void);
    long long hipFileUseCount(void);

    int main(void) {
        unsigned a = 9, b = 9, c = 9;
        hipFileError_t e = hipFileGetVersion(&a, &b, &c);
        if (e.err != 0) return 2;
        if (hipFileDriverOpen().err != 0 || hipFileUseCount() != 1) return 3;
        if (hipFileDriverClose().err != 0 || hipFileUseCount() != 0) return 4;
        void *h0 = dlopen("libhipfile.so.0", RTLD_NOW);
        void *h = dlopen("libhipfile.so", RTLD_NOW);
        if (h0 == NULL || h == NULL) return 5;
        if (dlsym(h0, "hipFileGetVersion") != (void *)hipFileGetVersion) return 6;
        if (dlsym(h, "hipFileGetVersion") != (void *)hipFileGetVersion) return 7;
        printf("version %u.%u.%u\\n", a, b, c);
        char line[4096];
        FILE *maps = fopen("/proc/self/maps", "r");
        while (maps && fgets(line, sizeof line, maps))
            if (strstr(line, "libhipfile")) fputs(strrchr(line, ' ') + 1, stdout);
        return 0;
    }
""")


def _clean_env(**extra: str) -> dict[str, str]:
    # the sanitizer run (platforms/emulated/sanitize.sh) needs its preload
    keep = ("PATH", "HOME", "TMPDIR", "LANG", "LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(extra)
    return env


def _defining_files(paths: list[str]) -> set[str]:
    """The mapped files that define the hipFile functions (the stub does not)."""
    return {p for p in paths if b"hipFileGetVersion" in Path(p).read_bytes()}


def test_prefix_holds_both_names_as_files() -> None:
    for name in ("libhipfile.so", "libhipfile.so.0", "libamdhip64.so"):
        path = LIB / name
        assert path.is_file() and not path.is_symlink(), path
    assert _defining_files([str(LIB / "libhipfile.so"), str(LIB / "libhipfile.so.0")]) == {
        str(LIB / "libhipfile.so")}


@pytest.mark.parametrize("via", ["absolute", "LD_LIBRARY_PATH"])
def test_both_names_give_one_copy(via: str) -> None:
    env = _clean_env(LD_LIBRARY_PATH=str(LIB)) if via == "LD_LIBRARY_PATH" else _clean_env()
    if via == "absolute":
        # names without a path need the loader path: check the paths only
        probe = PROBE.replace('"libhipfile.so.0", "libhipfile.so"]', "]")
    else:
        probe = PROBE
    proc = subprocess.run([sys.executable, "-c", probe, str(LIB)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert len(set(out["addrs"])) == 1, out
    assert _defining_files(out["maps"]) == {str(LIB / "libhipfile.so")}, out["maps"]


def test_program_linked_upstream_style_runs_with_only_the_loader_path(tmp_path: Path) -> None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) to link a program with -lhipfile")
    src = tmp_path / "client.c"
    src.write_text(PROGRAM)
    exe = tmp_path / "client"
    subprocess.run([cc, str(src), "-o", str(exe), f"-L{LIB}", "-lhipfile", "-ldl"],
                   check=True, capture_output=True, timeout=120)
    # the recorded dependency is the SONAME, as with a ROCm install
    needed = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True)
    if needed.returncode == 0:
        assert "[libhipfile.so.0]" in needed.stdout
    # without the loader path it cannot start; with it, it runs
    assert subprocess.run([str(exe)], env=_clean_env(), capture_output=True).returncode != 0
    proc = subprocess.run([str(exe)], env=_clean_env(LD_LIBRARY_PATH=str(LIB)),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stdout.split()
    assert lines[:2] == ["version", "0.2.0"]
    assert _defining_files(sorted(set(lines[2:]))) == {str(LIB / "libhipfile.so")}


def test_package_loads_through_rocm_path_next_to_a_linked_copy(tmp_path: Path) -> None:
    # The package opens ROCM_PATH/lib/libhipfile.so; a process that already
    # has libhipfile.so.0 loaded still ends up with one copy.
    code = textwrap.dedent(f"""
        import ctypes, warnings
        warnings.simplefilter("ignore")
        first = ctypes.CDLL({str(LIB / "libhipfile.so.0")!r})
        from hipfile._lib import _hipfile
        _hipfile.load_library()
        print(_hipfile.get_version())
        print("\\n".join(sorted({{l.split()[-1] for l in open("/proc/self/maps")
                                   if "libhipfile" in l}})))
    """)
    env = dict(os.environ, ROCM_PATH=str(LIB.parent))
    env.pop("HIPFILE_PLATFORM", None)
    env.pop("HIPFILE_LIBRARY", None)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split("\n")
    assert lines[0] == "(0, 2, 0)"
    assert _defining_files([p for p in lines[1:] if p]) == {str(LIB / "libhipfile.so")}
