"""KvikIO's side of ``bench_engine.py``, run in its own process because KvikIO
reads its compat mode from the environment when it is imported.

    python benchmarks/_kvikio_worker.py PATH LAYERS LAYER_BYTES REPEATS COLD(0|1)

Optional ``BENCH_KVIKIO_THREADS`` and ``BENCH_KVIKIO_TASK`` set KvikIO's
``num_threads`` and ``task_size``. Prints one ``KVIKIO_RESULT {json}`` line
with median seconds of ``raw_read_async`` (one stream, a range per layer)
and ``pread`` of the same bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from _common import drop_page_cache


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", help="data file")
    ap.add_argument("layers", type=int, help="ranges per load")
    ap.add_argument("chunk", type=int, help="bytes per range")
    ap.add_argument("repeats", type=int, help="timed repeats")
    ap.add_argument("cold", choices=("0", "1"), help="drop the page cache before each read")
    args = ap.parse_args()
    import cupy
    import kvikio
    import kvikio.defaults

    threads = int(os.environ.get("BENCH_KVIKIO_THREADS", "0"))
    task = int(os.environ.get("BENCH_KVIKIO_TASK", "0"))
    if threads or task:
        wanted = {k: v for k, v in (("num_threads", threads), ("task_size", task)) if v}
        try:
            kvikio.defaults.set(wanted)
        except Exception:  # older KvikIO: one setter per setting
            for key, value in wanted.items():
                getattr(kvikio.defaults, f"{key}_reset")(value)
    layers, chunk = args.layers, args.chunk
    total = layers * chunk
    buf = cupy.empty(total, dtype=cupy.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)
    out: dict[str, object] = {"kvikio": getattr(kvikio, "__version__", "?")}
    for key in ("compat_mode", "num_threads", "task_size"):
        try:
            out[key] = str(kvikio.defaults.get(key))
        except Exception:  # older KvikIO: one getter per setting
            getter = getattr(kvikio.defaults, key, None) or getattr(
                kvikio.defaults, f"get_{key}", None)
            out[key] = str(getter()) if callable(getter) else "?"
    with kvikio.CuFile(args.path, "r") as f:

        def raw_async() -> None:
            futs = [f.raw_read_async(buf[i * chunk:(i + 1) * chunk], stream.ptr, chunk,
                                      i * chunk, 0)
                    for i in range(layers)]
            assert sum(x.check_bytes_done() for x in futs) == total

        def pread() -> None:
            assert f.pread(buf, total, 0).get() == total

        for name, fn in (("raw_read_async", raw_async), ("pread", pread)):
            if args.cold == "1" and name == "raw_read_async":
                continue
            fn()
            cupy.cuda.Device().synchronize()
            ts = []
            for _ in range(args.repeats):
                if args.cold == "1":
                    drop_page_cache(args.path)
                t0 = time.perf_counter()
                fn()
                cupy.cuda.Device().synchronize()
                ts.append(time.perf_counter() - t0)
            out[name] = statistics.median(ts)
    print("KVIKIO_RESULT " + json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
