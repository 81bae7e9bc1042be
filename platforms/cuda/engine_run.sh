#!/usr/bin/env bash
# One run on an NVIDIA GPU machine: build the cuda platform, install hipfile,
# run the engine's and the stream memory operations' tests on it, then the
# engine and safetensors benchmarks. Logs and JSON go to OUTDIR.
#
#   bash platforms/cuda/engine_run.sh [OUTDIR]
#
# Needs HIP-Python importable, and KvikIO with CuPy for the KvikIO rows.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${1:-/tmp/hipfile-engine}"
mkdir -p "$out"
py="${PYTHON:-python3}"
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version,memory.total --format=csv; nproc;
  free -g; uname -r; "$py" --version; date -u; } >"$out/machine.txt" 2>&1
bash platforms/cuda/build.sh >"$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 1; }
bash platforms/cuda/udev-stub.sh /tmp >>"$out/build.log" 2>&1 || true
"$py" -m pip install --no-build-isolation --no-deps -q -e . >"$out/install.log" 2>&1 \
    || { tail -30 "$out/install.log"; exit 1; }
export HIPFILE_PLATFORM=cuda HIPFILE_PLATFORM_QUIET=1
# SIGABRT on a time-out makes faulthandler print every thread's stack
run_tests() {
    timeout -s ABRT "${ENGINE_RUN_TEST_TIMEOUT:-200}" "$py" -X faulthandler -m pytest -q \
        -p no:cacheprovider -rs ${ENGINE_RUN_TESTS:-tests/engine/test_engine.py \
        tests/hip} >"$out/pytest.log" 2>&1
    echo "pytest exit $?"; tail -15 "$out/pytest.log"
}
[ "${ENGINE_RUN_TESTS_LAST:-0}" = 1 ] || run_tests
[ "${ENGINE_RUN_SKIP_BENCH:-0}" = 1 ] && exit 0
timeout 330 "$py" benchmarks/bench_engine.py --platform cuda --layers 32 --layer-mib 16 \
    --repeats 7 --kvikio --cold ${ENGINE_RUN_SWEEP---sweep} --dir /tmp \
    --json "$out/engine.json" >"$out/bench-engine.log" 2>&1
echo "bench_engine exit $?"; cat "$out/bench-engine.log"
timeout -s ABRT "${ENGINE_RUN_VLLM_TIMEOUT:-120}" "$py" -X faulthandler examples/vllm_kv_connector.py --bench --layers 32 --blocks 16 --block-kib 1024 \
    --dim 4096 --matmuls 4 --repeats 7 --dir /tmp >"$out/bench-vllm.log" 2>&1
echo "vllm connector bench exit $?"; tail -20 "$out/bench-vllm.log"
[ "${ENGINE_RUN_SKIP_SAFETENSORS:-0}" = 1 ] || timeout 540 "$py" benchmarks/bench_safetensors.py --platform cuda --dir /tmp \
    --repeats 3 --json "$out/safetensors.json" >"$out/bench-safetensors.log" 2>&1
echo "bench_safetensors exit $?"; tail -30 "$out/bench-safetensors.log"
[ "${ENGINE_RUN_TESTS_LAST:-0}" = 1 ] && run_tests
exit 0
