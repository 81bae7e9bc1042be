"""Stream memory operations: the compare conditions of hipStreamWaitValue32/64."""

from __future__ import annotations

import pytest
from _streammem_calls import *  # noqa: F403

pytestmark = NEEDS_HIP_PYTHON_10


# ------------------------------------------------------------ the conditions

# (flags, mask, wait value, stores that keep it blocked, store that releases)
CASES_32 = [
    (GTE, ALL32, 5, [4, 1], 5),
    (GTE, ALL32, 5, [0], 0x7FFFFFFF),
    (EQ, ALL32, 7, [6, 8], 7),
    (AND, ALL32, 0x4, [0x3, 0x8], 0x6),
    (AND, 0xF0, 0x30, [0x0F, 0xC0], 0x1F),  # ((v & 0xF0) & 0x30) != 0
    (NOR, ALL32, 0xFFFF0000, [0x0000FFFF, 0xFFFFFFFF], 0x0000FFFE),
]
CASES_64 = [
    (GTE, ALL64, 1 << 40, [(1 << 40) - 1, 5], 1 << 40),
    (EQ, ALL64, (7 << 36) | 3, [3, 7 << 36], (7 << 36) | 3),
    (AND, ALL64, 1 << 63, [(1 << 63) - 1], (1 << 63) | 1),
    (NOR, ALL64, ALL64 ^ 1, [1], 0),
]
# Masked compares that only the emulated runtime offers (CUDA has no mask), and
# HIP's unsigned >= across the whole range (CUDA's GEQ is a cyclic compare).
EMULATED_ONLY = [
    (32, GTE, ALL32, 5, [0, 4], 0xFFFFFFFF),
    (64, GTE, ALL64, 5, [0, 4], ALL64),
    (32, GTE, 0xF0, 0x20, [0x1F, 0x0F], 0x2F),  # (v & 0xF0) >= 0x20
    (32, EQ, 0xFF, 0x07, [0x106, 0x17], 0xAB07),
    (64, EQ, 0xFFFF << 32, 0x1234 << 32, [0x1234], (0x1234 << 32) | 0xFFFF),
    (64, GTE, ALL64 ^ 0xFF, 0x100, [0xFF], 0x1FF),
]


def _check_condition(
    width: int,
    stream: object,
    mapped: Mapped,
    flags: int,
    mask: int,
    value: int,
    blocked_by: list[int],
    release: int,
) -> None:
    host, dev = mapped.word(0, width)
    marker_host, marker_dev = mapped.word(8, 32)
    store(host, blocked_by[0], width)
    assert wait_value(width, stream, dev, value, flags, mask) == E.hipSuccess
    assert write_value(32, stream, marker_dev, 1) == E.hipSuccess
    try:
        for v in blocked_by:
            store(host, v, width)
            assert stays_blocked(stream), f"released by {v:#x}"
            assert load(marker_host) == 0
    finally:
        store(host, release, width)
    assert until(lambda: idle(stream)), f"not released by {release:#x}"
    assert load(marker_host) == 1


@pytest.mark.parametrize("case", CASES_32, ids=lambda c: f"{c[0]}-{c[1]:#x}")
def test_wait_value32_conditions(stream: object, mapped: Mapped, case: tuple) -> None:  # type: ignore[type-arg]
    _check_condition(32, stream, mapped, *case)


@pytest.mark.parametrize("case", CASES_64, ids=lambda c: f"{c[0]}-{c[2]:#x}")
def test_wait_value64_conditions(stream: object, mapped: Mapped, case: tuple) -> None:  # type: ignore[type-arg]
    _check_condition(64, stream, mapped, *case)


@pytest.mark.emulated
@pytest.mark.parametrize("case", EMULATED_ONLY, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]:#x}")
def test_masked_and_full_range_compares(stream: object, mapped: Mapped, case: tuple) -> None:  # type: ignore[type-arg]
    width, flags, mask, value, blocked_by, release = case
    _check_condition(width, stream, mapped, flags, mask, value, blocked_by, release)


@pytest.mark.parametrize("width", [32, 64])
def test_condition_already_true_does_not_block(
    stream: object, mapped: Mapped, width: int
) -> None:
    host, dev = mapped.word(0, width)
    store(host, 9, width)
    all_bits = ALL32 if width == 32 else ALL64
    for flags, value in ((GTE, 9), (EQ, 9), (AND, 1), (NOR, 0)):
        assert wait_value(width, stream, dev, value, flags, all_bits) == E.hipSuccess
    assert until(lambda: idle(stream))


@pytest.mark.parametrize("width", [32, 64])
def test_nor_with_a_partial_mask_never_blocks(
    stream: object, mapped: Mapped, width: int
) -> None:
    # ~((v & mask) | (value & mask)) has the bits outside mask set: always true.
    host, dev = mapped.word(0, width)
    all_bits = ALL32 if width == 32 else ALL64
    store(host, all_bits, width)
    assert wait_value(width, stream, dev, all_bits, NOR, 0xFF) == E.hipSuccess
    assert until(lambda: idle(stream))


def test_wait_value32_reads_only_its_word(stream: object, mapped: Mapped) -> None:
    host, dev = mapped.word(1)
    neighbour, _ = mapped.word(0)
    assert wait_value(32, stream, dev, 1, EQ, ALL32) == E.hipSuccess
    try:
        store(neighbour, 1, 32)
        store(host + 4, 1, 32)
        assert stays_blocked(stream)
    finally:
        store(host, 1, 32)
    assert until(lambda: idle(stream))
