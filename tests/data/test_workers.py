"""DataLoader worker processes never hang: every failure in a worker reaches
the main process as an exception naming the batch and the cause, no worker
is left behind, the loader iterates again afterwards; workers start with
forkserver (not fork, which deadlocks against OpenBLAS's threads).

The scenarios that used to hang run in one child process
(tests/data/_worker_scenarios.py) under a timeout, so that a regression
fails here instead of hanging the test run."""
from __future__ import annotations

import json
import multiprocessing
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import yscv
from yscv.data import DataLoader, TensorDataset, WorkerError

from _datasets import SquareDataset

HERE = pathlib.Path(__file__).resolve().parent
SCENARIOS = ["unpicklable_sample", "local_exception", "killed_worker", "unimportable_dataset",
             "unpicklable_key", "openblas_thread", "blocked_getitem"]


def _env():
    root = str(pathlib.Path(yscv.__file__).resolve().parents[1])
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root] + [p for p in [os.environ.get("PYTHONPATH")] if p]))


@pytest.fixture(scope="module")
def scenarios():
    """Run every scenario in one process (a few seconds); their reports by name."""
    env = _env()
    try:
        out = subprocess.run([sys.executable, str(HERE / "_worker_scenarios.py"), *SCENARIOS],
                             cwd=HERE, env=env, capture_output=True, text=True, timeout=240)
        stdout, stderr = out.stdout, out.stderr
    except subprocess.TimeoutExpired as exc:  # the child is killed: report what it printed
        stdout, stderr = exc.stdout or "", exc.stderr or ""
        stdout = stdout.decode() if isinstance(stdout, bytes) else stdout
        stderr = stderr.decode() if isinstance(stderr, bytes) else stderr
    reports = {}
    for line in stdout.splitlines():
        if line.startswith("{"):
            rep = json.loads(line)
            reports[rep["scenario"]] = rep
    return reports, stderr


def _report(scenarios, name):
    reports, stderr = scenarios
    assert name in reports, f"scenario {name} hung or crashed; its stderr:\n{stderr[-3000:]}"
    return reports[name]


def test_unpicklable_sample_raises_naming_the_batch(scenarios):
    r = _report(scenarios, "unpicklable_sample")
    assert r["type"] == "WorkerError" and "RuntimeError" in r["bases"]
    assert "AutogradError" in r["bases"]
    assert "batch 2 (samples [4, 5])" in r["message"]
    assert "does not pickle" in r["message"] and "<lambda>" in r["message"]
    assert r["batch"] == 2 and r["worker"] in (0, 1)
    assert r["before"] == [[0, 1], [2, 3]]  # the batches before it are handed out
    assert r["children"] == 0 and r["again"] is True


def test_local_exception_class_raises_naming_it(scenarios):
    r = _report(scenarios, "local_exception")
    assert r["type"] == "WorkerError"
    assert r["original_type"] == "_datasets.LocalErrorAt.__getitem__.<locals>.LocalError"
    assert f"worker {r['worker']} raised {r['original_type']} while loading batch 2 " \
           "(samples [6, 7, 8]): sample 7 is broken" in r["message"]
    assert "Traceback" in r["message"] and 'raise LocalError(f"sample {i}' in r["message"]
    assert r["batch"] == 2 and r["children"] == 0 and r["again"] is True


def test_killed_worker_raises(scenarios):
    r = _report(scenarios, "killed_worker")
    assert r["type"] == "WorkerError"
    assert "exited unexpectedly with exit code -9 (killed by SIGKILL)" in r["message"]
    assert r["worker"] in (0, 1) and r["batch"] >= 3
    assert r["children"] == 0 and r["again"] is True


def test_dataset_a_worker_cannot_import_raises(scenarios):
    r = _report(scenarios, "unimportable_dataset")
    assert r["type"] == "WorkerError" and r["original_type"] == "ModuleNotFoundError"
    assert "could not rebuild the dataset" in r["message"]
    assert "yscv_test_phantom" in r["message"] and r["children"] == 0


def test_unpicklable_sampler_key_raises(scenarios):
    r = _report(scenarios, "unpicklable_key")
    assert r["type"] == "TypeError"
    assert "keys of batch 1 do not pickle" in r["message"] and r["children"] == 0


def test_workers_start_while_a_thread_runs_openblas(scenarios):
    r = _report(scenarios, "openblas_thread")
    assert r["same"] is True            # 4 epochs, the batches of num_workers=0
    assert r["products_after"] >= 2     # the thread's BLAS still runs afterwards
    assert r["thread_alive"] is False and r["blas_ok"] is True and r["children"] == 0


def test_timeout_raises_on_a_getitem_that_blocks_and_stops_the_workers(scenarios):
    r = _report(scenarios, "blocked_getitem")
    assert r["type"] == "WorkerError" and "RuntimeError" in r["bases"]
    assert r["message"].startswith("DataLoader timed out after 1.0 seconds waiting for "
                                   "batch 2 (samples [4, 5])")
    assert r["batch"] == 2 and r["worker"] is None
    assert r["before"] == [[[0, 0], [1, 2]], [[2, 4], [3, 6]]]  # the batches before it
    assert 1.0 <= r["seconds"] < 30 and r["children"] == 0
    kind, message, batch, children = r["every"]
    assert kind == "WorkerError" and batch == 0 and children == 0
    assert message.startswith("DataLoader timed out after 0.5 seconds waiting for batch 0")
    assert r["again"] is True


