"""yscv.data: datasets, default_collate, DataLoader (PyTorch's DataLoader as the
oracle for batch contents and order), worker processes, exact mid-epoch resume."""
from __future__ import annotations

import copy
import json
import multiprocessing
import time

import numpy as np
import pytest

import yscv
from yscv.data import DataLoader, TensorDataset, default_collate

from _datasets import DictDataset, SeededSampler, SquareDataset

RNG = np.random.default_rng(0)
X = RNG.standard_normal((23, 3, 2)).astype(np.float32)
Y = RNG.integers(0, 5, size=23)


def _as_np(batch):
    """Torch batch -> same structure with NumPy arrays (for comparison)."""
    import torch
    if isinstance(batch, torch.Tensor):
        return batch.numpy()
    if isinstance(batch, dict):
        return {k: _as_np(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return [_as_np(v) for v in batch]
    return batch


def _assert_same(ours, ref):
    if isinstance(ref, dict):
        assert isinstance(ours, dict) and list(ours) == list(ref)
        for k in ref:
            _assert_same(ours[k], ref[k])
    elif isinstance(ref, list):
        assert isinstance(ours, (list, tuple)) and len(ours) == len(ref)
        for a, b in zip(ours, ref):
            _assert_same(a, b)
    else:
        assert isinstance(ours, np.ndarray)
        assert ours.dtype == ref.dtype, (ours.dtype, ref.dtype)
        np.testing.assert_array_equal(ours, ref)


def _ys(loader):
    return [np.asarray(b[1]).tolist() for b in loader]


def _no_children():
    deadline = time.monotonic() + 5
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    return multiprocessing.active_children() == []


# ------------------------------------------------------------------ datasets
def test_tensor_dataset():
    ds = TensorDataset(X, Y)
    assert len(ds) == 23
    x5, y5 = ds[5]
    np.testing.assert_array_equal(x5, X[5])
    assert y5 == Y[5]
    assert ds.arrays[0] is X  # no copy
    with pytest.raises(ValueError, match=r"lengths \[23, 22\]"):
        TensorDataset(X, Y[:22])
    with pytest.raises(ValueError, match="at least one"):
        TensorDataset()
    with pytest.raises(ValueError, match="0-d"):
        TensorDataset(np.float32(1.0))


def test_default_collate_matches_torch():
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate as torch_collate
    ds = DictDataset()
    samples = [ds[i] for i in (3, 0, 7)]
    _assert_same(default_collate(samples), _as_np(torch_collate(samples)))
    tuples = [(np.ones(2, np.float32) * i, i, 1.5 * i) for i in range(4)]
    ours = default_collate(tuples)
    assert isinstance(ours, tuple)
    _assert_same(list(ours), _as_np(torch_collate(tuples)))
    assert default_collate(["a", "b"]) == ["a", "b"] == torch_collate(["a", "b"])
    with pytest.raises(ValueError, match=r"different shapes \[\(2,\), \(3,\)\]"):
        default_collate([np.zeros(2), np.zeros(3)])
    with pytest.raises(ValueError, match="numbers of fields"):
        default_collate([(1, 2), (1,)])
    with pytest.raises(ValueError, match="non-empty"):
        default_collate([])
    assert torch is not None


# ------------------------------------------------- batches vs torch's loader
@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (4, False), (4, True), (23, True),
                                                  (30, False)])
def test_batches_equal_torch_dataloader(batch_size, drop_last):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader as TorchLoader
    from torch.utils.data import TensorDataset as TorchTensorDataset
    ours = list(DataLoader(TensorDataset(X, Y), batch_size=batch_size, drop_last=drop_last))
    ref = list(TorchLoader(TorchTensorDataset(torch.from_numpy(X), torch.from_numpy(Y)),
                           batch_size=batch_size, drop_last=drop_last))
    assert len(ours) == len(ref) == len(DataLoader(TensorDataset(X, Y), batch_size=batch_size,
                                                   drop_last=drop_last))
    for a, b in zip(ours, ref):
        assert isinstance(a, tuple) and len(a) == 2
        _assert_same(list(a), _as_np(b))


@pytest.mark.parametrize("drop_last", [False, True])
def test_sampler_list_and_mixed_samples_equal_torch(drop_last):
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader as TorchLoader
    ds = DictDataset()
    order = [4, 9, 0, 3, 3, 10, 1, 7]
    ours = list(DataLoader(ds, batch_size=3, sampler=order, drop_last=drop_last))
    ref = list(TorchLoader(ds, batch_size=3, sampler=order, drop_last=drop_last))
    assert len(ours) == len(ref) == (2 if drop_last else 3)
    for a, b in zip(ours, ref):
        _assert_same(a, _as_np(b))


