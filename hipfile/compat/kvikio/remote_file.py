"""KvikIO's ``is_remote_file_available``: remote files (HTTP, S3, WebHDFS)
are not offered here, so it answers False."""

from __future__ import annotations

__all__ = ["is_remote_file_available"]


def is_remote_file_available() -> bool:
    """Whether remote files can be opened: False here (KvikIO's ``RemoteFile``
    is not part of this package)."""
    return False
