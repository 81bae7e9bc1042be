"""The scheduler side: which KV chunks are in files under ``root_dir``.

The manager keeps an index of the chunk files in this process only: it
shares nothing with the worker processes but the keys of the
``FSLoadStoreSpec`` it returns, and with other servers using the same root
nothing but the files themselves.
"""

from __future__ import annotations

import copy
import logging
import os
from collections import OrderedDict
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass

from vllm.v1.kv_offload.base import (
    LoadStoreSpec,
    LookupResult,
    Medium,
    OffloadingEvent,
    OffloadingManager,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
    RequestOffloadingContext,
    make_offload_key,
)
from vllm.v1.kv_offload.file_mapper import FileMapper
from vllm.v1.kv_offload.fs.worker import FSLoadStoreSpec

__all__ = ["HipFileOffloadingManager"]

_log = logging.getLogger(__name__)


@dataclass
class _Entry:
    """One key of the index: its bytes on disk (all ranks together), whether
    its store completed, and how many loads hold it."""

    size: int
    stored: bool
    pins: int = 0


class HipFileOffloadingManager(OffloadingManager):  # type: ignore[misc]
    """An ``OffloadingManager`` over chunk files laid out by vLLM's ``FileMapper``.

    Keys are evicted least recently used first once the bytes of the index
    would pass ``max_bytes``; a key a load holds (``prepare_load`` until
    ``complete_load``) or a store has not completed is never evicted. At
    start the index is rebuilt from the files already under the root, and
    a key another server stored in the same root is taken in at its first
    ``lookup``; a file that vanished or shrank since is a MISS and leaves
    the index.

    Parameters
    ----------
    mapper
        vLLM's ``FileMapper`` of this model and layout (any rank's).
    world_size
        Worker ranks: each stores its own file of every chunk.
    bytes_per_key
        The bytes one rank stores for one chunk (what is reserved for a
        store until its files are complete and their sizes known).
    max_bytes
        The most bytes the index may hold, all ranks' files counted.
    enable_events
        Collect ``OffloadingEvent`` s (``Medium.STORAGE``) for ``take_events``.

    Raises
    ------
    ValueError
        ``max_bytes`` or ``bytes_per_key`` is not positive.
    """

    def __init__(self, mapper: FileMapper, *, world_size: int, bytes_per_key: int,
                 max_bytes: int, enable_events: bool = False) -> None:
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, not {max_bytes}")
        if bytes_per_key <= 0:
            raise ValueError(f"bytes_per_key must be positive, not {bytes_per_key}")
        self._mappers = []
        for rank in range(max(1, world_size)):
            m = copy.copy(mapper)
            m.rank = rank
            self._mappers.append(m)
        self._reserve = bytes_per_key * len(self._mappers)
        self.max_bytes = max_bytes
        self._events: list[OffloadingEvent] | None = [] if enable_events else None
        self._index: OrderedDict[OffloadKey, _Entry] = OrderedDict()
        self._used = 0
        self._deferred: set[OffloadKey] = set()   # files to delete at on_reset_flushed
        self._scan()

    # -- what the index holds -------------------------------------------------

    @property
    def used_bytes(self) -> int:
        """The bytes the index holds: complete files and stores in flight."""
        return self._used

    def paths(self, key: OffloadKey) -> list[str]:
        """The files of ``key``, one per rank."""
        return [m.get_file_name(key) for m in self._mappers]

    def _on_disk(self, key: OffloadKey) -> int | None:
        """The bytes of ``key``'s files, or None when one is missing or empty."""
        total = 0
        for p in self.paths(key):
            try:
                n = os.stat(p).st_size
            except OSError:
                return None
            if n == 0:
                return None
            total += n
        return total

    def _scan(self) -> None:
        """Take in the complete files under the root, oldest first."""
        found: list[tuple[float, OffloadKey, int]] = []
        for key, mtime in _keys_under(self._mappers[0]):
            size = self._on_disk(key)
            if size is not None:
                found.append((mtime, key, size))
        found.sort(key=lambda t: t[0])
        for _, key, size in found:
            self._index[key] = _Entry(size, stored=True)
            self._used += size
        self._emit([k for _, k, _ in found], removed=False)
        self._evict_to(0, protect=())
        if found:
            _log.info("found %d KV chunks (%d bytes) under %s", len(self._index),
                      self._used, self._mappers[0].base_path)

    # -- events ---------------------------------------------------------------

    def _emit(self, keys: list[OffloadKey], removed: bool) -> None:
        if self._events is not None and keys:
            self._events.append(OffloadingEvent(keys=keys, medium=Medium.STORAGE,
                                                removed=removed))

    def take_events(self) -> Iterator[OffloadingEvent]:
        """The events collected since the last call (stores and removals)."""
        if self._events:
            events, self._events = self._events, []
            yield from events

    # -- eviction -------------------------------------------------------------

    def _drop(self, key: OffloadKey, delete: bool) -> None:
        entry = self._index.pop(key)
        self._used -= entry.size
        if delete:
            self._delete_files(key)

    def _delete_files(self, key: OffloadKey) -> None:
        for p in self.paths(key):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
            except OSError as e:
                _log.warning("could not delete %s: %s", p, e)

    def _evict_to(self, need: int, protect: Collection[OffloadKey]) -> list[OffloadKey] | None:
        """Evict least recently used complete, unheld keys until ``need`` more
        bytes fit; None (nothing evicted) when they cannot."""
        room = self.max_bytes - self._used
        if room >= need:
            return []
        victims: list[OffloadKey] = []
        for key, e in self._index.items():
            if e.stored and e.pins == 0 and key not in protect:
                victims.append(key)
                room += e.size
                if room >= need:
                    break
        if room < need:
            return None
        for key in victims:
            self._drop(key, delete=True)
        self._emit(victims, removed=True)
        return victims

    # -- OffloadingManager ----------------------------------------------------

    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        """HIT when ``key``'s files are complete, HIT_PENDING while its store is
        in flight, MISS otherwise (a file gone or shrunk drops the key)."""
        entry = self._index.get(key)
        if entry is None:
            size = self._on_disk(key)      # stored by another server sharing the root
            if size is None or size > self.max_bytes:
                return LookupResult.MISS
            if self._evict_to(size, protect=()) is None:
                return LookupResult.MISS
            self._index[key] = _Entry(size, stored=True)
            self._used += size
            self._emit([key], removed=False)
            return LookupResult.HIT
        if not entry.stored:
            return LookupResult.HIT_PENDING
        if self._on_disk(key) != entry.size:
            _log.warning("KV chunk files of key %s vanished or changed size; dropped",
                         key.hex())
            self._drop(key, delete=entry.pins == 0)
            self._emit([key], removed=True)
            return LookupResult.MISS
        self._index.move_to_end(key)
        return LookupResult.HIT

    def prepare_load(self, keys: Collection[OffloadKey], req_context: ReqContext
                     ) -> LoadStoreSpec:
        """Hold ``keys`` against eviction until ``complete_load``; their spec.

        Raises
        ------
        KeyError
            A key is not in the index.
        """
        for key in keys:
            if key not in self._index:
                raise KeyError(f"prepare_load of key {key.hex()}, which is not offloaded")
        for key in keys:
            self._index[key].pins += 1
            self._index.move_to_end(key)
        return FSLoadStoreSpec(list(keys))

    def complete_load(self, keys: Collection[OffloadKey], req_context: ReqContext) -> None:
        """Release the hold ``prepare_load`` took on ``keys``."""
        for key in keys:
            entry = self._index.get(key)
            if entry is not None and entry.pins > 0:
                entry.pins -= 1

    def prepare_store(self, keys: Collection[OffloadKey], req_context: ReqContext
                      ) -> PrepareStoreOutput | None:
        """Reserve room for the keys not yet in the index (evicting the least
        recently used others); None when they cannot fit."""
        todo: list[OffloadKey] = []
        seen: set[OffloadKey] = set()
        for key in keys:
            if key in self._index:
                self._index.move_to_end(key)
            elif key not in seen:
                seen.add(key)
                todo.append(key)
        need = len(todo) * self._reserve
        evicted = self._evict_to(need, protect=set(keys))
        if evicted is None:
            return None
        for key in todo:
            self._index[key] = _Entry(self._reserve, stored=False)
            self._used += self._reserve
        return PrepareStoreOutput(keys_to_store=todo, store_spec=FSLoadStoreSpec(todo),
                                  evicted_keys=evicted)

    def complete_store(self, keys: Collection[OffloadKey], req_context: ReqContext,
                       success: bool = True) -> None:
        """Make ``keys`` loadable (their files measured again), or drop them
        when the store failed so that they are offered again."""
        stored: list[OffloadKey] = []
        for key in keys:
            entry = self._index.get(key)
            if entry is None or entry.stored:
                continue
            size = self._on_disk(key) if success else None
            if size is None:
                self._drop(key, delete=False)
                continue
            self._used += size - entry.size
            entry.size, entry.stored = size, True
            stored.append(key)
        self._emit(stored, removed=False)

    def on_new_request(self, req_context: ReqContext) -> RequestOffloadingContext:
        """Every request offloads its new chunks."""
        return RequestOffloadingContext()

    def reset_cache(self) -> None:
        """Forget every key and delete its files; files a load or store in
        flight uses are deleted at ``on_reset_flushed``."""
        removed = list(self._index)
        for key, e in list(self._index.items()):
            busy = e.pins > 0 or not e.stored
            if busy:
                self._deferred.add(key)
            self._drop(key, delete=not busy)
        self._emit(removed, removed=True)

    def on_reset_flushed(self) -> None:
        """Delete the files of keys that were busy at ``reset_cache``."""
        for key in self._deferred:
            if key not in self._index:
                self._delete_files(key)
        self._deferred.clear()

    def shutdown(self) -> None:
        """Finish the deletions ``reset_cache`` deferred; the files of
        complete keys stay for the next start."""
        self.on_reset_flushed()


