"""Every error of a sharded checkpoint's loader names the file it is about:
a shard whose header or data section is broken, and an index naming a
tensor in a shard that lacks it while another file of the folder (one the
index does not list) holds it."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hipfile import safetensors as hst
from hipfile.safetensors import numpy as hnp

FIRST = "model-00001-of-00002.safetensors"
SECOND = "model-00002-of-00002.safetensors"


def _checkpoint(tmp_path: Path) -> Path:
    wmap = {}
    for k, name in enumerate((FIRST, SECOND)):
        part = {f"layer{k}.w": np.full((4, 4), k, np.float32)}
        hnp.save_file(part, str(tmp_path / name))
        wmap.update({n: name for n in part})
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": wmap}))
    return index


def _break_second(tmp_path: Path, how: str) -> None:
    shard = tmp_path / SECOND
    raw = shard.read_bytes()
    if how == "short data section":
        shard.write_bytes(raw[:-3])
    else:
        shard.write_bytes(struct.pack("<Q", 2**64 - 1) + raw[8:])


LOADS = [("np", "cpu"), ("hip", 0)]


@pytest.mark.parametrize("framework,device", LOADS)
@pytest.mark.parametrize("how,says", [
    ("short data section", "the tensors cover 64 bytes of a 61-byte data section"),
    ("header length", "header length 18446744073709551615 exceeds"),
])
def test_a_broken_shard_is_named(tmp_path: Path, framework: str, device: Any, how: str,
                                 says: str) -> None:
    index = _checkpoint(tmp_path)
    _break_second(tmp_path, how)
    for source in (index, [tmp_path / FIRST, tmp_path / SECOND]):
        with pytest.raises(hst.SafetensorError) as info:
            hst.load_file(source, device, framework)
        assert str(info.value).startswith(f"{tmp_path / SECOND}: {says}")


@pytest.mark.parametrize("framework,device", LOADS)
def test_a_tensor_in_a_shard_the_index_does_not_list_is_found(
        tmp_path: Path, framework: str, device: Any) -> None:
    index = _checkpoint(tmp_path)
    unlisted = tmp_path / "model-extra.safetensors"
    hnp.save_file({"extra.w": np.ones(3, np.float32)}, str(unlisted))
    obj = json.loads(index.read_text())
    obj["weight_map"]["extra.w"] = SECOND
    index.write_text(json.dumps(obj))
    with pytest.raises(hst.SafetensorError) as info:
        hst.load_file(index, device, framework)
    text = str(info.value)
    assert text.startswith(f"{tmp_path / SECOND}: the index names tensor 'extra.w'")
    assert f"it is in {unlisted}, a file the index does not list" in text
    # without that file: in no shard the index lists
    unlisted.unlink()
    with pytest.raises(hst.SafetensorError, match="in no shard the index lists"):
        hst.load_file(index, device, framework)
