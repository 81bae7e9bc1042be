#!/usr/bin/env bash
# Run the test suite (or the pytest arguments given) against the emulated
# platform built with AddressSanitizer and UndefinedBehaviorSanitizer.
#
#   bash platforms/emulated/sanitize.sh [pytest args]
#
# The sanitizer runtimes are preloaded into the real interpreter (not a
# wrapper script). Leak detection is off: the interpreter itself keeps
# memory until exit by design; the tests' resource counters catch leaks of
# the platform's own objects instead.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build/emulated-sanitize
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S platforms/emulated -B "$build" "${generator[@]}" -DHIPFILE_EMU_SANITIZE=ON \
    -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$build" >/dev/null
cmake --install "$build" --prefix "$build/prefix" >/dev/null
python=$(python3 -c 'import sys; print(sys.executable)')
export HIPFILE_EMULATED_PREFIX="$PWD/$build/prefix"
export HIPFILE_PLATFORM=emulated
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
preload="$(cc -print-file-name=libasan.so):$(cc -print-file-name=libubsan.so)"
echo "sanitized emulated platform: $HIPFILE_EMULATED_PREFIX"
LD_PRELOAD="$preload" exec "$python" -m pytest -p no:cacheprovider "$@"
