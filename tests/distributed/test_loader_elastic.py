"""Elastic resume of a DataLoader with a DistributedSampler by the plain API
(``DataLoader.load_state_dict``, ``load_checkpoint(..., data=loader)``):
saved on W ranks, loaded on W' ranks, the rest of the interrupted epoch is
the samples no rank had consumed, split over W' with none lost or repeated.
Checked under ``mpiexec`` and simulated in one process (explicit
``num_replicas`` and ``rank``)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from _launch import HAVE_MPI4PY, mpiexec, ok, tagged

from yscv.data import DataLoader, TensorDataset
from yscv.distributed import DistributedSampler


def _loader(n, world, rank, batch_size=4, drop_last=False):
    return DataLoader(TensorDataset(np.arange(n)), batch_size=batch_size,
                      sampler=DistributedSampler(n, num_replicas=world, rank=rank, seed=5,
                                                 drop_last=drop_last))


def _first(n, world, k, batch_size=4, drop_last=False):
    """Each of ``world`` simulated ranks hands out ``k`` batches of epoch 0:
    (the samples handed out, each rank's state_dict())."""
    seen, states = [], []
    for r in range(world):
        loader = _loader(n, world, r, batch_size, drop_last)
        batches = iter(loader)
        for _ in range(k):
            seen += next(batches)[0].tolist()
        states.append(loader.state_dict())
    return seen, states


def _rest(n, world, state, batch_size=4, drop_last=False):
    """Per simulated rank of ``world``: the samples of the rest of the epoch
    and of the next epoch after ``load_state_dict(state)``."""
    out = []
    for r in range(world):
        loader = _loader(n, world, r, batch_size, drop_last)
        loader.load_state_dict(json.loads(json.dumps(state)))
        rest = [i for (b,) in loader for i in b.tolist()]
        nxt = [i for (b,) in loader for i in b.tolist()]
        out.append((rest, nxt))
    return out


@pytest.mark.parametrize("new", [1, 3, 4])
def test_simulated_resume_on_another_world_consumes_each_sample_once(new):
    seen, states = _first(48, 2, 3)
    assert all(s == states[0] for s in states) and len(seen) == 24
    res = _rest(48, new, states[0])
    rest = [i for ranks_rest, _ in res for i in ranks_rest]
    assert sorted(seen + rest) == list(range(48))          # none lost, none repeated
    assert len({len(x) for x, _ in res}) == 1              # an equal share per rank
    for r, (_, nxt) in enumerate(res):                     # the next epoch: W' as usual
        s = DistributedSampler(48, num_replicas=new, rank=r, seed=5)
        s.set_epoch(1)
        assert nxt == s.indices().tolist()


def test_simulated_resume_twice_across_three_worlds():
    """2 ranks -> 3 ranks (one more batch each, saved again) -> 1 rank."""
    seen, states = _first(48, 2, 2)                        # 16 consumed
    mid = []
    for r in range(3):
        loader = _loader(48, 3, r)
        loader.load_state_dict(states[0])
        mid += next(iter(loader))[0].tolist()              # 12 more
        state = loader.state_dict()
    (rest, _), = _rest(48, 1, state)
    assert len(rest) == 20 and sorted(seen + mid + rest) == list(range(48))


def test_simulated_resume_pads_an_uneven_rest_and_keeps_the_batches_of_a_short_share():
    """50 samples over 2 ranks (25 each, in 7 batches, the last of 1): after 6
    batches each, the 2 samples left are padded by wrapping over 3 ranks;
    with the sampler's drop_last, the samples cut from the epoch stay cut."""
    seen, states = _first(50, 2, 6)                        # 2 * 24 consumed
    res = _rest(50, 3, states[0])
    rest = [i for x, _ in res for i in x]
    assert set(seen + rest) == set(range(50)) and len(rest) == 3
    seen, states = _first(50, 4, 2, drop_last=True)        # 8 of 12 per rank, 48 in the epoch
    res = _rest(50, 2, states[0], drop_last=True)
    rest = [i for x, _ in res for i in x]
    epoch = []
    for r in range(4):
        s = DistributedSampler(50, num_replicas=4, rank=r, seed=5, drop_last=True)
        epoch += s.indices().tolist()
    assert len(rest) == 16 and sorted(seen + rest) == sorted(epoch)


def test_same_world_resume_is_unchanged():
    seen, states = _first(48, 2, 3)
    for r, (rest, _) in enumerate(_rest(48, 2, states[0])):
        full = _loader(48, 2, r)
        assert rest == [i for (b,) in full for i in b.tolist()][12:]


def test_a_bad_sampler_state_on_another_world_is_refused_and_changes_nothing():
    _, states = _first(48, 2, 3)
    bad = dict(states[0], sampler=dict(states[0]["sampler"], progress=[[2, [99, 99]]]))
    loader = _loader(48, 3, 0)
    before = loader.state_dict()
    with pytest.raises(ValueError, match="DataLoader.load_state_dict: sampler"):
        loader.load_state_dict(bad)
    assert loader.state_dict() == before


def test_advanced_state_adds_to_the_stage_of_its_world_and_caps_at_the_share():
    from yscv.distributed.sampler import advanced_state

    st = DistributedSampler(48, num_replicas=2, rank=0, seed=5).state_dict()
    assert advanced_state(st, 0) == st
    one = advanced_state(st, 5)
    assert one["progress"] == [[2, [5, 5]]] and st["progress"] == []
    assert advanced_state(one, 30)["progress"] == [[2, [24, 24]]]     # 24 per rank at most
    moved = dict(st, progress=[[3, [4, 4, 4]]])                        # resumed from 3 ranks
    assert advanced_state(moved, 2)["progress"] == [[3, [4, 4, 4]], [2, [2, 2]]]
    s = DistributedSampler(48, num_replicas=2, rank=1, seed=5)
    s.load_state_dict(advanced_state(moved, 2))
    assert len(s) == 18 and len(s.indices()) == 16                     # (48 - 12) / 2, 2 done
    for bad, match in ((dict(st, n="x"), "n"), ({"epoch": 0}, "lacks"), ([], "must be a dict")):
        with pytest.raises(ValueError, match=match):
            advanced_state(bad, 1)
    with pytest.raises(ValueError, match="k must be an int >= 0, got -1"):
        advanced_state(st, -1)


def test_a_loader_on_a_sampler_advanced_by_hand_resumes_on_another_world():
    """A sampler restored mid-epoch on its own world (progress of that world)
    under a loader: the batches the loader hands out after it add to it."""
    base = DistributedSampler(48, num_replicas=3, rank=0, seed=5).state_dict()
    start = dict(base, progress=[[3, [4, 4, 4]]])                     # 12 consumed by hand
    done = [i for r in range(3) for i in DistributedSampler(48, 3, r, seed=5).indices()[:4]]
    states = []
    for r in range(3):
        loader = _loader(48, 3, r)
        loader.sampler.load_state_dict(start)
        it = iter(loader)
        done += next(it)[0].tolist()                                   # 4 more per rank
        states.append(loader.state_dict())
    assert states[0]["sampler"]["progress"] == [[3, [4, 4, 4]]]
    (rest, _), = _rest(48, 1, states[0])
    assert sorted(done + rest) == list(range(48))


@pytest.mark.skipif(not HAVE_MPI4PY, reason="mpi4py is not installed")
def test_resume_under_mpiexec_on_3_and_1_ranks(tmp_path):
    """Saved by 2 ranks after 3 batches each; resumed on 3 and on 1 rank by
    load_checkpoint(data=) and by load_state_dict: the rest of epoch 0 is the
    24 samples not consumed, each once; epoch 1 is split over the new world.
    A loader saved by save_checkpoint(data=) before iterating does not hang."""
    def read(name, r):
        with open(tmp_path / f"{name}.rank{r}.json") as f:
            return json.load(f)

    assert tagged(ok(mpiexec("loader_elastic.py", 2, "first", tmp_path, timeout=90)),
                  "OK") == ["0 2", "1 2"]
    seen = [i for r in range(2) for i in read("first", r)["0"]]
    assert len(seen) == 24 == len(set(seen))
    for new in (3, 1):
        for how in ("resume-checkpoint", "resume-state"):
            ok(mpiexec("loader_elastic.py", new, how, tmp_path, timeout=90))
            res = [read(how, r) for r in range(new)]
            rest = [i for x in res for i in x["0"]]
            assert sorted(seen + rest) == list(range(48)), (new, how)
            for r in range(new):
                s = DistributedSampler(48, num_replicas=new, rank=r, seed=5)
                s.set_epoch(1)
                assert res[r]["1"] == s.indices().tolist()
    # the state saved before iterating (save_checkpoint took it on every rank:
    # the sampler's state_dict is a collective) resumes epoch 0 from its start
    ok(mpiexec("loader_elastic.py", 3, "resume-fresh", tmp_path, timeout=90))
    assert sorted(i for r in range(3) for i in read("resume-fresh", r)["0"]) == list(range(48))
