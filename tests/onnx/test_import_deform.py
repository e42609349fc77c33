"""yscv.onnx.load on DeformConv with several groups and offset groups and
with a mask (modulated deformable convolution), composed in _import_deform.

Oracles: ONNX Runtime for the forward values; yscv.gradcheck (float64) for
the gradients of the input, weights, offsets and mask.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import helper  # noqa: E402

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402

from _onenode import check_forward, check_grad  # noqa: E402


def _case(group, offset_group, mask, cin=4, cout=4, k=2, hw=5, seed=0, **attrs):
    rng = np.random.default_rng(seed)
    oh = hw - k + 1 + sum(attrs.get("pads", [0] * 4)[i] for i in (0, 2))
    ow = hw - k + 1 + sum(attrs.get("pads", [0] * 4)[i] for i in (1, 3))
    ins = [("x", rng.standard_normal((1, cin, hw, hw)).astype(np.float32)),
           ("w", rng.standard_normal((cout, cin // group, k, k)).astype(np.float32)),
           ("off", (rng.standard_normal((1, offset_group * 2 * k * k, oh, ow)) * 0.7)
            .astype(np.float32)),
           ("b", rng.standard_normal(cout).astype(np.float32))]
    if mask:
        ins.append(("m", rng.uniform(0.1, 1.0, (1, offset_group * k * k, oh, ow))
                    .astype(np.float32)))
    node = helper.make_node("DeformConv", [n for n, _ in ins], ["y"], name="n0", group=group,
                            offset_group=offset_group, kernel_shape=[k, k], **attrs)
    vis = [helper.make_tensor_value_info(n, 1, a.shape) for n, a in ins]
    model = helper.make_model(
        helper.make_graph([node], "g", vis, [helper.make_tensor_value_info("y", 1, None)]),
        opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    return model, ins


@pytest.mark.parametrize("group,offset_group,mask", [
    (1, 1, True), (2, 1, False), (1, 2, False), (2, 4, True), (4, 2, True), (2, 2, False)])
def test_deform_conv_groups_and_mask_match_ort(group, offset_group, mask):
    model, ins = _case(group, offset_group, mask)
    check_forward(model, ins, rtol=1e-4, atol=1e-5)


def test_deform_conv_mask_with_asymmetric_pads_matches_ort():
    model, ins = _case(2, 2, True, hw=6, pads=[1, 0, 0, 1])
    check_forward(model, ins, rtol=1e-4, atol=1e-5)


def test_deform_conv_groups_and_mask_have_gradients():
    model, ins = _case(2, 2, True, cin=2, cout=2, hw=4, seed=1)
    check_grad(model, ins, wrt=(0, 1, 2, 4))


def test_bad_group_is_refused_naming_the_node():
    model, ins = _case(3, 1, False)
    with pytest.raises(ValueError, match=r"'DeformConv' \(node 'n0'.*group=3"):
        m = yscv.onnx.load(model)
        g = yscv.Graph()
        m(g, *[g.variable(a) for _, a in ins])
