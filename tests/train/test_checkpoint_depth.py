"""How deep ``extra`` and a data loader's state may nest in a checkpoint:
MAX_DEPTH levels of dicts / lists round-trip; deeper values are refused with
CheckpointError (never RecursionError) at save, and a crafted file holding
one is refused at load."""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from yscv.state.encoding import MAX_DEPTH, _checksum
from yscv.state import load_checkpoint, save_checkpoint
from yscv.errors import CheckpointError


def _nest(depth, leaf=1, kind=dict):
    """``depth`` dicts (or lists) around ``leaf``."""
    x = leaf
    for _ in range(depth):
        x = {"a": x} if kind is dict else [x]
    return x


class _State:
    def __init__(self, state=None):
        self.state, self.loaded = state, None

    def state_dict(self):
        return self.state

    def load_state_dict(self, st):
        self.loaded = st


def _rewrite_extra(path, out, extra_json: str):
    """A copy of checkpoint ``path`` whose metadata's extra is ``extra_json``
    (raw JSON text), with a valid checksum: what a crafted file looks like."""
    from safetensors.numpy import load_file, save

    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))["__metadata__"]
    tensors = load_file(path)
    meta = header["yscv.meta"]
    assert '"extra":null' in meta
    header["yscv.meta"] = meta.replace('"extra":null', f'"extra":{extra_json}')
    header["yscv.sha256"] = _checksum(header["yscv.meta"], tensors)
    out.write_bytes(save(tensors, metadata=header))
    return out


def test_max_depth_round_trips_with_arrays_and_marker_keys(tmp_path):
    assert MAX_DEPTH == 128
    leaf = np.arange(3.0)
    for kind in (dict, list):
        value = _nest(MAX_DEPTH, leaf, kind)
        got = load_checkpoint(save_checkpoint(tmp_path / "ok.safetensors", extra=value))["extra"]
        for _ in range(MAX_DEPTH):
            got = got["a"] if kind is dict else got[0]
        np.testing.assert_array_equal(got, leaf)
    # user objects that look like markers are wrapped, not counted as levels
    marker = {"__yscv_dict__": 1}
    for _ in range(MAX_DEPTH - 1):
        marker = {"__yscv_dict__": marker}
    got = load_checkpoint(save_checkpoint(tmp_path / "m.safetensors", extra=marker))["extra"]
    assert got == marker


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 800, 5000])
@pytest.mark.parametrize("kind", [dict, list])
def test_save_refuses_a_deeper_extra_naming_the_depth(tmp_path, depth, kind):
    with pytest.raises(CheckpointError, match=r"save_checkpoint: extra nests dicts / lists "
                                              r"more than 128 levels deep \(level 129 at "
                                              r"extra(\['a'\]|\[0\])"):
        save_checkpoint(tmp_path / "x.safetensors", extra=_nest(depth, kind=kind))
    assert list(tmp_path.iterdir()) == []                 # nothing written


def test_save_refuses_a_deep_data_state_and_a_value_that_contains_itself(tmp_path):
    with pytest.raises(CheckpointError, match=r"data.state_dict\(\) nests dicts / lists more "
                                              r"than 128 levels deep"):
        save_checkpoint(tmp_path / "x.safetensors", data=_State({"s": _nest(800)}))
    cyclic = {"a": []}
    cyclic["a"].append(cyclic)
    with pytest.raises(CheckpointError, match=r"more than 128 levels deep .*contains itself"):
        save_checkpoint(tmp_path / "x.safetensors", extra=cyclic)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 800])
def test_load_refuses_a_crafted_deep_extra(tmp_path, depth):
    path = save_checkpoint(tmp_path / "x.safetensors", step=3)
    bad = _rewrite_extra(path, tmp_path / "bad.safetensors", json.dumps(_nest(depth)))
    with pytest.raises(CheckpointError, match=r"holds a value nested more than 128 levels "
                                              r"deep, which save_checkpoint does not write"):
        load_checkpoint(bad)


def test_load_refuses_a_crafted_file_too_deep_for_the_json_parser(tmp_path):
    path = save_checkpoint(tmp_path / "x.safetensors", step=3)
    deep = 100_000
    bad = _rewrite_extra(path, tmp_path / "bad.safetensors", "[" * deep + "]" * deep)
    with pytest.raises(CheckpointError, match="is corrupt"):
        load_checkpoint(bad)


def test_load_refuses_a_crafted_deep_data_state_and_loads_nothing(tmp_path):
    path = save_checkpoint(tmp_path / "x.safetensors", data=_State({"epoch": 1}))
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))["__metadata__"]
    from safetensors.numpy import load_file, save

    tensors = load_file(path)
    meta = json.loads(header["yscv.meta"])
    meta["data"] = _nest(300)
    header["yscv.meta"] = json.dumps(meta)
    header["yscv.sha256"] = _checksum(header["yscv.meta"], tensors)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(save(tensors, metadata=header))
    data = _State()
    with pytest.raises(CheckpointError, match="nested more than 128 levels"):
        load_checkpoint(bad, data=data)
    assert data.loaded is None