def _keys_under(mapper: FileMapper) -> Iterable[tuple[OffloadKey, float]]:
    """The keys of the complete chunk files of ``mapper``'s rank, with their
    modification times (``<base>_r<rank>/<hhh>/<hh>_g<group>/<hash>.bin``)."""
    top = f"{mapper.base_path}_r{mapper.rank}"
    try:
        level1 = os.scandir(top)
    except OSError:
        return
    with level1:
        for d1 in level1:
            if not d1.is_dir(follow_symlinks=False):
                continue
            with os.scandir(d1.path) as level2:
                for d2 in level2:
                    yield from _keys_in(d1.name, d2)


def _keys_in(prefix1: str, d2: os.DirEntry[str]) -> Iterator[tuple[OffloadKey, float]]:
    prefix2, sep, group = d2.name.partition("_g")
    if not (sep and group.isdigit() and d2.is_dir(follow_symlinks=False)):
        return
    with os.scandir(d2.path) as files:
        for f in files:
            stem, _dot, ext = f.name.rpartition(".")
            if ext != "bin" or not stem.startswith(prefix1 + prefix2):
                continue    # a store's file written aside, or not ours
            try:
                block_hash = bytes.fromhex(stem)
                mtime = f.stat().st_mtime
            except (ValueError, OSError):
                continue
            yield make_offload_key(block_hash, int(group)), mtime
