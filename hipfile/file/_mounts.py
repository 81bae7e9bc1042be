"""The mount that holds a path, from the kernel's mount table."""

from __future__ import annotations

import os
from typing import NamedTuple


class Mount(NamedTuple):
    """One entry of ``/proc/self/mounts``."""

    point: str
    fs_type: str
    options: list[str]


def mount_of(path: str | os.PathLike[str]) -> Mount | None:
    """The mount holding ``path`` (after resolving links): the longest mount
    point that contains it, the later entry where one point is mounted over
    another. ``None`` when the table cannot be read or nothing matches."""
    best: Mount | None = None
    real = os.path.realpath(path)
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 4:
                    continue
                point = parts[1].replace("\\040", " ")
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and (best is None or len(point) >= len(best.point)):
                    best = Mount(point, parts[2], parts[3].split(","))
    except OSError:
        return None
    return best
