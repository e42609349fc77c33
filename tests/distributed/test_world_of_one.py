"""yscv.distributed in one process (no mpiexec): a world of one, mpi4py never
imported; DistributedSampler against PyTorch's; the backward-end hook."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

import yscv
import yscv.distributed as dist
import yscv.nn as nn
from _launch import ROOT

LAUNCH_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


def _python(code: str, **env_extra) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    env["PYTHONPATH"] = str(ROOT)
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env, cwd=str(ROOT))


# ------------------------------------------------------------------ the world
def test_init_timeout_is_checked_and_set_by_each_call():
    old = dist.timeout()
    try:
        dist.init(timeout=5)
        assert dist.timeout() == 5.0 and isinstance(dist.timeout(), float)
        dist.rank(), dist.world_size(), dist.barrier()   # joining again keeps it
        assert dist.timeout() == 5.0
        for bad in (0, -1.5, float("inf"), float("nan"), "3", True):
            with pytest.raises(ValueError, match=r"init: timeout must be a positive number"):
                dist.init(timeout=bad)
            assert dist.timeout() == 5.0                 # unchanged
        dist.init(timeout=None)
        assert dist.timeout() is None
        dist.init()
        assert dist.timeout() == 1800.0
        assert issubclass(dist.DistributedError, yscv.AutogradError)
        assert dist.DistributedError is yscv.DistributedError
    finally:
        dist.init(timeout=old)


def test_world_of_one_without_mpiexec_never_imports_mpi4py():
    proc = _python(
        "import sys, numpy as np, yscv, yscv.distributed as d\n"
        "assert not d.is_initialized()\n"
        "d.init(); d.init()\n"
        "assert d.is_initialized() and (d.rank(), d.world_size()) == (0, 1)\n"
        "d.barrier()\n"
        "a = np.arange(3.0)\n"
        "assert d.all_reduce(a, 'mean') is a and d.broadcast(a) is a\n"
        "assert [x.tolist() for x in d.all_gather(a)] == [[0.0, 1.0, 2.0]]\n"
        "assert 'mpi4py' not in sys.modules, 'mpi4py imported'\n"
        "print('fine')\n")
    assert proc.returncode == 0 and "fine" in proc.stdout, proc.stderr


def test_trainer_in_one_process_does_not_load_distributed():
    proc = _python(
        "import sys, numpy as np, yscv, yscv.nn as nn, yscv.optim as optim\n"
        "from yscv.train import Trainer\n"
        "m = nn.Linear(3, 2); t = Trainer(m, 'cross_entropy', optim.SGD(m.parameters(), lr=0.1),"
        " progress=False)\n"
        "t.fit((np.ones((4, 3), np.float32), np.array([0, 1, 0, 1])), epochs=1, batch_size=2)\n"
        "import tempfile, os\n"
        "yscv.save_checkpoint(os.path.join(tempfile.mkdtemp(), 'c.safetensors'), model=m)\n"
        "assert 'yscv.distributed' not in sys.modules and 'mpi4py' not in sys.modules\n"
        "print('fine')\n")
    assert proc.returncode == 0 and "fine" in proc.stdout, proc.stderr


@pytest.mark.parametrize("var", ["PMI_SIZE", "OMPI_COMM_WORLD_SIZE"])
def test_missing_mpi4py_in_a_launched_world_says_how_to_install(var):
    proc = _python(
        "import sys\n"
        "sys.modules['mpi4py'] = None   # as if not installed\n"
        "import yscv.distributed as d\n"
        "try:\n"
        "    d.init()\n"
        "except ImportError as e:\n"
        "    print('IMPORT_ERROR', e)\n", **{var: "2"})
    assert proc.returncode == 0, proc.stderr
    assert "IMPORT_ERROR" in proc.stdout
    assert 'pip install mpi4py mpich' in proc.stdout and "2 processes" in proc.stdout


def test_collectives_are_identities_and_check_their_arguments():
    dist.init()
    for dt in (np.float32, np.float64, np.int32, np.int64):
        a = np.arange(6, dtype=dt).reshape(2, 3)
        before = a.copy()
        for op in ("sum", "max", "min") + (("mean",) if a.dtype.kind == "f" else ()):
            assert dist.all_reduce(a, op) is a and np.array_equal(a, before)
        assert dist.broadcast(a, root=0) is a and np.array_equal(a, before)
        got = dist.all_gather(a)
        assert len(got) == 1 and np.array_equal(got[0], a) and got[0] is not a
    with pytest.raises(ValueError, match="all_reduce.*'avg'"):
        dist.all_reduce(np.zeros(2), "avg")
    with pytest.raises(TypeError, match="all_reduce.*list"):
        dist.all_reduce([1.0])
    with pytest.raises(TypeError, match="mean.*int32"):
        dist.all_reduce(np.zeros(2, np.int32), "mean")
    with pytest.raises(TypeError, match="complex64"):
        dist.broadcast(np.zeros(2, np.complex64))
    with pytest.raises(ValueError, match="C-contiguous"):
        dist.all_reduce(np.zeros((2, 4))[:, ::2])
    ro = np.zeros(3)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        dist.broadcast(ro)
    with pytest.raises(ValueError, match="root 1"):
        dist.broadcast(np.zeros(2), root=1)
    with pytest.raises(TypeError, match="root"):
        dist.broadcast(np.zeros(2), root=0.0)


# ------------------------------------------------------------- backward hook
def test_backward_end_hook_runs_once_after_parameter_grads_and_can_be_removed():
    p = nn.Parameter(np.array([1.0, 2.0], np.float32))
    g = yscv.Graph()
    seen = []

    def fn(graph):
        assert graph is g
        seen.append(None if p.grad is None else p.grad.copy())

    handle = g.register_backward_end_hook(fn)
    g.backward(g.sum(g.mul(g.param(p), 3.0)))
    assert len(seen) == 1 and np.array_equal(seen[0], [3.0, 3.0])   # after accumulation
    g.backward(g.sum(g.param(p)))
    assert len(seen) == 2 and np.array_equal(seen[1], [4.0, 4.0])
    handle.remove()
    g.backward(g.sum(g.param(p)))
    assert len(seen) == 2
    with pytest.raises(TypeError, match="register_backward_end_hook"):
        g.register_backward_end_hook(42)


def test_backward_end_hook_not_run_when_backward_fails():
    g = yscv.Graph()
    calls = []
    g.register_backward_end_hook(lambda graph: calls.append(1))
    x = g.variable(np.ones(3))
    with pytest.raises(yscv.NonScalarTargetError):
        g.backward(g.mul(x, 2.0))
    assert calls == []


# ---------------------------------------------------------------------- DDP
def _mlp():
    yscv.manual_seed(3)
    return nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))


def test_ddp_in_one_process_is_the_module():
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    plain, wrapped = _mlp(), dist.DistributedDataParallel(_mlp())
    assert isinstance(wrapped.module, nn.Sequential)
    assert list(wrapped.state_dict()) == list(plain.state_dict())
    for m in (plain, wrapped):
        g = yscv.Graph()
        g.backward(g.sum(m(g, g.constant(x))))
    for p, q in zip(plain.parameters(), wrapped.parameters()):
        assert np.array_equal(p.grad, q.grad)
    with wrapped.no_sync():
        g = yscv.Graph()
        g.backward(g.sum(wrapped(g, g.constant(x))))
    for p, q in zip(plain.parameters(), wrapped.parameters()):
        np.testing.assert_allclose(q.grad, 2 * p.grad, rtol=1e-6)
    assert wrapped.training and wrapped.eval() is wrapped and not wrapped.module.training
    with pytest.raises(TypeError, match="DistributedDataParallel"):
        dist.DistributedDataParallel(np.zeros(3))


def test_ddp_hook_does_not_keep_a_finished_graph_alive():
    # a parameter-free module: binding parameters (g.param) is the engine's
    # business; this checks that the wrapper's backward-end hook adds no cycle
    model = dist.DistributedDataParallel(nn.Tanh())
    x = np.ones((2, 4))
    gc.collect()
    gc.disable()
    try:
        g = yscv.Graph()
        loss = g.sum(model(g, g.variable(x)))
        assert len(g._end_hooks) == 1
        model(g, g.variable(x))                       # hooked once per graph
        assert len(g._end_hooks) == 1
        g.backward(loss)
        ref = weakref.ref(g)
        del g, loss
        assert ref() is None, "a reference cycle keeps the graph alive"
    finally:
        gc.enable()


# ------------------------------------------------------------------ sampler
CASES = [(n, w, drop) for n in (1, 2, 5, 10, 11, 17) for w in (1, 2, 3, 4) for drop in (False, True)]


@pytest.mark.parametrize("n,world,drop_last", CASES)
def test_sampler_equals_pytorch_without_shuffle(n, world, drop_last):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DistributedSampler as TorchSampler

    for r in range(world):
        ours = dist.DistributedSampler(n, num_replicas=world, rank=r, shuffle=False,
                                       drop_last=drop_last)
        theirs = TorchSampler(range(n), num_replicas=world, rank=r, shuffle=False,
                              drop_last=drop_last)
        assert list(ours) == list(theirs), (n, world, r, drop_last)
        assert len(ours) == len(theirs)
    del torch


@pytest.mark.parametrize("n,world,drop_last", [(10, 3, False), (10, 3, True), (2, 4, False),
                                                 (16, 4, False)])
def test_sampler_shuffle_properties(n, world, drop_last):
    def shards(epoch, seed=0):
        out = []
        for r in range(world):
            s = dist.DistributedSampler(n, num_replicas=world, rank=r, seed=seed,
                                        drop_last=drop_last)
            s.set_epoch(epoch)
            out.append(list(s))
        return out

    per = len(dist.DistributedSampler(n, num_replicas=world, rank=0, drop_last=drop_last))
    for epoch in (0, 1, 2):
        sh = shards(epoch)
        assert all(len(s) == per for s in sh)
        # the global list is one permutation of range(n), the same on every rank,
        # padded by wrapping (or cut), and rank r took every world-th index from r
        glob = [sh[i % world][i // world] for i in range(per * world)]
        perm = np.random.default_rng(epoch).permutation(n).tolist()
        padded = (perm * (per * world // n + 1))[:per * world]
        assert glob == padded
        assert shards(epoch) == sh                               # deterministic
    assert shards(0) != shards(1) or n <= 2                      # epoch dependence
    assert shards(0, seed=1) != shards(0) or n <= 2


def test_sampler_state_and_bad_arguments():
    s = dist.DistributedSampler(10, num_replicas=2, rank=1)
    s.set_epoch(4)
    t = dist.DistributedSampler(10, num_replicas=2, rank=1)
    t.load_state_dict(s.state_dict())
    assert t.epoch == 4 and list(t) == list(s)
    assert len(dist.DistributedSampler(range(7))) == 7        # a sized dataset; this world
    with pytest.raises(ValueError, match="rank 2"):
        dist.DistributedSampler(10, num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="num_replicas"):
        dist.DistributedSampler(10, num_replicas=0)
    with pytest.raises(TypeError, match="n must be an int"):
        dist.DistributedSampler("10")
    with pytest.raises(ValueError, match="seed"):
        dist.DistributedSampler(10, seed=-1)
    with pytest.raises(ValueError, match="epoch"):
        s.set_epoch(-1)
    with pytest.raises(ValueError, match="load_state_dict"):
        s.load_state_dict({})


def _run_stage(samplers, steps, batch):
    """Each sampler (one per rank) trains ``steps`` batches: the indices used."""
    used = []
    for s in samplers:
        idx = s.indices()[:steps * batch]
        s.advance(len(idx))
        used.append(idx.tolist())
    return used


def _merged_state(samplers):
    """What state_dict() gathers on a live world, from simulated ranks."""
    st = samplers[0].state_dict()
    counts = [s.consumed for s in samplers]
    st["progress"] = [list(p) for p in samplers[0]._stages] + \
        ([[len(samplers), counts]] if any(counts) else [])
    return st


@pytest.mark.parametrize("n,drop_last", [(42, False), (43, False), (10, False), (43, True)])
def test_sampler_elastic_rest_of_the_epoch_over_new_worlds(n, drop_last):
    """2 ranks consume part of epoch 5, then 3 ranks part of the rest, then 1
    rank the remainder: every sample of the epoch once (the padding copies
    of each stage aside), and the next epoch is split as usual."""
    perm = np.random.default_rng(7 + 5).permutation(n)
    epoch_samples = perm[:dist.DistributedSampler(n, 2, 0, seed=7, drop_last=drop_last)
                         .total_size] if drop_last else perm
    seen, state = [], None
    for world, steps in ((2, 2), (3, 1), (1, None)):
        samplers = [dist.DistributedSampler(n, num_replicas=world, rank=r, seed=7,
                                            drop_last=drop_last) for r in range(world)]
        for s in samplers:
            if state is not None:
                s.load_state_dict(state)
            s.set_epoch(5)                        # the resumed epoch keeps its position
        assert len({len(s) for s in samplers}) == 1
        used = _run_stage(samplers, steps if steps is not None else 10**6, 2)
        seen += [i for u in used for i in u]
        state = _merged_state(samplers)
    assert set(seen) >= set(epoch_samples.tolist())
    if not drop_last:
        assert set(seen) == set(range(n))
    # repeats only from padding: at most world - 1 per stage
    assert len(seen) - len(set(seen)) <= 1 + 2 + 0
    # the last stage (1 rank) consumed the whole rest: the epoch is complete
    done = dist.DistributedSampler(n, num_replicas=4, rank=3, seed=7, drop_last=drop_last)
    done.load_state_dict(state)
    assert list(done) == [] and len(done) == 0
    fresh = dist.DistributedSampler(n, num_replicas=3, rank=1, seed=7, drop_last=drop_last)
    fresh.load_state_dict(state)
    fresh.set_epoch(6)
    ref = dist.DistributedSampler(n, num_replicas=3, rank=1, seed=7, drop_last=drop_last)
    ref.set_epoch(6)
    assert list(fresh) == list(ref) and len(fresh) == len(ref)


def test_sampler_same_world_continues_in_place_and_checks_states():
    a = [dist.DistributedSampler(42, 2, r, seed=3) for r in range(2)]
    whole = [s.indices().tolist() for s in a]
    _run_stage(a, 3, 4)
    st = _merged_state(a)
    assert st["progress"] == [[2, [12, 12]]] and st["epoch"] == 0
    b = dist.DistributedSampler(42, 2, 1, seed=3)
    b.load_state_dict(st)
    assert b.indices().tolist() == whole[1][12:] and len(b) == 21
    with pytest.raises(ValueError, match=r"seed=3 \(this sampler: 4\)"):
        dist.DistributedSampler(42, 2, 1, seed=4).load_state_dict(st)
    with pytest.raises(ValueError, match="progress"):
        b.load_state_dict(dict(st, progress=[[2, [1]]]))
    with pytest.raises(ValueError, match="exceed"):
        b.load_state_dict(dict(st, progress=[[2, [22, 0]]]))
    assert b.indices().tolist() == whole[1][12:]          # unchanged by the refusals
    with pytest.raises(ValueError, match="exceed"):
        b.advance(10)
    b.load_state_dict({"epoch": 2})                       # the old format: an epoch's start
    assert b.epoch == 2 and len(list(b)) == 21


_SAMPLER_CORRUPTIONS = [
    ("not a dict", [3], r"state must be a dict"),
    ("None", None, r"state must be a dict"),
    ("the epoch alone", 3, r"state must be a dict"),
    ("epoch missing", {}, r"state lacks 'epoch'"),
    ("epoch misspelt", {"epochs": 3}, r"state lacks 'epoch'"),
    ("unknown key", {"epoch": 3, "seeds": 0}, r"unknown key\(s\) 'seeds'"),
    ("seed a string", {"epoch": 3, "seed": "0"}, r"'seed' must be an int, got '0'"),
    ("shuffle an int", {"epoch": 3, "shuffle": 1}, r"'shuffle' must be a bool, got 1"),
    ("epoch a string", {"epoch": "3"}, r"'epoch' must be an int >= 0, got '3'"),
    ("epoch a float", {"epoch": 3.0}, r"'epoch' must be an int >= 0, got 3.0"),
    ("epoch a bool", {"epoch": True}, r"'epoch' must be an int >= 0, got True"),
    ("epoch None", {"epoch": None}, r"'epoch' must be an int >= 0, got None"),
    ("epoch a list", {"epoch": [3]}, r"'epoch' must be an int >= 0, got \[3\]"),
    ("epoch negative", {"epoch": -1}, r"'epoch' must be an int >= 0, got -1"),
]


@pytest.mark.parametrize("what,state,match", _SAMPLER_CORRUPTIONS,
                         ids=[c[0] for c in _SAMPLER_CORRUPTIONS])
def test_sampler_corrupted_state_raises_value_error_naming_the_key(what, state, match):
    s = dist.DistributedSampler(10, num_replicas=2, rank=1)
    s.set_epoch(2)
    before = list(s)
    with pytest.raises(ValueError, match="DistributedSampler.load_state_dict: " + match) as info:
        s.load_state_dict(state)
    assert type(info.value) is ValueError
    assert s.epoch == 2 and list(s) == before
    s.load_state_dict({"epoch": np.int64(5)})   # a NumPy int is an int
    assert s.epoch == 5 and type(s.epoch) is int


def test_single_process_checkpoint_keeps_the_format(tmp_path):
    from yscv.state import read_checkpoint_metadata

    path = yscv.save_checkpoint(tmp_path / "c.safetensors", model=_mlp())
    assert "rng_states" not in read_checkpoint_metadata(path)
    # a DistributedDataParallel model is saved as its module
    path = yscv.save_checkpoint(tmp_path / "d.safetensors",
                                model=dist.DistributedDataParallel(_mlp()))
    assert read_checkpoint_metadata(path)["model"]["class"] == "Sequential"
    yscv.load_checkpoint(path, model=dist.DistributedDataParallel(_mlp()))


def test_openblas_threads_are_set_through_ctypes():
    from yscv import runtime

    before = runtime.blas_threads()
    if before is None:   # a NumPy build without a bundled OpenBLAS: nothing to set
        assert runtime.set_blas_threads(1) is False
        return
    try:
        assert runtime.set_blas_threads(1) is True
        assert runtime.blas_threads() == 1
    finally:
        runtime.set_blas_threads(before)
    assert runtime.blas_threads() == before
