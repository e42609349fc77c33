"""examples/train_digits_cnn.py with a reduced budget: real accuracy, and an
exact resume of the CNN (checkpointed blocks, batch norm, dropout, one-cycle)."""
from __future__ import annotations

import importlib.util
import os
import pathlib

import numpy as np
import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_digits_cnn.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("train_digits_cnn", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_quick_run_reaches_accuracy_and_resumes_exactly(example, tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    args = ["--quick", "--checkpoint-dir", str(ckpt), "--checkpoint-every", "40", "--no-progress"]
    res = example.main(args)
    out, err = capsys.readouterr()
    # --no-progress: no epoch lines and no bar, but the result line
    assert "epoch " not in out and err == ""
    finals = [line for line in out.splitlines() if line.startswith("test accuracy ")]
    assert len(finals) == 1, out
    assert finals[0].startswith(f"test accuracy {res['test_accuracy']:.4f}  test loss ")
    assert res["steps"] == 5 * 23
    assert res["test_accuracy"] >= 0.93, res["test_accuracy"]
    confusion = res["confusion"]
    assert confusion.shape == (10, 10) and confusion.sum() == 360
    assert np.trace(confusion) / 360 == pytest.approx(res["test_accuracy"])
    names = sorted(os.listdir(ckpt))
    plots = ["curves.png"] if importlib.util.find_spec("matplotlib") else []
    assert names == ["ckpt-00000040.safetensors", "ckpt-00000080.safetensors", *plots,
                     "final.safetensors"]
    if plots:
        assert res["plot"] == str(ckpt / "curves.png")
        assert (ckpt / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # crash after step 40: drop the newer checkpoint, resume from step 40
    os.remove(ckpt / "ckpt-00000080.safetensors")
    again = example.main(args + ["--resume", "--plot", ""])
    assert again["plot"] is None
    assert again["history"].step_losses == res["history"].step_losses
    assert again["test_accuracy"] == res["test_accuracy"]
    assert again["test_loss"] == res["test_loss"]


def test_model_uses_activation_checkpointing_when_available(example):
    import numpy as np

    import yscv

    model = example.build_model(8)
    g = yscv.Graph()
    out = model(g, g.constant(np.zeros((2, 8, 8, 1), np.float32)))
    assert g.value(out).shape == (2, 10)
    if hasattr(yscv.Graph, "checkpoint"):
        assert len(g._segments) == 2  # the two conv blocks are checkpointed segments


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_data_is_scikit_learns_digits_and_stratified_split(example, seed):
    """The example reads scikit-learn's shipped digits without importing it;
    data and split are exactly load_digits + train_test_split(stratify=y)."""
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x = (x.reshape(-1, 8, 8, 1) / 16.0).astype(np.float32)
    want = train_test_split(x, y.astype(np.int64), test_size=0.2, random_state=seed, stratify=y)
    got = example.load_data(seed)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    # another class mix and test fraction (ties in the fractional parts)
    labels = np.repeat(np.arange(5), [7, 3, 3, 9, 4])
    tr, te = example.stratified_split(labels, test_size=0.3, seed=seed)
    want_tr, want_te = train_test_split(np.arange(len(labels)), test_size=0.3, random_state=seed,
                                        stratify=labels)
    np.testing.assert_array_equal(tr, want_tr)
    np.testing.assert_array_equal(te, want_te)


def test_example_does_not_import_scikit_learn():
    """Start-up: loading the data must not import scikit-learn (or SciPy)."""
    import subprocess
    import sys

    code = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('ex', "
            f"{str(EXAMPLE)!r}); m = importlib.util.module_from_spec(spec); "
            "spec.loader.exec_module(m); m.load_data(0); "
            "print(sorted(k for k in sys.modules if k.split('.')[0] in ('sklearn', 'scipy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_confusion_matrix_counts_pairs(example):
    got = example.confusion_matrix(np.array([0, 1, 1, 2, 9]), np.array([0, 1, 2, 2, 0]))
    want = np.zeros((10, 10), np.int64)
    for t, p in ((0, 0), (1, 1), (1, 2), (2, 2), (9, 0)):
        want[t, p] += 1
    np.testing.assert_array_equal(got, want)


def test_no_matplotlib_skips_the_picture_with_a_notice(example, monkeypatch, capsys):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.split(".")[0] == "matplotlib":
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    assert example.plot_run(None, np.eye(10, dtype=np.int64), "never.png") is None
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "matplotlib is not installed" in out
    assert not os.path.exists("never.png")


_COMPILED_BY_THE_JOB = """
import sys
from numba.core import event
compiled = []
class _L(event.Listener):
    def on_start(self, ev):
        pass
    def on_end(self, ev):
        f = ev.data['dispatcher'].py_func
        if f.__module__.startswith('yscv.'):
            compiled.append(f.__module__.split('.')[-1] + '.' + f.__qualname__)
event.register('numba:compile', _L())
sys.argv = ['train_digits_cnn.py', '--epochs', '1', '--no-progress', '--plot', '',
            '--checkpoint-dir', {ckpt!r}]
import runpy
runpy.run_path({example!r}, run_name='__main__')
print('compiled', sorted(compiled))
"""


def test_the_job_compiles_eleven_kernels_from_an_empty_cache(tmp_path):
    """The main job's cold start (docs/benchmarks.md, "The main job"): one
    epoch from an empty kernel cache compiles these kernels, once each, and
    no others -- the region protocol is one kernel (``sync.region_step``),
    not three."""
    import subprocess
    import sys

    code = _COMPILED_BY_THE_JOB.format(ckpt=str(tmp_path / "ck"), example=str(EXAMPLE))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "compiled " + str(sorted([
        "activation.relu_select", "conv_direct.direct_region", "conv_direct.pad_region",
        "elementwise.bias_add_rows", "norm.group_grad_apply", "norm.group_grad_sums",
        "norm.group_stats", "norm_regions.group_apply_region", "optim.adam_update",
        "pool.max_pool_2x2", "sync.region_step"]))


def run_example(args, cwd, launcher=(), timeout=300.0):
    """The example as a user runs it, stdout and stderr redirected to pipes."""
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(EXAMPLE.parents[1]))
    try:
        return subprocess.run([*launcher, sys.executable, *(["-m", "mpi4py"] if launcher else []),
                               str(EXAMPLE), *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the example did not finish in {timeout} s\n{exc.stdout}\n{exc.stderr}")


def test_redirected_run_prints_lines_not_a_bar_into_the_default_folder(tmp_path):
    """stdout and stderr are pipes: one line per epoch, no carriage-return
    bar in stderr; one process writes to runs/digits_cnn."""
    done = run_example(["--quick", "--epochs", "2", "--plot", ""], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "\r" not in done.stderr and "\r" not in done.stdout
    assert "epoch" not in done.stderr, done.stderr[-2000:]
    epochs = [line.split("  ")[0] for line in done.stdout.splitlines() if line.startswith("epoch ")]
    assert epochs == ["epoch 1/2", "epoch 2/2"]
    assert done.stdout.count("test accuracy ") == 1
    assert os.listdir(tmp_path / "runs") == ["digits_cnn"]
    assert "final.safetensors" in os.listdir(tmp_path / "runs" / "digits_cnn")


def test_default_folder_names_the_world_size(example):
    assert example.default_checkpoint_dir(1) == os.path.join("runs", "digits_cnn")
    assert example.default_checkpoint_dir(2) == os.path.join("runs", "digits_cnn_mpi2")
    assert example.default_checkpoint_dir(8) == os.path.join("runs", "digits_cnn_mpi8")
    assert example.parse_args([]).checkpoint_dir is None


def test_mpi_run_writes_its_own_folder(tmp_path):
    """``mpiexec -n 2`` runs take half the steps per epoch: their checkpoints
    go to runs/digits_cnn_mpi2, never over the single-process run's."""
    import sys

    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip('mpi4py is not installed (pip install -e ".[mpi]")')
    mpiexec = pathlib.Path(sys.executable).parent / "mpiexec"
    if not mpiexec.exists():
        pytest.skip(f"{mpiexec} is missing (the mpich wheel of the mpi extra)")
    single = tmp_path / "runs" / "digits_cnn"
    single.mkdir(parents=True)
    (single / "final.safetensors").write_bytes(b"the single-process run")
    done = run_example(["--quick", "--epochs", "1", "--plot", "", "--no-progress"], tmp_path,
                       launcher=(str(mpiexec), "-n", "2"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stdout.count("test accuracy ") == 1
    assert sorted(os.listdir(tmp_path / "runs")) == ["digits_cnn", "digits_cnn_mpi2"]
    assert "final.safetensors" in os.listdir(tmp_path / "runs" / "digits_cnn_mpi2")
    assert (single / "final.safetensors").read_bytes() == b"the single-process run"


def test_plot_names_the_curves_as_the_epoch_lines_do(example):
    """The curves carry the History columns the epoch lines print (val_...),
    not another word for the same data."""
    plt = pytest.importorskip("matplotlib.pyplot")
    from yscv.train import History

    history = History(epochs=[{"epoch": e, "loss": 1.0 / (e + 1), "accuracy": 0.5 + 0.1 * e,
                               "val_loss": 1.2 / (e + 1), "val_accuracy": 0.4 + 0.1 * e}
                              for e in range(3)])
    fig = example.draw_run(plt, history, np.eye(10, dtype=np.int64))
    try:
        labels = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in fig.axes[:2]]
        assert labels == [["loss", "val_loss"], ["accuracy", "val_accuracy"]]
        assert "test" not in fig.axes[2].get_title()
    finally:
        plt.close(fig)