def test_custom_collate_equals_torch():
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader as TorchLoader

    def collate(samples):
        return {"sum": float(sum(s[0].sum() for s in samples)), "n": len(samples),
                "labels": [int(s[1]) for s in samples]}

    ds = SquareDataset(13)
    ours = list(DataLoader(ds, batch_size=5, collate_fn=collate))
    ref = list(TorchLoader(ds, batch_size=5, collate_fn=collate))
    assert ours == ref and [b["n"] for b in ours] == [5, 5, 3]


# ------------------------------------------------------------ shuffling
def test_shuffle_is_a_permutation_per_epoch_and_reproducible():
    ds = TensorDataset(X, Y)
    loader = DataLoader(ds, batch_size=5, shuffle=True, seed=7)
    seen = []
    for _ in range(3):
        xs = np.concatenate([xb for xb, _ in loader])
        order = [int(np.flatnonzero((X == row).all(axis=(1, 2)))[0]) for row in xs]
        assert sorted(order) == list(range(23))
        seen.append(order)
    assert seen[0] != seen[1] != seen[2]
    again = DataLoader(ds, batch_size=5, shuffle=True, seed=7)
    assert [_ys(again) for _ in range(3)] == [[Y[o[s:s + 5]].tolist() for s in range(0, 23, 5)]
                                              for o in seen]
    assert _ys(DataLoader(ds, batch_size=5, shuffle=True, seed=8)) != _ys(
        DataLoader(ds, batch_size=5, shuffle=True, seed=7))


def test_seed_none_draws_from_the_library_generator():
    ds = TensorDataset(X, Y)
    yscv.manual_seed(3)
    a = DataLoader(ds, batch_size=4, shuffle=True)
    yscv.manual_seed(3)
    b = DataLoader(ds, batch_size=4, shuffle=True)
    yscv.manual_seed(4)
    c = DataLoader(ds, batch_size=4, shuffle=True)
    assert a.seed == b.seed != c.seed
    assert _ys(a) == _ys(b)


def test_abandoned_iteration_starts_the_next_epoch():
    ds = TensorDataset(X, Y)
    ref = DataLoader(ds, batch_size=4, shuffle=True, seed=1)
    epochs = [_ys(ref) for _ in range(2)]
    loader = DataLoader(ds, batch_size=4, shuffle=True, seed=1)
    first = next(iter(loader))
    assert first[1].tolist() == epochs[0][0]
    assert _ys(loader) == epochs[1]  # as PyTorch: a new iteration is a new epoch
    assert loader.epoch == 2


# ------------------------------------------------------------ workers
@pytest.mark.parametrize("num_workers", [1, 2, 3])
@pytest.mark.parametrize("tensor_dataset", [True, False])
def test_workers_give_the_same_batches_in_order(num_workers, tensor_dataset):
    ds = TensorDataset(X, Y) if tensor_dataset else SquareDataset(37)
    kw = dict(batch_size=3, shuffle=True, seed=5)
    serial = DataLoader(ds, **kw)
    parallel = DataLoader(ds, num_workers=num_workers, **kw)
    for _ in range(2):
        a, b = list(serial), list(parallel)
        assert len(a) == len(b) == len(serial)
        for ba, bb in zip(a, b):
            for fa, fb in zip(ba, bb):
                assert fa.dtype == fb.dtype
                np.testing.assert_array_equal(fa, fb)
    assert _no_children()


def test_worker_exception_is_reraised_naming_the_batch():
    loader = DataLoader(SquareDataset(20, fail_at=7), batch_size=3, num_workers=2)
    got = []
    t0 = time.monotonic()
    with pytest.raises(KeyError, match=r"batch 2 \(samples \[6, 7, 8\]\)") as info:
        for xb, _ in loader:
            got.append(xb[:, 0].tolist())
    assert "sample 7 is broken" in str(info.value) and "Traceback" in str(info.value)
    assert got == [[0, 1, 2], [3, 4, 5]]  # the batches before the failing one, as serially
    assert time.monotonic() - t0 < 30
    assert _no_children()
    with pytest.raises(KeyError, match="sample 7"):  # serially: the dataset's own error
        list(DataLoader(SquareDataset(20, fail_at=7), batch_size=3))


