"""examples/export_digits_onnx.py at a small size: the trained CNN, exported,
gives ONNX Runtime the same predictions and accuracy as yscv."""
import os
import sys

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("sklearn")   # the digits data ship with scikit-learn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import export_digits_onnx  # noqa: E402


def test_quick_run_prints_equal_accuracies(tmp_path, capsys):
    out = tmp_path / "digits.onnx"
    res = export_digits_onnx.main(["--quick", "--epochs", "1", "--out", str(out)])
    assert out.exists()
    assert res["same_predictions"]
    assert res["onnx_accuracy"] == res["yscv_accuracy"] > 0.5
    assert res["max_logit_diff"] < 1e-4
    printed = capsys.readouterr().out
    acc = f"{res['yscv_accuracy']:.4f}"
    assert f"yscv {acc}, ONNX Runtime {acc}" in printed
