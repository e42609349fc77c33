"""The loss modules of the SPEC section 11 losses against torch.nn, each
with a non-default option."""
import numpy as np
import pytest

import yscv
import yscv.nn as nn

torch = pytest.importorskip("torch")
R = np.random.default_rng(0)
A, B, C = R.standard_normal((4, 5)), R.standard_normal((4, 5)), R.standard_normal((4, 5))
P = R.uniform(0.05, 0.95, (4, 5))
T01 = R.uniform(0, 1, (4, 5))
Y = np.sign(R.standard_normal(4))
V = R.uniform(0.5, 1.5, (4, 5))
LP = np.log(np.exp(A) / np.exp(A).sum(1, keepdims=True))


def _t(a):
    return torch.tensor(a)


CASES = [
    ("smooth_l1", nn.SmoothL1Loss(beta=0.5, reduction="sum"), torch.nn.SmoothL1Loss(beta=0.5, reduction="sum"), (A, B)),
    ("kl_div", nn.KLDivLoss(reduction="batchmean"), torch.nn.KLDivLoss(reduction="batchmean"), (LP, P)),
    ("kl_div_log_target", nn.KLDivLoss(log_target=True), torch.nn.KLDivLoss(log_target=True), (LP, np.log(P))),
    ("bce", nn.BCELoss(weight=np.arange(1, 6.0)), torch.nn.BCELoss(weight=_t(np.arange(1, 6.0))), (P, T01)),
    ("cosine", nn.CosineSimilarity(dim=1), torch.nn.CosineSimilarity(dim=1), (A, B)),
    ("pairwise", nn.PairwiseDistance(p=3.0), torch.nn.PairwiseDistance(p=3.0), (A, B)),
    ("triplet", nn.TripletMarginLoss(margin=0.5, swap=True), torch.nn.TripletMarginLoss(margin=0.5, swap=True), (A, B, C)),
    ("margin_ranking", nn.MarginRankingLoss(margin=0.2), torch.nn.MarginRankingLoss(margin=0.2), (A[:, 0], B[:, 0], Y)),
    ("gaussian_nll", nn.GaussianNLLLoss(full=True), torch.nn.GaussianNLLLoss(full=True), (A, B, V)),
    ("poisson_nll", nn.PoissonNLLLoss(full=True), torch.nn.PoissonNLLLoss(full=True), (A, np.abs(B) * 3)),
]


@pytest.mark.parametrize("name,mine,theirs,arrays", CASES, ids=[c[0] for c in CASES])
def test_loss_module_equals_torch(name, mine, theirs, arrays):
    g = yscv.Graph(np.float64)
    got = g.value(mine(g, *[g.constant(a) for a in arrays]))
    ref = theirs(*[_t(a) for a in arrays]).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)


def test_ctc_loss_module_equals_torch():
    t_len, n, c, s = 12, 2, 5, 4
    logits = R.standard_normal((t_len, n, c))
    lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    targets = R.integers(1, c, (n, s))
    il, tl = np.array([12, 10]), np.array([4, 3])
    g = yscv.Graph(np.float64)
    got = g.value(nn.CTCLoss(blank=0, reduction="sum")(g, g.constant(lp), targets, il, tl))
    ref = torch.nn.CTCLoss(blank=0, reduction="sum")(_t(lp), torch.tensor(targets),
                                                     torch.tensor(il), torch.tensor(tl))
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-10)