def test_dead_worker_raises_instead_of_hanging():
    loader = DataLoader(SquareDataset(20, exit_at=10), batch_size=3, num_workers=2)
    with pytest.raises(RuntimeError, match="exited unexpectedly with exit code 3"):
        list(loader)
    assert _no_children()


def test_workers_are_cleaned_up_when_iteration_is_abandoned():
    loader = DataLoader(SquareDataset(60), batch_size=2, num_workers=2)
    for k, _ in enumerate(loader):
        if k == 3:
            break  # the for loop drops the generator: closed by reference counting
    assert _no_children()
    it = iter(loader)
    next(it)
    assert len(multiprocessing.active_children()) == 2
    it.close()
    assert _no_children()
    it = iter(loader)
    next(it)
    del it, loader
    assert _no_children()


# ------------------------------------------------------------ state_dict
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("stop_after", [0, 3, 5, 6, 14])
def test_resume_mid_epoch_sees_the_uninterrupted_batches(shuffle, num_workers, stop_after):
    ds = TensorDataset(X, Y)
    kw = dict(batch_size=4, shuffle=shuffle, num_workers=num_workers)
    full = DataLoader(ds, seed=11 if shuffle else None, **kw)
    ref = [y for _ in range(3) for y in _ys(full)]  # 3 epochs of 6 batches
    first = DataLoader(ds, seed=11 if shuffle else None, **kw)
    got, taken = [], 0
    while taken < stop_after:
        for xb, yb in first:
            got.append(yb.tolist())
            taken += 1
            if taken == stop_after:
                break
    state = json.loads(json.dumps(first.state_dict()))  # JSON round trip
    assert state["epoch"] == stop_after // 6 and state["batches_consumed"] == stop_after % 6
    resumed = DataLoader(ds, seed=None, **kw)  # another process: another seed
    resumed.load_state_dict(state)
    while len(got) < len(ref):
        got.extend(_ys(resumed))
    assert got == ref
    assert _no_children()


def test_resume_restores_sampler_state_and_set_epoch():
    ds = SquareDataset(12)
    full = DataLoader(ds, batch_size=3, sampler=SeededSampler(12, 0))
    ref = [y for _ in range(3) for y in _ys(full)]
    assert full.sampler.epochs == [0, 1, 2]
    first = DataLoader(ds, batch_size=3, sampler=SeededSampler(12, 0))
    got = _ys(first)
    it = iter(first)
    got.append(next(it)[1].tolist())
    state = json.loads(json.dumps(first.state_dict()))
    it.close()
    sampler = SeededSampler(12, 99)
    resumed = DataLoader(ds, batch_size=3, sampler=sampler, num_workers=2)
    resumed.load_state_dict(state)
    got += _ys(resumed) + _ys(resumed)
    assert got == ref
    assert sampler.epochs == [1, 2]


def test_state_at_an_epoch_boundary_and_before_iterating():
    ds = TensorDataset(X, Y)
    loader = DataLoader(ds, batch_size=5, shuffle=True, seed=2)
    assert loader.state_dict()["epoch"] == 0 and loader.state_dict()["batches_consumed"] == 0
    it = iter(loader)
    for _ in range(5):  # every batch handed out, the generator not yet finished
        next(it)
    st = loader.state_dict()
    assert (st["epoch"], st["batches_consumed"]) == (1, 0)
    rest = list(it)
    assert rest == []
    other = DataLoader(ds, batch_size=5, shuffle=True, seed=0)
    other.load_state_dict(st)
    assert _ys(other) == _ys(loader)


def test_load_state_dict_refuses_a_mismatch_and_changes_nothing():
    ds = TensorDataset(X, Y)
    st = DataLoader(ds, batch_size=4, shuffle=True, seed=1).state_dict()
    loader = DataLoader(ds, batch_size=5, shuffle=True, seed=3)
    with pytest.raises(ValueError, match=r"batch_size=4 \(this loader: 5\)"):
        loader.load_state_dict(st)
    assert loader.seed == 3
    with pytest.raises(ValueError, match="dataset_len=23"):
        DataLoader(TensorDataset(X[:20], Y[:20]), batch_size=4, shuffle=True).load_state_dict(st)
    with pytest.raises(ValueError, match="lacks"):
        DataLoader(ds, batch_size=4).load_state_dict({"epoch": 0})
    bad = dict(st, batches_consumed=-1)
    with pytest.raises(ValueError, match="batches_consumed"):
        DataLoader(ds, batch_size=4, shuffle=True).load_state_dict(bad)
    with pytest.raises(ValueError, match="exceeds"):
        DataLoader(ds, batch_size=4, shuffle=True).load_state_dict(dict(st, batches_consumed=7))
    with pytest.raises(ValueError, match="sampler"):
        DataLoader(ds, batch_size=4, sampler=list(range(23))).load_state_dict(
            dict(st, shuffle=False, sampler={"rng": 1}))
    with pytest.raises(ValueError, match="dict"):
        loader.load_state_dict([1])


