#!/usr/bin/env bash
# One batch I/O run on an NVIDIA GPU machine: build the cuda platform, install
# hipfile, run the batch tests on it, then benchmarks/bench_batch.py twice:
# with the platform's own bounded batch waits, and with the waits handed to
# cuFile (HIPFILE_CUDA_BATCH_WAIT=cufile). Logs and JSON go to OUTDIR.
#
#   bash platforms/cuda/batch_run.sh [OUTDIR]
#
# Every step has a time limit; a step that runs past it gets SIGABRT, and
# faulthandler prints every thread's stack into its log.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${1:-/tmp/hipfile-batch}"
mkdir -p "$out"
py="${PYTHON:-python3}"
{ nvidia-smi -L; nproc; uname -r; "$py" --version; date -u; } >"$out/machine.txt" 2>&1
bash platforms/cuda/build.sh >"$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 1; }
bash platforms/cuda/udev-stub.sh /tmp >>"$out/build.log" 2>&1 || true
"$py" -m pip install --no-build-isolation --no-deps -q -e . >"$out/install.log" 2>&1 \
    || { tail -30 "$out/install.log"; exit 1; }
export HIPFILE_PLATFORM=cuda HIPFILE_PLATFORM_QUIET=1
timeout -s ABRT 180 "$py" -X faulthandler -m pytest -q -p no:cacheprovider -rs \
    tests/batch/test_batch_ranges.py tests/batch/test_batch.py tests/test_conveniences.py \
    tests/abi/test_abi_batch.py tests/batch/test_cuda_platform_batch_wait.py >"$out/pytest.log" 2>&1
echo "pytest exit $?"; tail -15 "$out/pytest.log"
bench() {
    timeout -s ABRT 150 "$py" -X faulthandler benchmarks/bench_batch.py --platform cuda \
        --blocks "${BATCH_RUN_BLOCKS:-1024}" --block-kib 64 --dir /tmp --trace --timeout 60 \
        --watchdog 20 "$@"
}
bench --json "$out/batch.json" >"$out/bench-batch.log" 2>&1
echo "bench_batch exit $?"; tail -40 "$out/bench-batch.log"
HIPFILE_CUDA_BATCH_WAIT=cufile bench --repeats 3 --json "$out/batch-cufile-wait.json" \
    >"$out/bench-batch-cufile-wait.log" 2>&1
echo "bench_batch (waits in cuFile) exit $?"; tail -40 "$out/bench-batch-cufile-wait.log"
exit 0
