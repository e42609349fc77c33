"""``python -m yscv.warmup`` (yscv/warmup.py): what it compiles is what real
programs load, bad arguments, and one compiled variant per kernel in a
float32 run."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import yscv.warmup as warmup

# jitted functions compiled by this process, from Numba's compile events
_COUNT_COMPILES = """
from numba.core import event
compiled = []
class _L(event.Listener):
    def on_start(self, ev):
        pass
    def on_end(self, ev):
        f = ev.data['dispatcher'].py_func
        if f.__module__.startswith('yscv.'):
            compiled.append(f.__module__ + '.' + f.__qualname__)
event.register('numba:compile', _L())
"""

_OTHER_MLP = """
import numpy as np, yscv, yscv.nn as nn, yscv.optim as optim
from yscv.train import Trainer
yscv.manual_seed(1)
model = nn.Sequential(nn.Linear(20, 40), nn.GELU(), nn.Dropout(0.2), nn.Linear(40, 3))
x = np.random.default_rng(1).standard_normal((90, 20)).astype(np.float32)
t = Trainer(model, 'cross_entropy', optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
            progress=False)
t.fit((x, np.arange(90) % 3), epochs=2, batch_size=25)
t.evaluate((x, np.arange(90) % 3))
g = yscv.Graph(np.float32)   # logits large enough for cross-entropy's kernels
z = g.variable(np.ones((600, 10), np.float32))
g.backward(g.cross_entropy(z, np.arange(600) % 10, label_smoothing=0.1))
print('compiled', sorted(set(compiled)))
"""


def _run(code, cache_dir, *args):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir)}
    return subprocess.run([sys.executable, *args] if args else [sys.executable, "-c", code],
                          env=env, capture_output=True, text=True, timeout=900)


def test_a_program_after_warmup_compiles_nothing(tmp_path):
    out = _run(None, tmp_path, "-m", "yscv.warmup", "--only", "mlp")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "yscv.warmup: mlp          float32" in out.stdout
    assert any(f.endswith(".nbc") for _, _, fs in os.walk(tmp_path) for f in fs)
    out = _run(_COUNT_COMPILES + _OTHER_MLP, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "compiled []"
    # the same program in an empty cache does compile (the check above can fail)
    out = _run(_COUNT_COMPILES + _OTHER_MLP, tmp_path / "empty")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "yscv.kernels.optim.sgd_update" in out.stdout
    assert "yscv.kernels.loss.cross_entropy_backward" in out.stdout


_ONE_VARIANT = """
import numpy as np
import yscv.warmup as w
w.warmup(['cnn'])
from yscv.kernels import gemm
# the recurrent weight-gradient product: full 4-row panels and an edge panel (M = 6)
a = np.random.default_rng(0).random((3, 5, 6), dtype=np.float32)
b = np.random.default_rng(1).random((3, 5, 40), dtype=np.float32)
c = np.zeros((6, 40), np.float32)
gemm.matmul_tn_steps(a, b, c, 0, 3, 0, 0, 5, 0, 6)
assert np.allclose(c, np.einsum('tim,tin->mn', a.astype(np.float64), b), rtol=1e-5)
import sys
from numba.core.registry import CPUDispatcher
many = []
for m in sorted(sys.modules):
    if m.startswith('yscv.kernels.'):
        for k, v in vars(sys.modules[m]).items():
            if isinstance(v, CPUDispatcher) and v.py_func.__module__ == m and len(v.signatures) > 1:
                many.append((m + '.' + k, [str(s) for s in v.signatures]))