def _good_state(**kw):
    import yscv.distributed as dist

    ds = TensorDataset(X, Y)
    loader = DataLoader(ds, batch_size=4, sampler=dist.DistributedSampler(
        23, num_replicas=2, rank=1, shuffle=True, seed=5), **kw)
    for i, _ in enumerate(loader):  # a state taken mid-epoch
        if i == 1:
            break
    return loader.state_dict()


def _fresh_loader():
    import yscv.distributed as dist

    return DataLoader(TensorDataset(X, Y), batch_size=4, sampler=dist.DistributedSampler(
        23, num_replicas=2, rank=1, shuffle=True, seed=5))


# (what is corrupted, the corruption, what the message must name)
_CORRUPTIONS = [
    ("not a dict", lambda st: [st], r"state must be a dict"),
    ("a JSON string", lambda st: json.dumps(st), r"state must be a dict"),
    ("epoch missing", lambda st: {k: v for k, v in st.items() if k != "epoch"}, r"lacks \['epoch'\]"),
    ("sampler missing", lambda st: {k: v for k, v in st.items() if k != "sampler"},
     r"lacks \['sampler'\]"),
    ("unknown key", lambda st: dict(st, epochs=1), r"unknown key\(s\) 'epochs'"),
    ("epoch a string", lambda st: dict(st, epoch="0"), r"epoch must be an int >= 0, got '0'"),
    ("epoch a float", lambda st: dict(st, epoch=0.0), r"epoch must be an int >= 0"),
    ("epoch negative", lambda st: dict(st, epoch=-1), r"epoch must be an int >= 0, got -1"),
    ("epoch None", lambda st: dict(st, epoch=None), r"epoch must be an int"),
    ("batches_consumed a list", lambda st: dict(st, batches_consumed=[1]),
     r"batches_consumed must be an int >= 0"),
    ("batches_consumed beyond the epoch", lambda st: dict(st, batches_consumed=4),
     r"batches_consumed=4 exceeds the 3 batches"),
    ("batch_size a string", lambda st: dict(st, batch_size="4"), r"batch_size must be an int"),
    ("batch_size an array", lambda st: dict(st, batch_size=np.array([4, 4])),
     r"batch_size must be an int"),
    ("batch_size other", lambda st: dict(st, batch_size=5), r"batch_size=5 \(this loader: 4\)"),
    ("dataset_len a float", lambda st: dict(st, dataset_len=23.0), r"dataset_len must be an int"),
    ("dataset_len other (another length)", lambda st: dict(st, dataset_len=24),
     r"dataset_len=24 \(this loader: 23\)"),
    ("shuffle an int", lambda st: dict(st, shuffle=0), r"shuffle must be a bool, got 0"),
    ("drop_last a string", lambda st: dict(st, drop_last="False"), r"drop_last must be a bool"),
    ("seed negative", lambda st: dict(st, seed=-3), r"seed must be a non-negative int"),
    ("seed a string", lambda st: dict(st, seed="7"), r"seed must be a non-negative int"),
    ("sampler state a list", lambda st: dict(st, sampler=[0]), r"sampler: .*state must be a dict"),
    ("sampler state empty", lambda st: dict(st, sampler={}), r"sampler: .*lacks 'epoch'"),
    ("sampler epoch a string", lambda st: dict(st, sampler={"epoch": "0"}),
     r"sampler: .*'epoch' must be an int >= 0, got '0'"),
    ("sampler epoch negative", lambda st: dict(st, sampler={"epoch": -2}),
     r"sampler: .*'epoch' must be an int >= 0, got -2"),
    ("sampler epoch a bool", lambda st: dict(st, sampler={"epoch": True}),
     r"sampler: .*'epoch' must be an int"),
    ("sampler unknown key", lambda st: dict(st, sampler={"epoch": 0, "seeds": 1}),
     r"sampler: .*unknown key\(s\) 'seeds'"),
    ("sampler of another seed", lambda st: dict(st, sampler={"epoch": 0, "seed": 1}),
     r"sampler: .*saved with seed=1"),
]


