"""The stream-ordered parallel engine's submissions."""

from typing import Any

from hipfile._lib._core import FileCore
from hipfile._lib.engine.handle import StreamIOHandle

def engine_submit(
    f: FileCore, buffer: Any, ranges: Any, stream: Any = 0, *, write: bool = False,
    task_size: int | None = None, fd: int = -1, ordered: bool = True,
    grouped: bool = False, prefetch: bool = False,
) -> list[StreamIOHandle]: ...
def engine_submit_files(
    buffer: Any, entries: Any, stream: Any = 0, *, write: bool = False,
    task_size: int | None = None, ordered: bool = True, prefetch: bool = False,
) -> StreamIOHandle: ...
def engine_submit_addresses(
    files: Any, ranges: Any, stream: Any = 0, *, write: bool = False,
    task_size: int | None = None, ordered: bool = True, prefetch: bool = False,
) -> StreamIOHandle: ...
def engine_transfer(
    f: FileCore, buffer: Any, size: int, file_offset: int, buffer_offset: int, *,
    write: bool = False, task_size: int | None = None, fd: int = -1,
) -> StreamIOHandle | None: ...
def engine_prepare(device: int = -1) -> None: ...
def engine_read_first_max(n: int | None = None) -> int: ...