print('kernels with more than one variant', many)
"""


def test_a_float32_run_compiles_one_variant_per_kernel(tmp_path):
    """From an empty cache (so helpers called from other kernels compile in
    this process too): a float32 CNN run (training with batch norm, then
    evaluation) and the recurrent gradient product compile every kernel once
    -- no float64 twin, no read-only / writeable twin, no literal-argument
    twin."""
    out = _run(_ONE_VARIANT, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "kernels with more than one variant []"


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown category 'gan'"):
        warmup.warmup(["gan"])
    with pytest.raises(ValueError, match="float32 or float64"):
        warmup.warmup(["mlp"], dtypes=("int32",))
    with pytest.raises(SystemExit) as e:
        warmup.main(["--only", "gan", "--quiet"])
    assert e.value.code == 2


_BOTH_NORM_TIERS = """
import numpy as np, yscv
for shape in ((8, 8, 8, 32), (6, 32, 32, 256)):      # small tier, then the region tier
    g = yscv.Graph(np.float32)
    c = shape[-1]
    x = g.variable(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    stats = (g.constant(np.zeros(c, np.float32)), g.constant(np.ones(c, np.float32)))
    gamma, beta = g.variable(np.ones(c, np.float32)), g.variable(np.zeros(c, np.float32))
    g.backward(g.sum(g.batch_norm(x, gamma, beta, *stats, training=True)))
    g.batch_norm(x, gamma, beta, *stats, training=False)
print('compiled', sorted(set(compiled)))
"""


def _after_cnn_warmup(program, tmp_path):
    """Run ``python -m yscv.warmup --only cnn`` into ``tmp_path``, check that
    ``program`` (with the compile counter) then compiles nothing, and return
    the same program's run in an empty cache (its compiles: the check above
    can fail)."""
    out = _run(None, tmp_path, "-m", "yscv.warmup", "--only", "cnn")
    assert out.returncode == 0, out.stderr[-3000:]
    out = _run(_COUNT_COMPILES + program, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "compiled []"
    return _run(_COUNT_COMPILES + program, tmp_path / "empty")


def test_warmup_compiles_both_normalisation_tiers(tmp_path):
    """Small batch norms run the row kernels, large ones the regions
    (yscv/compute/norm.py): after ``--only cnn`` neither compiles anything."""
    out = _after_cnn_warmup(_BOTH_NORM_TIERS, tmp_path)
    assert "yscv.kernels.norm_regions.group_forward_region" in out.stdout
    assert "yscv.kernels.norm.group_stats" in out.stdout


_CONV64 = """
import numpy as np, yscv
g = yscv.Graph(np.float32)
rng = np.random.default_rng(0)
x = g.constant(rng.standard_normal((4, 32, 32, 3)).astype(np.float32))
h = x
for cin, cout in ((3, 64), (64, 64), (64, 32), (32, 64)):
    w = g.variable(rng.standard_normal((3, 3, cin, cout)).astype(np.float32) / 10)
    h = g.relu(g.conv2d(h, w, g.variable(np.zeros(cout, np.float32)), padding=1))
g.backward(g.sum(h))
print('compiled', sorted(c for c in set(compiled) if '.conv' in c))
"""


def test_warmup_compiles_the_convolutions_of_a_64_channel_model(tmp_path):
    """After ``--only cnn``, 3x3 convolutions of 32 and 64 channels on 32x32
    images (the Winograd kernel for the forward and dx, the direct tiles
    for dW and the 3-channel layer) compile nothing; in an empty cache they
    do, Winograd included."""
    out = _after_cnn_warmup(_CONV64, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "yscv.kernels.conv_winograd.winograd_region'" in out.stdout


def test_gemm_shapes_are_measured_into_the_choices_file(tmp_path):
    """``--gemm MxKxN`` measures the product's shape classes (with its two
    gradient products) into the choices file; a program with those products
    then measures nothing."""
    import json

    from yscv.compute import gemm_choice

    out = _run(None, tmp_path, "-m", "yscv.warmup", "--only", "mlp", "--gemm", "128x512x512",
               "128x10x512")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "GEMM choices measured for" in out.stdout
    data = json.loads((tmp_path / gemm_choice.FILENAME).read_text())
    (section,) = data["machines"].values()
    assert any(k.startswith("fnt 7,9,9 ") for k in section)      # g @ w.T of 128x512x512
    program = ("import numpy as np, yscv; from yscv.compute import gemm_choice\n"
               "g = yscv.Graph(np.float32)\n"
               "x = g.constant(np.ones((128, 512), np.float32))\n"
               "w = g.variable(np.ones((512, 512), np.float32))\n"
               "g.backward(g.sum(g.matmul(x, w)))\n"
               "print('measured', gemm_choice.calibration_stats()[0])\n")
    out = _run(program, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-1] == "0"
    with pytest.raises(ValueError, match="MxKxN.*'12x4'"):
        warmup.warmup(["mlp"], gemm=["12x4"])