@pytest.mark.parametrize("what,corrupt,match", _CORRUPTIONS, ids=[c[0] for c in _CORRUPTIONS])
def test_corrupted_state_raises_value_error_naming_the_key(what, corrupt, match):
    st = _good_state()
    loader = _fresh_loader()
    before = (loader.state_dict(), loader.sampler.state_dict(), loader.seed)
    with pytest.raises(ValueError, match=match) as info:
        loader.load_state_dict(corrupt(copy.deepcopy(st)))
    assert type(info.value) is ValueError
    assert (loader.state_dict(), loader.sampler.state_dict(), loader.seed) == before
    loader.load_state_dict(st)  # the good state still loads: same batches as the saved run
    assert _ys(loader) == _ys(_good_loader_rest())


def _good_loader_rest():
    import yscv.distributed as dist

    loader = DataLoader(TensorDataset(X, Y), batch_size=4, sampler=dist.DistributedSampler(
        23, num_replicas=2, rank=1, shuffle=True, seed=5))
    it = iter(loader)
    for _ in range(2):
        next(it)
    return _Rest(it)


class _Rest:
    """What an iterator still yields, with a loader's interface for _ys."""

    def __init__(self, it):
        self.it = it

    def __iter__(self):
        return self.it


def test_a_custom_samplers_type_error_becomes_a_value_error():
    loader = DataLoader(TensorDataset(X, Y), batch_size=4, sampler=SeededSampler(23, 0))
    st = loader.state_dict()
    with pytest.raises(ValueError, match=r"sampler: this loader's sampler refused .*TypeError"):
        loader.load_state_dict(dict(st, sampler={"rng": 1}))


# ------------------------------------------------------------ bad arguments
@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(batch_size=0), ValueError, "batch_size"),
    (dict(batch_size=-2), ValueError, "batch_size"),
    (dict(batch_size=2.0), TypeError, "batch_size"),
    (dict(batch_size=True), TypeError, "batch_size"),
    (dict(shuffle=1), TypeError, "shuffle"),
    (dict(drop_last="no"), TypeError, "drop_last"),
    (dict(shuffle=True, sampler=[0, 1]), ValueError, "mutually exclusive"),
    (dict(sampler=5), TypeError, "sampler"),
    (dict(collate_fn=3), TypeError, "collate_fn"),
    (dict(num_workers=-1), ValueError, "num_workers"),
    (dict(num_workers=1.5), TypeError, "num_workers"),
    (dict(seed=-1), ValueError, "seed"),
    (dict(seed="a"), ValueError, "seed"),
    (dict(prefetch_factor=0), ValueError, "prefetch_factor"),
    (dict(multiprocessing_context="thread"), ValueError, "multiprocessing_context"),
    (dict(multiprocessing_context=3), TypeError, "multiprocessing_context"),
])
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        DataLoader(TensorDataset(X, Y), **kwargs)


def test_bad_dataset_and_len_without_sampler_len():
    with pytest.raises(TypeError, match="__len__ and __getitem__"):
        DataLoader([1, 2, 3].__iter__())
    loader = DataLoader(SquareDataset(5), sampler=iter([0, 1, 2]))
    with pytest.raises(TypeError, match="__len__"):
        len(loader)


def test_spawned_workers_give_the_same_batches():
    ds = TensorDataset(X, Y)
    serial = list(DataLoader(ds, batch_size=4, shuffle=True, seed=3))
    spawned = list(DataLoader(ds, batch_size=4, shuffle=True, seed=3, num_workers=2,
                              multiprocessing_context="spawn"))
    assert len(serial) == len(spawned) == 6
    for a, b in zip(serial, spawned):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
    assert _no_children()


def test_lazy_module():
    import subprocess
    import sys
    code = ("import sys, yscv; print('yscv.data' in sys.modules); "
            "from yscv.data import DataLoader; print(yscv.data.DataLoader is DataLoader)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "True"]


def test_unpicklable_collate_under_spawn_raises_and_leaves_no_worker():
    loader = DataLoader(TensorDataset(X, Y), batch_size=4, num_workers=2,
                        collate_fn=lambda samples: samples, multiprocessing_context="spawn")
    with pytest.raises(Exception, match="(?i)pickle"):
        list(loader)
    assert _no_children()