@pytest.mark.parametrize("kwargs,exc,match", [
    ({"timeout": -1, "num_workers": 1}, ValueError, r"timeout must be .* >= 0, got -1"),
    ({"timeout": float("nan"), "num_workers": 1}, ValueError, r"timeout must be .*got nan"),
    ({"timeout": "5", "num_workers": 1}, TypeError, r"timeout must be a number .*got '5'"),
    ({"timeout": True, "num_workers": 1}, TypeError, r"timeout must be a number .*got True"),
    ({"timeout": 2.5}, ValueError, r"timeout=2.5 needs num_workers > 0"),
])
def test_timeout_is_checked_as_pytorch(kwargs, exc, match):
    import torch.utils.data as tud

    with pytest.raises(exc, match=match):
        DataLoader(TensorDataset(np.zeros(4)), **kwargs)
    if kwargs["timeout"] == -1:  # PyTorch refuses it too
        with pytest.raises(ValueError, match="timeout option should be non-negative"):
            tud.DataLoader(np.zeros(4), **kwargs)
    if "num_workers" not in kwargs:  # PyTorch: the single-process iterator needs timeout 0
        with pytest.raises(AssertionError, match="requires timeout == 0"):
            iter(tud.DataLoader(np.zeros(4), **kwargs))
    assert DataLoader(TensorDataset(np.zeros(4)), num_workers=1, timeout=3).timeout == 3.0
    assert DataLoader(TensorDataset(np.zeros(4))).timeout == tud.DataLoader(np.zeros(4)).timeout


def test_script_without_main_guard_raises_with_the_fix(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text("import numpy as np\n"
                      "from yscv.data import DataLoader, TensorDataset\n"
                      "list(DataLoader(TensorDataset(np.arange(10.0)), batch_size=2, "
                      "num_workers=2))\n")
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    # multiprocessing's resource tracker (a process of its own) may warn about
    # the semaphores of the failed child's queue, before or after the traceback
    lines = [ln for ln in out.stderr.strip().splitlines() if "resource_tracker" not in ln]
    last = lines[-1]
    assert last.startswith("yscv.errors.WorkerError: DataLoader: worker ")
    assert "exited unexpectedly with exit code 1" in last
    assert 'if __name__ == "__main__":' in last
    # each worker, importing the script, stops at its DataLoader with yscv's
    # message (before creating any queue), not multiprocessing's bootstrap error
    assert out.stderr.count("WorkerError: DataLoader: this process is a worker that is "
                            "still importing the main script, and the script starts 2 "
                            "workers of its own.") >= 1
    assert "current process has finished its bootstrapping phase" not in out.stderr


# ------------------------------------------------------------ in this process
def test_default_start_method_is_forkserver():
    loader = DataLoader(TensorDataset(np.zeros(4)), num_workers=1)
    expected = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() \
        else multiprocessing.get_start_method()
    assert loader._ctx.get_start_method() == expected
    spawn = multiprocessing.get_context("spawn")
    assert DataLoader(TensorDataset(np.zeros(4)), multiprocessing_context=spawn)._ctx is spawn


def test_unpicklable_dataset_raises_at_iter_and_changes_nothing():
    class Local(SquareDataset):  # defined in a function: cannot be pickled
        pass

    loader = DataLoader(Local(10), batch_size=2, num_workers=2)
    before = loader.state_dict()
    with pytest.raises(TypeError, match=r"the dataset \(a .*Local\) does not pickle") as info:
        iter(loader)
    assert "'forkserver' method" in str(info.value) or "'spawn' method" in str(info.value)
    assert "top level of a module" in str(info.value) and "num_workers=0" in str(info.value)
    assert loader.state_dict() == before and loader.epoch == 0
    assert multiprocessing.active_children() == []
    with pytest.raises(TypeError, match=r"the collate_fn .*<lambda>.* does not pickle"):
        iter(DataLoader(SquareDataset(10), num_workers=1, collate_fn=lambda s: s))
    # with fork the workers inherit the dataset: no pickling needed
    if "fork" in multiprocessing.get_all_start_methods():
        got = [b[0][:, 0].tolist() for b in DataLoader(Local(6), batch_size=2, num_workers=2,
                                                         multiprocessing_context="fork")]
        assert got == [[0, 1], [2, 3], [4, 5]]


def test_worker_error_is_exported():
    assert yscv.errors.WorkerError is WorkerError
    assert issubclass(WorkerError, RuntimeError) and issubclass(WorkerError, yscv.AutogradError)
    e = WorkerError("m", worker=1, batch=2, original_type="x.Y")
    assert (e.op, e.worker, e.batch, e.original_type, str(e)) == ("DataLoader", 1, 2, "x.Y", "m")


def test_forkserver_preload_only_what_a_new_interpreter_finds_alike():
    from yscv import runtime
    assert runtime._found_alike(["numpy", "yscv_no_such_module_here"]) == ["numpy"]
    assert runtime._found_alike([]) == []
