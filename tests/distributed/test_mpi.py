"""Multi-process tests: scripts run under ``mpiexec -n N python -m mpi4py``
(the venv's mpiexec from the mpich wheel; ``-n 3`` oversubscribes the 2-core
CI machine, which MPICH allows). The scripts never import torch (mpi4py
before torch breaks torch's MKL load)."""
from __future__ import annotations

import json
import os
import re
import shutil
import sys

import pytest

from _launch import EXAMPLE_TIMEOUT, ROOT, mpiexec, needs_mpi, ok, tagged

pytestmark = needs_mpi


@pytest.mark.parametrize("n", [2, 3])
def test_collectives_all_ops_and_dtypes_in_place(n):
    out = ok(mpiexec("collectives.py", n, timeout=60))
    assert tagged(out, "OK") == [f"{r} {n}" for r in range(n)]


@pytest.mark.parametrize("n", [2, 3])
def test_ddp_equals_one_process_on_the_global_batch(n):
    # broadcast at construction; the mean gradients have the bits of the
    # ranks' local gradients (computed in one process at the replicas'
    # parameters) summed in an allreduce's order, and equal one process on
    # the global batch within a rounding bound from float32's epsilon, the
    # reduction lengths and the per-sample gradients' magnitudes (not a
    # relative tolerance: an element near 0 where terms cancel has none);
    # replicas bit-identical, a parameter used by one rank only / by none,
    # no_sync accumulation (the local gradient, bit for bit)
    out = ok(mpiexec("ddp.py", n, timeout=60))
    assert tagged(out, "OK") == [f"{r} {n}" for r in range(n)]


def _read(folder, mode, r):
    with open(os.path.join(folder, f"{mode}.rank{r}.log")) as f:
        return f.read()


def test_checkpoint_written_by_rank0_and_resume_is_exact(tmp_path):
    runs = {}
    for mode in ("full", "first", "resume"):
        out = ok(mpiexec("ckpt_resume.py", 2, mode, tmp_path, timeout=60))
        runs[mode] = out
    for r in range(2):
        full = _read(tmp_path, "full", r).splitlines()
        tail = [ln for ln in full if ln.split()[0] in ("2", "3")]
        assert len(tail) == 12
        assert _read(tmp_path, "resume", r).splitlines() == tail
        assert _read(tmp_path, "first", r).splitlines() == full[:12]
    # the ranks drew different dropout masks (their own RNG streams were restored)
    assert _read(tmp_path, "full", 0) != _read(tmp_path, "full", 1)
    # a failed write on rank 0 raised on every rank
    errs = tagged(runs["first"], "SAVE_ERR")
    assert errs == ["0 FileNotFoundError False", "1 CheckpointError True"]


def test_trainer_data_parallel_history_and_exact_resume(tmp_path):
    out = ok(mpiexec("trainer.py", 2, tmp_path, "full", timeout=90))
    assert len(re.findall(r"^epoch \d/3 ", out, re.M)) == 3      # rank 0 prints, alone
    a, b = _read(tmp_path, "full", 0), _read(tmp_path, "full", 1)
    assert a == b                                                # same history and parameters
    assert len(json.loads(a)["steps"]) == 15
    ckpts = sorted(os.listdir(tmp_path / "ckpt"))
    assert ckpts == ["ckpt-00000004.safetensors", "ckpt-00000008.safetensors",
                     "ckpt-00000012.safetensors"]
    os.remove(tmp_path / "ckpt" / "ckpt-00000012.safetensors")   # "crash" after step 8
    out = ok(mpiexec("trainer.py", 2, tmp_path, "resume", timeout=90))
    assert "resumed from" in out and out.count("resumed from") == 1
    assert _read(tmp_path, "resume", 0) == a and _read(tmp_path, "resume", 1) == a


@pytest.mark.parametrize("launcher", ["-m mpi4py", "plain python"])
def test_a_rank_that_raises_ends_the_job(launcher, tmp_path):
    script = "raise_on_rank1.py"
    if launcher == "plain python":
        # without -m mpi4py: yscv.distributed's excepthook aborts the job
        wrapper = tmp_path / "plain.py"
        wrapper.write_text("import runpy, sys\n"
                           f"sys.argv = [{str(ROOT / 'tests/distributed/scripts' / script)!r}]\n"
                           "runpy.run_path(sys.argv[0], run_name='__main__')\n")
        proc = _run_plain(wrapper)
    else:
        proc = mpiexec(script, 2, timeout=60)
    assert proc.returncode != 0
    assert "RuntimeError: boom on rank 1" in proc.stderr + proc.stdout
    assert "unreachable" not in proc.stdout


