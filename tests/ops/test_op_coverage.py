"""Every Op member has a forward, a backward, a tested OpCase row with a NumPy
reference, and a bad-argument row. Adding an Op without them fails here."""
import importlib.util
import pathlib

from yscv import Op, registry

HERE = pathlib.Path(__file__).parent


def _rows(second_order=None):
    cases, bad = [], []
    for path in sorted(HERE.glob("test_*.py")):
        if path.name == pathlib.Path(__file__).name:
            continue
        spec = importlib.util.spec_from_file_location(f"_coverage_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        cases += list(getattr(mod, "CASES", []))
        bad += list(getattr(mod, "BAD", []))
        if second_order is not None and hasattr(mod, "test_second_order"):
            second_order += list(getattr(mod, "CASES", []))
        if second_order is not None:   # any test made by make_second_order_tests
            for value in vars(mod).values():
                second_order += list(getattr(value, "second_order_rows", ()))
    return cases, bad


OPS = [op for op in Op if op is not Op.LEAF]


def test_every_op_is_registered():
    assert registry.missing_ops() == []


def test_every_op_has_a_forward_case_with_reference_and_a_bad_argument_case():
    cases, bad = _rows()
    with_reference = {c.op for c in cases if c.reference is not None}
    with_grad = {c.op for c in cases if c.check_grad}
    with_bad = {c.op for c in bad}
    missing = {
        "forward reference": [op.name for op in OPS if op not in with_reference],
        "gradcheck": [op.name for op in OPS if op not in with_grad],
        "bad argument": [op.name for op in OPS if op not in with_bad],
    }
    assert missing == {"forward reference": [], "gradcheck": [], "bad argument": []}


def test_every_op_has_one_rule_and_only_composites_are_recorded_apart():
    """Every op has its one backward rule (registry.RULES), which the array
    walks and create_graph=True (SPEC section 9) both run; the only recorded
    pieces apart from the rules are composites (a fused forward restated in
    primitive ops, registry.COMPOSITES)."""
    assert [op.name for op in OPS if registry.RULES[int(op)] is None] == []
    assert not hasattr(registry, "LEGACY_RECORDED")
    assert not hasattr(registry, "register_recorded")


def test_every_op_has_a_second_order_row_checked_against_pytorch():
    """Each op has a row in a module with the second-order column
    (make_second_order_tests) that runs gradgradcheck, and a row compared
    with PyTorch's double backward."""
    rows = []
    _rows(rows)
    checked = {c.op for c in rows if c.check_grad and c.check_grad2}
    with_torch = {c.op for c in rows if c.check_grad and c.torch_build is not None}
    missing = {
        "gradgradcheck": [op.name for op in OPS if op not in checked],
        "torch double backward": [op.name for op in OPS if op not in with_torch],
    }
    assert missing == {"gradgradcheck": [], "torch double backward": []}
