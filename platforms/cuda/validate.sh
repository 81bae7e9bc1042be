#!/usr/bin/env bash
# Validate hipfile on an NVIDIA GPU machine: build the cuda platform, install
# the package, run the whole test suite on the cuda platform, then the
# benchmarks. Every log goes to OUTDIR (default /tmp/hipfile-validate).
#
#   bash platforms/cuda/validate.sh [OUTDIR]
#
# Needs a C compiler, CMake, Cython and scikit-build-core for the package
# build, and HIP-Python importable (install it, or put it on PYTHONPATH).
# Set VALIDATE_SKIP_BENCH=1 to skip the benchmarks, VALIDATE_SKIP_TESTS=1 to
# skip the preflight and the suite, VALIDATE_SUITE_RUNS=N to run the suite N
# times in a row (each run's log and exit status kept). The suite
# (tests/abi/ included) is what checks the platform; the preflight only says
# whether it can run here.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${1:-/tmp/hipfile-validate}"
mkdir -p "$out"
py="${PYTHON:-python3}"
step() { echo "== $*" | tee -a "$out/summary.txt"; }

step "machine"
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version,memory.total --format=csv; uname -r;
  "$py" --version; } >"$out/machine.txt" 2>&1
cat "$out/machine.txt" >>"$out/summary.txt"

step "build the cuda platform"
bash platforms/cuda/build.sh >"$out/build-cuda.log" 2>&1 || { tail "$out/build-cuda.log"; exit 1; }
bash platforms/cuda/udev-stub.sh /tmp >>"$out/build-cuda.log" 2>&1 || true

step "install hipfile"
"$py" -m pip install --no-build-isolation --no-deps -q -e . >"$out/install.log" 2>&1 \
    || { tail -30 "$out/install.log"; exit 1; }

if [ "${VALIDATE_SKIP_TESTS:-0}" != 1 ]; then
step "preflight"
HIPFILE_PLATFORM=cuda timeout 120 "$py" platforms/cuda/smoke.py --dir /tmp \
    >"$out/preflight.log" 2>&1
cat "$out/preflight.log" | tee -a "$out/summary.txt"

runs="${VALIDATE_SUITE_RUNS:-1}"
step "test suite on the cuda platform, $runs run(s) in a row"
for i in $(seq 1 "$runs"); do
    log="$out/pytest-cuda-$i.log"
    HIPFILE_PLATFORM=cuda timeout 420 "$py" -m pytest -q -p no:cacheprovider -rs \
        --junitxml="$out/junit-cuda-$i.xml" >"$log" 2>&1
    echo "run $i: pytest exit $?: $(tail -1 "$log")" | tee -a "$out/summary.txt"
done
tail -25 "$out/pytest-cuda-$runs.log" >>"$out/summary.txt"
fi

[ "${VALIDATE_SKIP_BENCH:-0}" = 1 ] && exit 0
export HIPFILE_PLATFORM=cuda
step "bench: read_async submit overhead (null library, then real streams)"
timeout 120 "$py" benchmarks/bench_submit.py --ops 20000 --repeats 9 2>&1 | tee -a "$out/summary.txt"
timeout 120 "$py" benchmarks/bench_submit.py --library real --ops 2000 --repeats 5 2>&1 \
    | tee -a "$out/summary.txt"
step "bench: 1 GiB sync read, warm then cold page cache"
timeout 240 "$py" benchmarks/bench_sync_read.py --size-mib 1024 --repeats 5 --dir /tmp 2>&1 \
    | tee -a "$out/summary.txt"
timeout 240 "$py" benchmarks/bench_sync_read.py --size-mib 1024 --repeats 3 --cold --dir /tmp \
    2>&1 | tee -a "$out/summary.txt"
step "bench: layer-wise KV load overlapped with matrix products"
timeout 180 "$py" benchmarks/bench_kv_layerwise.py --layers 32 --layer-mib 16 --dir /tmp 2>&1 \
    | tee -a "$out/summary.txt"
cp /tmp/cufile.log "$out/" 2>/dev/null || true
exit 0