def _run_plain(path):
    import subprocess

    from _launch import MPIEXEC

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        return subprocess.run([str(MPIEXEC), "-n", "2", sys.executable, str(path)],
                              capture_output=True, text=True, timeout=60, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail("a rank raised under plain python and the job hung")


def test_sampler_shards_under_mpiexec():
    out = ok(mpiexec("sampler.py", 3, timeout=60))
    assert tagged(out, "OK") == ["0 3", "1 3", "2 3"]


def test_readme_main_job_runs_under_mpiexec(tmp_path):
    out = ok(mpiexec(ROOT / "examples" / "train_digits_cnn.py", 2, "--quick",
                     "--checkpoint-dir", tmp_path, timeout=EXAMPLE_TIMEOUT))
    assert out.count("test accuracy") == 1                      # rank 0 prints, alone
    acc = float(re.search(r"test accuracy ([0-9.]+)", out).group(1))
    assert acc >= 0.9, out
    assert "final.safetensors" in os.listdir(tmp_path)
    shutil.rmtree(tmp_path)


def test_trainer_on_a_distributed_loader_resumes_exactly(tmp_path):
    """A data-parallel Trainer fed by a DataLoader with a DistributedSampler,
    killed after step 7 and resumed in new processes, reproduces the
    uninterrupted run's per-step losses, epoch logs and parameters on every
    rank; a DataLoader without a DistributedSampler is refused."""
    ok(mpiexec("trainer_loader.py", 2, tmp_path, "full", timeout=90))
    full = [_read(tmp_path, "full", r) for r in range(2)]
    assert full[0] == full[1] and len(json.loads(full[0])["steps"]) == 15
    out = ok(mpiexec("trainer_loader.py", 2, tmp_path, "crash", timeout=90))
    assert tagged(out, "CRASHED") == ["0 2", "1 2"]
    assert sorted(os.listdir(tmp_path / "ckpt")) == ["ckpt-00000003.safetensors",
                                                     "ckpt-00000006.safetensors"]
    ok(mpiexec("trainer_loader.py", 2, tmp_path, "resume", timeout=90))
    for r in range(2):
        assert _read(tmp_path, "resume", r) == full[r]


def test_ddp_and_trainer_refuse_ranks_with_different_parameters(tmp_path):
    """Shapes [4,6] vs [6,4], a parameter more, float64 vs float32, a frozen
    parameter on the last rank only: every rank raises DistributedError at
    construction (DistributedDataParallel and Trainer), naming the first
    difference; no hang when the counts differ."""
    out = ok(mpiexec("ddp_mismatch.py", 3, tmp_path, timeout=90))
    cases = [f"{c}{w}" for c in ("count", "dtype", "frozen", "shape")
             for w in ("DistributedDataParallel", "Trainer")]
    # by pattern: the ranks' lines can interleave within a line
    found = re.findall(r"CASE (\d) ([a-z]+(?:DistributedDataParallel|Trainer))", out)
    assert sorted(f"{r} {c}" for r, c in found) == sorted(f"{r} {c}" for r in range(3)
                                                          for c in cases)
    assert tagged(out, "OK") == ["0 3", "1 3", "2 3"]
    texts = {}
    for case in ("shape", "count", "dtype", "frozen"):
        msgs = {(tmp_path / f"{case}.DistributedDataParallel.rank{r}.txt").read_text()
                for r in range(3)}
        assert len(msgs) == 1                       # the same message on every rank
        texts[case] = msgs.pop()
    assert "parameter '0.weight' has shape (4, 6) on rank 0 but (6, 4) on rank 2" \
        in texts["shape"]
    assert ("rank 2 has 6 parameters and buffers, rank 0 has 4: entry #4 is the parameter "
            "'3.weight' of shape (2, 2) float32 on rank 2 and missing on rank 0") in texts["count"]
    assert "parameter '0.weight' has dtype float32 on rank 0 but float64 on rank 2" \
        in texts["dtype"]
    assert "parameter '2.bias' has requires_grad=True on rank 0 but False on rank 2" \
        in texts["frozen"]
    assert all("(ranks differing from rank 0: [2])" in t for t in texts.values())


@pytest.mark.parametrize("n,mode", [(2, "exit"), (3, "exit"), (2, "fewer"), (3, "fewer")])
def test_a_rank_that_stops_makes_the_others_raise_within_the_timeout(n, mode):
    """dist.init(timeout=3): the last rank leaves with sys.exit(0), or runs
    one batch fewer and ends; every other rank raises DistributedError in the
    gradient all_reduce within ~3 s (+ the 0.3 s it gives the others to
    answer), naming the missing rank; the world is then unusable (the next
    collective raises at once)."""
    proc = mpiexec("timeout.py", n, mode, timeout=60)
    out = ok(proc)
    last = n - 1
    hits = sorted(re.findall(r"TIMEOUT (\d+) (\S+) (\S+) ([0-9.]+)", out))
    assert [h[:3] for h in hits] == [(str(r), "all_reduce_(gradients)", str(last))
                                     for r in range(last)]
    for h in hits:
        assert 2.9 < float(h[3]) < 6.0, h           # the timeout, not forever
    assert sorted(re.findall(r"BROKEN (\d+)", out)) == [str(r) for r in range(last)]
    assert proc.stderr.count(f"rank(s) [{last}] of {n} did not arrive") == last
    assert (f"DONE {last} {n}" in out) == (mode == "fewer")


def _steps(folder, mode, tag, r):
    with open(os.path.join(folder, f"{mode}-{tag}.rank{r}.json")) as f:
        return json.load(f)


def test_elastic_resume_by_the_plain_api(tmp_path):
    """A checkpoint written mid-epoch by W ranks (load_checkpoint +
    DistributedSampler.load_state_dict) resumes on W' ranks: model and
    optimizer exact; the samples of the interrupted epoch consumed before and
    after the resume are exactly the epoch's permutation (none lost, none
    repeated); the next epoch is split over W' as usual; rank r < W restores
    rank r's RNG state, a new rank the documented derived one (all differ).
    On the same W, the resumed run reproduces the uninterrupted losses."""
    import numpy as np

    import yscv.distributed as dist
    from yscv.state import read_checkpoint_metadata
    from yscv.distributed._checkpoint import derived_rng_state

    for mode in ("full", "first", "resume"):
        ok(mpiexec("elastic.py", 2, mode, tmp_path, "same", timeout=90))
    for r in range(2):
        full = _steps(tmp_path, "full", "same", r)["steps"]
        assert len(full) == 12
        assert _steps(tmp_path, "first", "same", r)["steps"] + \
            _steps(tmp_path, "resume", "same", r)["steps"] == full
    for saved, new, tag in ((2, 3, "up"), (3, 2, "down")):
        ok(mpiexec("elastic.py", saved, "first", tmp_path, tag, timeout=90))
        ok(mpiexec("elastic.py", new, "resume", tmp_path, tag, timeout=90))
        first = [_steps(tmp_path, "first", tag, r) for r in range(saved)]
        res = [_steps(tmp_path, "resume", tag, r) for r in range(new)]
        before = [i for f in first for e, b, _ in f["steps"] for i in b]
        after = [i for x in res for e, b, _ in x["steps"] if e == 0 for i in b]
        assert len(before) == 24 and len(after) == 18
        assert sorted(before + after) == list(range(42))
        for r in range(new):
            s = dist.DistributedSampler(42, num_replicas=new, rank=r, seed=3)
            s.set_epoch(1)
            assert [i for e, b, _ in res[r]["steps"] if e == 1 for i in b] == s.indices().tolist()
        assert {x["digest"] for x in res} == {first[0]["digest"]}
        states = read_checkpoint_metadata(tmp_path / f"{tag}.safetensors")["rng_states"]
        assert len(states) == saved
        for r in range(new):
            want = states[r] if r < saved else derived_rng_state(states, r)
            assert res[r]["rng"] == want
        assert len({json.dumps(x["rng"], sort_keys=True) for x in res}) == new
        assert np.unique([json.dumps(x["steps"]) for x in res]).size == new


@pytest.mark.parametrize("source,saved,new", [("arrays", 2, 3), ("loader", 3, 2)])
def test_trainer_elastic_resume(tmp_path, source, saved, new):
    """A Trainer checkpoint written mid-epoch (step 3) by ``saved`` ranks
    resumes on ``new`` ranks: the interrupted epoch's samples before and after
    the resume are exactly the 48 samples; the next epoch is split over the
    new world; the replicas agree; the step count follows from the shares."""
    ok(mpiexec("trainer_elastic.py", saved, tmp_path, source, "first", timeout=90))
    out = ok(mpiexec("trainer_elastic.py", new, tmp_path, source, "resume", timeout=90))
    assert out.count("OK ") == new
    first = [_steps(tmp_path, source, "first", r) for r in range(saved)]
    res = [_steps(tmp_path, source, "resume", r) for r in range(new)]
    before = [i for f in first for s, e, b in f["steps"] if s <= 3 for i in b]
    after = [i for x in res for s, e, b in x["steps"] if e == 0 for i in b]
    assert sorted(before + after) == list(range(48))
    assert all(s > 3 for x in res for s, e, b in x["steps"])
    epoch1 = [[i for s, e, b in x["steps"] if e == 1 for i in b] for x in res]
    assert sorted(i for ids in epoch1 for i in ids) == list(range(48))
    if source == "loader":
        import yscv.distributed as dist

        for r in range(new):
            s = dist.DistributedSampler(48, num_replicas=new, rank=r, seed=9)
            s.set_epoch(1)
            assert epoch1[r] == s.indices().tolist()
    rest = 48 - 3 * 4 * saved
    steps = 3 + -(-(rest // new) // 4) + -(-(48 // new) // 4)
    assert {x["history"] for x in res} == {steps} and {x["epochs"] for x in res} == {2}
    assert len({x["digest"] for x in res}) == 1
