#!/usr/bin/env bash
# Build the cuda test platform: the HIP runtime subset (libamdhip64.so) over
# NVIDIA's CUDA runtime and the hipFile ABI (libhipfile.so) over cuFile, laid
# out as a ROCm-style prefix:
#
#   platforms/cuda/build/prefix/lib/libamdhip64.so
#   platforms/cuda/build/prefix/lib/libhipfile.so  (+ libhipfile.so.0)
#   platforms/cuda/build/prefix/share/hipfile-cuda/cufile.json
#
# Usage: bash platforms/cuda/build.sh
# Needs only a C compiler: no CUDA or cuFile headers or libraries. They are
# opened at run time (see docs/platform-cuda.md for the search order).
# Environment: CC (default cc), CFLAGS (added), PYTHON (default python3, used to
# find NVIDIA's Python wheels), HIPFILE_CUDA_BUILD_DIR (default
# platforms/cuda/build), HIPFILE_CUDA_LIBDIRS (extra library folders, colon-
# separated, searched after the system loader).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${HIPFILE_CUDA_BUILD_DIR:-$here/build}"
prefix="$out/prefix"
cc="${CC:-cc}"
python="${PYTHON:-python3}"

# Folders of NVIDIA's wheels (site-packages/nvidia/*/lib) that hold libcudart
# or libcufile on this machine; searched at run time after the system loader.
wheel_dirs="$("$python" - <<'PY' 2>/dev/null || true
import glob, os, site, sys
roots = []
try:
    roots += site.getsitepackages()
except Exception:
    pass
try:
    roots.append(site.getusersitepackages())
except Exception:
    pass
roots += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
found = []
for root in roots:
    for d in sorted(glob.glob(os.path.join(root, "nvidia", "*", "lib"))):
        d = os.path.realpath(d)
        if d in found or any(c in d for c in ':"\\'):
            continue
        if glob.glob(os.path.join(d, "libcudart.so*")) or glob.glob(os.path.join(d, "libcufile.so*")):
            found.append(d)
print(":".join(found))
PY
)"
libdirs="${HIPFILE_CUDA_LIBDIRS:-}"
if [ -n "$wheel_dirs" ]; then
    libdirs="${libdirs:+$libdirs:}$wheel_dirs"
fi
case "$libdirs$here" in
    *'"'* | *'\'*) echo "build.sh: paths with quotes or backslashes are not supported" >&2; exit 1 ;;
esac

mkdir -p "$prefix/lib" "$prefix/share/hipfile-cuda"
flags=(-std=c11 -O2 -g -fPIC -Wall -Wextra -Werror -fvisibility=hidden
       -DHIPFILE_CUDA_LIBDIRS="\"$libdirs\""
       -DHIPFILE_CUDA_JSON="\"$here/cufile.json\"")
# shellcheck disable=SC2206
extra=(${CFLAGS:-})
common=("$here/src/loader.c" "$here/src/hip_errors.c" "$here/../common/hip_error_table.c")

"$cc" "${flags[@]}" "${extra[@]}" -shared -Wl,-z,defs \
    -Wl,-soname,libamdhip64.so \
    -o "$prefix/lib/libamdhip64.so" "$here"/src/hip/*.c "${common[@]}" -ldl -lpthread

"$cc" "${flags[@]}" "${extra[@]}" -shared -Wl,-z,defs \
    -Wl,-soname,libhipfile.so.0 -Wl,--disable-new-dtags -Wl,-rpath,'$ORIGIN' \
    -o "$prefix/lib/libhipfile.so" "$here"/src/hipfile/*.c "${common[@]}" \
    -L"$prefix/lib" -Wl,--no-as-needed -lamdhip64 -Wl,--as-needed -ldl -lpthread
ln -sf libhipfile.so "$prefix/lib/libhipfile.so.0"
cp "$here/cufile.json" "$prefix/share/hipfile-cuda/cufile.json"

# Every ABI function must be exported, and nothing else.
hip_symbols="hipInit hipDriverGetVersion hipRuntimeGetVersion hipGetDeviceCount hipGetDevice
hipSetDevice hipDeviceSynchronize hipDeviceReset hipMalloc hipFree hipHostMalloc hipHostAlloc
hipMallocHost hipHostFree hipFreeHost hipMallocManaged hipHostRegister hipHostUnregister
hipHostGetDevicePointer hipHostGetFlags hipMemcpy hipMemcpyAsync hipMemcpyBatchAsync hipMemcpyHtoD hipMemcpyDtoH
hipMemcpyDtoD hipMemcpyHtoDAsync hipMemcpyDtoHAsync hipMemcpyDtoDAsync hipMemset
hipMemsetAsync hipMemsetD32Async hipMemGetInfo hipPointerGetAttributes hipStreamCreate hipStreamCreateWithFlags
hipStreamCreateWithPriority hipDeviceGetStreamPriorityRange hipStreamDestroy
hipStreamSynchronize hipStreamQuery hipStreamWaitEvent hipStreamGetDevice hipStreamGetFlags
hipStreamGetPriority hipLaunchHostFunc hipStreamAddCallback hipEventCreate
hipEventCreateWithFlags hipEventRecord hipEventRecordWithFlags hipEventSynchronize
hipEventQuery hipEventElapsedTime hipEventDestroy hipGetLastError hipPeekAtLastError
hipGetErrorName hipGetErrorString hipStreamWaitValue32 hipStreamWaitValue64
hipStreamWriteValue32 hipStreamWriteValue64 hipExtMallocWithFlags hipDeviceGetAttribute
hipMemGetAddressRange"
hipfile_symbols="hipFileDriverOpen hipFileDriverClose hipFileUseCount hipFileDriverGetProperties
hipFileDriverSetPollMode hipFileDriverSetMaxDirectIOSize hipFileDriverSetMaxCacheSize
hipFileDriverSetMaxPinnedMemSize hipFileGetParameterSizeT hipFileGetParameterBool
hipFileGetParameterString hipFileSetParameterSizeT hipFileSetParameterBool
hipFileSetParameterString hipFileHandleRegister hipFileHandleDeregister hipFileBufRegister
hipFileBufDeregister hipFileRead hipFileWrite hipFileReadAsync hipFileWriteAsync
hipFileStreamRegister hipFileStreamDeregister hipFileBatchIOSetUp hipFileBatchIOSubmit
hipFileBatchIOGetStatus hipFileBatchIOCancel hipFileBatchIODestroy hipFileGetVersion
hipFileGetOpErrorString"

check_exports() {
    local lib="$1" want="$2" have
    if ! command -v nm >/dev/null 2>&1; then
        echo "build.sh: nm not found; exports of $(basename "$lib") not checked" >&2
        return 0
    fi
    have="$(nm -D --defined-only "$lib" | awk '$2 == "T" {print $3}' | sort)"
    # shellcheck disable=SC2086
    local expected
    expected="$(printf '%s\n' $want | sort)"
    if [ "$have" != "$expected" ]; then
        echo "build.sh: $(basename "$lib") exports differ from the ABI list:" >&2
        diff <(echo "$expected") <(echo "$have") >&2 || true
        return 1
    fi
}
check_exports "$prefix/lib/libamdhip64.so" "$hip_symbols"
check_exports "$prefix/lib/libhipfile.so" "$hipfile_symbols"

echo "cuda platform built: $prefix"
if [ -n "$libdirs" ]; then
    echo "  extra library folders: $libdirs"
fi
