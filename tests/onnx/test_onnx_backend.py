"""ONNX's own conformance suite (``onnx.backend.test.BackendTest``) run over
``yscv.onnx.backend``: every node case of the operators yscv.onnx.load
claims, the expanded (function-body) cases, and the ``pytorch-converted``,
``pytorch-operator``, ``simple`` and ``light`` model folders the onnx package
ships.

What is not run, each with its reason:

- a case whose model uses an operator the importer does not claim (no
  handler in ``yscv.onnx._import_registry.HANDLERS``): computed here from the
  case's model, so claiming an operator brings its cases in;
- the cases listed in ``tests/onnx/_backend_known.py``, reviewed one by one:
  data types yscv refuses at load on purpose, and claimed-operator cases
  that fail today (each with the error it gives), which are defects to fix.

``pytest -k onnx_backend`` prints the count of cases passed.
"""
from __future__ import annotations

import os
import re
import warnings

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnx.backend.test")

import onnx.backend.test  # noqa: E402
from onnx.backend.test.loader import load_model_tests  # noqa: E402

from yscv.onnx import backend  # noqa: E402
from yscv.onnx._import_table import HANDLERS  # noqa: E402

from _backend_known import KNOWN  # noqa: E402  (tests/onnx is on sys.path)

KINDS = ("node", "pytorch-converted", "pytorch-operator", "simple", "real")


def _model_of(case):
    if case.model is not None:
        return case.model
    if case.model_dir is not None:
        return onnx.load(os.path.join(case.model_dir, "model.onnx"))
    if case.url and case.url.startswith("onnx/backend/test/data/light/"):
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
            onnx.backend.test.__file__))))
        return onnx.load(os.path.join(root, case.url))
    return None


def _op_types(graph):
    """The operator types of ``graph``'s nodes and of the graphs they hold
    (If's branches, Loop's and Scan's bodies)."""
    for n in graph.node:
        yield n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}:{n.op_type}"
        for a in n.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _op_types(sub)


def unclaimed() -> dict:
    """case name -> the reason it is not run: an operator the importer does
    not claim (the first one of its model), or a model this suite cannot
    read here."""
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kind in KINDS:
            for case in load_model_tests(kind=kind):
                model = _model_of(case)
                if model is None:
                    out[case.name] = "a model to download (no network here)"
                    continue
                missing = [op for op in _op_types(model.graph) if op not in HANDLERS]
                if missing:
                    out[case.name] = f"{missing[0]}: an operator yscv.onnx.load does not claim"
    return out


UNCLAIMED = unclaimed()

_backend_test = onnx.backend.test.BackendTest(backend.YscvBackend, __name__)
_backend_test.exclude(r"_cuda$")
for _name in sorted(set(UNCLAIMED) | set(KNOWN)):
    _backend_test.exclude("^" + re.escape(_name) + "_cpu$")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    globals().update(_backend_test.test_cases)


def test_onnx_backend_exclusions_name_real_cases():
    """Every listed exclusion is a case of the suite (a renamed or fixed case
    must leave the list), and none is listed as both unclaimed and known."""
    names = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kind in KINDS:
            names.update(c.name for c in load_model_tests(kind=kind))
    assert not set(KNOWN) - names, sorted(set(KNOWN) - names)[:10]
    assert not set(KNOWN) & set(UNCLAIMED), sorted(set(KNOWN) & set(UNCLAIMED))[:10]
    for name, reason in KNOWN.items():
        assert reason.strip(), name


def test_light_squeezenet_logits_match_onnxruntime():
    """The ``light`` squeezenet without its final softmax (the suite's case is
    listed in _backend_known.py: its softmax of ~9.5e9 logits turns 1-ulp
    differences into 0 or 0.04): yscv's logits equal onnxruntime's to float32
    rounding, whichever OpenBLAS kernels run the products."""
    import copy

    import numpy as np
    ort = pytest.importorskip("onnxruntime")
    root = os.path.dirname(onnx.backend.test.__file__)
    model = onnx.load(os.path.join(root, "data", "light", "light_squeezenet.onnx"))
    last = model.graph.node[-1]
    assert last.op_type == "Softmax"
    cut = copy.deepcopy(model)
    cut.graph.node.pop()
    del cut.graph.output[:]
    cut.graph.output.append(onnx.helper.make_tensor_value_info(last.input[0],
                                                               onnx.TensorProto.FLOAT, None))
    x = np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32)
    sess = ort.InferenceSession(cut.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    got = backend.prepare(cut).run([x])[0]
    assert got.shape == want.shape == (1, 1000, 1, 1)
    np.testing.assert_allclose(got, want, rtol=2e-6)
