"""Linear algebra (forward): matmul, transpose, einsum, and the matrix
functions inv, solve, det, slogdet, cholesky, eigh (batched over leading
axes, as torch.linalg; NumPy's LAPACK computes them).

matmul follows ``np.matmul`` exactly (1-D operands are promoted and the
added axis removed again; batch axes broadcast) and runs on NumPy's BLAS.
transpose returns a view (values are read-only, so sharing is safe).
einsum parses NumPy subscripts (explicit ``->`` or implicit output,
repeated indices, ``...``) into a canonical form with one letter per axis,
recorded in an `EinsumSpec` attribute that the backward reuses.
Nothing is saved for backward by any of these: the matrix functions'
rules read the input and output values (eigh's output packs the
eigenvalues as row 0 and the eigenvectors as rows 1..n of one
[..., n+1, n] value; the Graph method returns two cheap views of it).
"""
from __future__ import annotations

import numbers
import string
from typing import NamedTuple

import numpy as np

from ..compute.linalg import dot, einsum, matmul
from ..node import NodeId, Op
from ..registry import register_forward
from ._common import as_graph_array, shape_error


# plain module constants: Enum attribute access is slow on the per-node path
_MATMUL, _TRANSPOSE, _EINSUM = Op.MATMUL, Op.TRANSPOSE, Op.EINSUM


def _check_square(shape: tuple, op: str, arg: str = "a") -> int:
    """n of a batch of square matrices [..., n, n]; ShapeError otherwise."""
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise shape_error(op, f"{arg} must be a batch of square matrices [..., n, n], got "
                          f"shape {shape}", expected="[..., n, n]", got=shape)
    return shape[-1]


# ---------------------------------------------------------------- matmul
@register_forward(Op.MATMUL)
def matmul_forward(attrs, a, b):
    if a.ndim == 2 and b.ndim == 2:
        return dot(a, b), None   # yscv's tiles or np.dot (yscv/compute/gemm.py)
    return matmul(a, b), None


def _matmul_shape_check(sa: tuple, sb: tuple, op: str) -> None:
    if not sa or not sb:
        raise shape_error(op, f"operands must be at least 1-d, got shapes {sa} and {sb}",
                          expected="ndim >= 1", got=(sa, sb))
    ka = sa[-1]
    kb = sb[0] if len(sb) == 1 else sb[-2]
    if ka != kb:
        raise shape_error(
            op, f"inner dimensions do not match: a has shape {sa} (contracting {ka}), "
            f"b has shape {sb} (contracting {kb})", expected=(sa, sb), got=(ka, kb))
    if len(sa) > 2 or len(sb) > 2:
        try:
            np.broadcast_shapes(sa[:-2], sb[:-2])
        except ValueError:
            raise shape_error(
                op, f"batch dimensions of shapes {sa} and {sb} do not broadcast "
                f"({sa[:-2]} vs {sb[:-2]})", expected=sa, got=sb) from None


# ------------------------------------------------------------- transpose
class TransposeAttrs(NamedTuple):
    """transpose: the permutation and its inverse (the backward's permutation)."""

    perm: tuple
    inverse: tuple


@register_forward(Op.TRANSPOSE)
def transpose_forward(attrs, x):
    return np.transpose(x, attrs.perm), None


# ------------------------------------------------------- matrix functions
@register_forward(Op.INV)
def inv_forward(attrs, a):
    return _lapack("inv", np.linalg.inv, a), None


@register_forward(Op.SOLVE)
def solve_forward(vector, a, b):
    """``vector``: b is a batch of vectors [..., n] (torch.linalg.solve's rule)."""
    if vector:
        return _lapack("solve", np.linalg.solve, a, b[..., None])[..., 0], None
    return _lapack("solve", np.linalg.solve, a, b), None


@register_forward(Op.DET)
def det_forward(attrs, a):
    return np.asarray(np.linalg.det(a), dtype=a.dtype), None


@register_forward(Op.SLOGDET)
def slogdet_forward(attrs, a):
    return np.asarray(np.linalg.slogdet(a)[1], dtype=a.dtype), None


@register_forward(Op.CHOLESKY)
def cholesky_forward(upper, a):
    low = _lapack("cholesky", np.linalg.cholesky, a)
    return (np.swapaxes(low, -1, -2).copy() if upper else low), None


@register_forward(Op.EIGH)
def eigh_forward(attrs, a):
    """[..., n+1, n]: eigenvalues ascending (row 0), then the eigenvectors as
    columns, each signed so its entry of largest magnitude is positive."""
    values, vectors = np.linalg.eigh(a)   # reads the lower triangle, as torch
    n = a.shape[-1]
    if n:
        big = np.argmax(np.abs(vectors), axis=-2)[..., None, :]
        sign = np.where(np.take_along_axis(vectors, big, axis=-2) < 0, -1, 1)
        vectors = vectors * sign.astype(a.dtype)
    return np.concatenate([values[..., None, :], vectors], axis=-2), None


def _lapack(op: str, fn, *args):
    """``fn(*args)``, LAPACK's failure as a ValueError naming the op."""
    try:
        return fn(*args)
    except np.linalg.LinAlgError as exc:
        what = ("the input is not positive-definite" if op == "cholesky"
                else "the input matrix is singular")
        raise ValueError(f"{op}: {what} (LAPACK: {exc}); batch index "
                         f"{_first_failure(fn, args)}") from None


def _first_failure(fn, args):
    """The leading index of the first matrix of a batch that fails."""
    a = args[0]
    b = np.broadcast_to(args[1], a.shape[:-2] + args[1].shape[-2:]) if len(args) > 1 else None
    for idx in np.ndindex(a.shape[:-2]):
        try:
            fn(a[idx], *(() if b is None else (b[idx],)))
        except np.linalg.LinAlgError:
            return idx
    return ()


# ---------------------------------------------------------------- einsum
_LETTERS = string.ascii_letters


class EinsumSpec(NamedTuple):
    """A parsed einsum: ``inputs`` (one label string per operand, one letter
    per axis, ellipsis axes replaced by fresh letters), ``output`` (label
    string), ``sizes`` (letter -> broadcast size), ``subscripts`` (the
    canonical ``"ab,bc->ac"`` string given to np.einsum) and ``source`` (the
    caller's subscripts)."""

    inputs: tuple
    output: str
    sizes: dict
    subscripts: str
    source: str

    def __repr__(self) -> str:
        return f"EinsumSpec({self.source!r} -> {self.subscripts!r})"


def _spec(inputs, output: str, sizes: dict, source: str) -> EinsumSpec:
    inputs = tuple(inputs)
    return EinsumSpec(inputs, output, dict(sizes), ",".join(inputs) + "->" + output, source)


@register_forward(Op.EINSUM)
def einsum_forward(spec, *operands):
    return einsum(spec.subscripts, spec.sizes, *operands), None


def _split_term(term: str, op: str, where: str):
    """(letters before '...', has_ellipsis, letters after) of one term."""
    if term.count("...") > 1:
        raise ValueError(f"einsum: {where} {term!r} contains more than one ellipsis '...'")
    head, sep, tail = term.partition("...")
    for c in head + tail:
        if c not in _LETTERS:
            raise ValueError(
                f"einsum: invalid subscript {c!r} in {where} {term!r}; use letters a-z, "
                "A-Z and at most one '...'")
    return head, bool(sep), tail


def parse_einsum(subscripts, shapes: list) -> EinsumSpec:
    """Validate ``subscripts`` against the operand ``shapes``; ValueError or
    ShapeError naming einsum otherwise."""
    if not isinstance(subscripts, str):
        raise TypeError(f"einsum: subscripts must be a string, got {type(subscripts).__name__}")
    src = subscripts
    s = subscripts.replace(" ", "")
    if s.count("->") > 1 or ("-" in s.replace("->", "")) or (">" in s.replace("->", "")):
        raise ValueError(f"einsum: subscripts {src!r} must contain at most one '->'")
    lhs, arrow, rhs = s.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(
            f"einsum: subscripts {src!r} name {len(terms)} operand(s), got {len(shapes)}")
    parsed = []
    used = set()
    ell_ndim = 0
    for k, (term, shape) in enumerate(zip(terms, shapes)):
        head, ell, tail = _split_term(term, "einsum", f"operand {k} subscripts")
        n_named = len(head) + len(tail)
        if (not ell and n_named != len(shape)) or (ell and n_named > len(shape)):
            raise shape_error(
                "einsum", f"operand {k} has shape {shape} ({len(shape)} axes) but its "
                f"subscripts {term!r} name {n_named} axes{' plus ...' if ell else ''}",
                expected=term, got=shape)
        used.update(head + tail)
        n_ell = len(shape) - n_named if ell else 0
        ell_ndim = max(ell_ndim, n_ell)
        parsed.append((head, ell, tail, n_ell))
    free = [c for c in _LETTERS if c not in used]
    if len(free) < ell_ndim:
        raise ValueError(f"einsum: subscripts {src!r} use too many distinct indices")
    ell_letters = "".join(free[:ell_ndim])
    any_ell = any(p[1] for p in parsed)

    inputs = []
    sizes: dict = {}
    for k, ((head, ell, tail, n_ell), shape) in enumerate(zip(parsed, shapes)):
        labels = head + (ell_letters[ell_ndim - n_ell:] if ell else "") + tail
        own: dict = {}
        for c, n in zip(labels, shape):
            if c in own and own[c] != n:
                raise shape_error(
                    "einsum", f"operand {k} repeats index {c!r} on axes of different "
                    f"sizes ({own[c]} and {n}); shape {shape}", expected=own[c], got=n)
            own[c] = n
        for c, n in own.items():
            prev = sizes.get(c)
            if prev is None or prev == 1:
                sizes[c] = n
            elif n != 1 and n != prev:
                what = "the '...' axes" if c in ell_letters else f"index {c!r}"
                raise shape_error(
                    "einsum", f"{what} of operand {k} (shape {shape}) has size {n}, "
                    f"another operand has {prev}; sizes must match or be 1",
                    expected=prev, got=n)
        inputs.append(labels)
    if arrow:
        output = _explicit_output(rhs, src, used, ell_letters, any_ell)
    else:
        counts: dict = {}
        for head, ell, tail, n_ell in parsed:
            for c in head + tail:
                counts[c] = counts.get(c, 0) + 1
        output = ell_letters + "".join(sorted(c for c, n in counts.items() if n == 1))
    return _spec(inputs, output, sizes, src)


def _explicit_output(rhs: str, src: str, used: set, ell_letters: str, any_ell: bool) -> str:
    """Canonical output labels of an explicit ``->`` output term."""
    head, ell, tail = _split_term(rhs, "einsum", "output subscripts")
    if ell and not any_ell:
        raise ValueError(f"einsum: output subscripts {rhs!r} use '...' but no operand does")
    if ell_letters and not ell:
        raise ValueError(
            f"einsum: subscripts {src!r}: the '...' of the operands covers "
            f"{len(ell_letters)} axes, so the output must contain '...' too")
    seen = set()
    for c in head + tail:
        if c in seen:
            raise ValueError(f"einsum: output subscripts {rhs!r} repeat index {c!r}")
        if c not in used:
            raise ValueError(
                f"einsum: output index {c!r} does not appear in any operand of {src!r}")
        seen.add(c)
    return head + (ell_letters if ell else "") + tail


class LinalgOps:
    """Graph methods of the linalg category."""

    def _shape_and_operand(self, x, op: str, arg: str):
        """(shape, operand) — NodeIds pass through; array-likes are converted
        once (and become constant leaves only if the op succeeds)."""
        if type(x) is NodeId:
            return self._shape(self._index(x)), x
        arr = as_graph_array(x, self.dtype, op, arg, copy=False)
        return arr.shape, arr

    def matmul(self, a, b):
        """NumPy ``matmul``: 1-D @ 1-D is a dot product (0-d), a 1-D operand
        is promoted to a row (a) / column (b) and that axis removed again,
        2-D is a GEMM, more axes are batched with broadcasting.

        Backward: ``g @ b^T`` and ``a^T @ g`` (BLAS on transposed views, no
        copies), skipped for inputs that do not require grad; broadcast batch
        axes are reduced by the walk."""
        if type(a) is NodeId and type(b) is NodeId:
            # fast path (per-node overhead): two present 2-d values that fit;
            # _apply2 still proves both ids are live nodes of this graph
            values = self._values
            n = len(values)
            i, j = a.index, b.index
            va = values[i] if i < n else None
            vb = values[j] if j < n else None
            if (va is not None and vb is not None and va.ndim == 2 and vb.ndim == 2
                    and va.shape[1] == vb.shape[0]):
                return self._apply2(_MATMUL, a, b)
        sa, a = self._shape_and_operand(a, "matmul", "a")
        sb, b = self._shape_and_operand(b, "matmul", "b")
        _matmul_shape_check(sa, sb, "matmul")
        return self._apply2(_MATMUL, a, b)

    def matmul_2d(self, a, b):
        """`matmul` of two 2-d operands (ShapeError otherwise)."""
        sa, a = self._shape_and_operand(a, "matmul_2d", "a")
        sb, b = self._shape_and_operand(b, "matmul_2d", "b")
        if len(sa) != 2 or len(sb) != 2:
            raise shape_error("matmul_2d", f"operands must be 2-d, got shapes {sa} and {sb}",
                              expected=2, got=(sa, sb))
        _matmul_shape_check(sa, sb, "matmul_2d")
        return self._apply2(_MATMUL, a, b)

    def transpose(self, x, axes=None):
        """Permute axes (``np.transpose``): None reverses them, otherwise
        ``axes`` is a permutation of ``range(ndim)`` (negative entries
        allowed). Returns a view. Backward: the inverse permutation."""
        shape, x = self._shape_and_operand(x, "transpose", "x")
        ndim = len(shape)
        if axes is None:
            perm = tuple(range(ndim - 1, -1, -1))
        else:
            if not isinstance(axes, (tuple, list)) or not all(
                    isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in axes):
                raise TypeError(f"transpose: axes must be None or a tuple of ints, got {axes!r}")
            if len(axes) != ndim:
                raise ValueError(
                    f"transpose: axes={tuple(axes)} must list all {ndim} axes of the input "
                    f"of shape {shape}")
            for a in axes:
                if not -ndim <= a < ndim:
                    raise ValueError(
                        f"transpose: axes={tuple(axes)}: axis {a} is out of range for a "
                        f"{ndim}-d input")
            perm = tuple(int(a) % ndim for a in axes)
            if len(set(perm)) != ndim:
                raise ValueError(f"transpose: axes={tuple(axes)} is not a permutation "
                                 f"(an axis is repeated)")
        inverse = [0] * ndim   # in Python: np.argsort on a tiny tuple costs ~20 us
        for k, p in enumerate(perm):
            inverse[p] = k
        return self._apply1(_TRANSPOSE, x, TransposeAttrs(perm, tuple(inverse)))

    def transpose_2d(self, x):
        """The transpose of a 2-d input."""
        shape, x = self._shape_and_operand(x, "transpose_2d", "x")
        if len(shape) != 2:
            raise shape_error("transpose_2d", f"x must be 2-d, got shape {shape}",
                              expected=2, got=shape)
        return self._apply1(_TRANSPOSE, x, TransposeAttrs((1, 0), (1, 0)))

    def einsum(self, subscripts, *operands):
        """Einstein summation with NumPy's subscripts: explicit (``'ij,jk->ik'``)
        or implicit output (``'ij,jk'``: indices seen once, sorted), repeated
        indices within an operand (diagonals, ``'ii->i'``), ``...`` for
        broadcast axes, size-1 broadcasting as NumPy.

        Backward: for each operand, an einsum of the cotangent with the other
        operands (summed-only indices are broadcast back, diagonals scattered)."""
        if not operands:
            raise ValueError("einsum: at least one operand is required")
        shapes = []
        ops = []
        for k, x in enumerate(operands):
            shape, x = self._shape_and_operand(x, "einsum", f"operand {k}")
            shapes.append(shape)
            ops.append(x)
        spec = parse_einsum(subscripts, shapes)
        return self._apply(_EINSUM, ops, spec)

    # ------------------------------------------------------- matrix functions
    def _square_operand(self, a, op: str):
        shape, a = self._shape_and_operand(a, op, "a")
        _check_square(shape, op)
        return a

    def inv(self, a):
        """The inverse of each matrix of a [..., n, n] (torch.linalg.inv).
        A singular matrix raises ValueError naming inv and its batch index.
        Backward: ``-inv(a)^T g inv(a)^T``. Nothing saved."""
        return self._apply1(Op.INV, self._square_operand(a, "inv"))

    def solve(self, a, b):
        """x with ``a @ x = b`` (torch.linalg.solve): a [..., n, n]; b
        [..., n, k], or a batch of vectors [..., n] when b is 1-d or has
        a's shape without its last axis. Batch axes broadcast. A singular
        matrix raises ValueError naming solve. Backward: ``gb = solve(a^T, g)``,
        ``ga = -gb x^T``. Nothing saved."""
        sa, a = self._shape_and_operand(a, "solve", "a")
        n = _check_square(sa, "solve")
        sb, b = self._shape_and_operand(b, "solve", "b")
        vector = len(sb) == 1 or (len(sb) == len(sa) - 1 and sb == sa[:-1])
        if not sb or sb[-1 if vector else -2] != n or (not vector and len(sb) < 2):
            raise shape_error("solve", f"b of shape {sb} does not fit a of shape {sa}: expected "
                              f"[..., {n}, k] or [..., {n}]", expected=n, got=sb)
        try:
            np.broadcast_shapes(sa[:-2], sb[:-1] if vector else sb[:-2])
        except ValueError:
            raise shape_error("solve", f"batch dimensions of a {sa} and b {sb} do not "
                              "broadcast", expected=sa, got=sb) from None
        return self._apply(Op.SOLVE, (a, b), bool(vector))

    def det(self, a):
        """The determinant of each matrix of a [..., n, n] -> [...]
        (torch.linalg.det). Backward: ``g det(a) inv(a)^T``; when a matrix of
        the batch is singular, g times the cofactors, the signed determinants
        of the minors (finite, as torch's; the same rule first order and with
        ``create_graph=True``). Nothing saved."""
        return self._apply1(Op.DET, self._square_operand(a, "det"))

    def slogdet(self, a):
        """``(sign, logabsdet)`` of each matrix of a [..., n, n], as
        torch.linalg.slogdet: ``sign`` is a plain array of the graph dtype
        (-1, 0 or 1; not differentiable), ``logabsdet`` a node ([...];
        -inf for a singular matrix). Backward of logabsdet: ``g inv(a)^T``;
        at a singular matrix it does not exist (torch's is inf/NaN) and the
        backward raises BackwardError naming slogdet."""
        a = self._square_operand(a, "slogdet")
        v = a if type(a) is not NodeId else self.value(a)
        sign = np.asarray(np.linalg.slogdet(v)[0], dtype=self.dtype)
        return sign, self._apply1(Op.SLOGDET, a)

    def cholesky(self, a, upper=False):
        """The Cholesky factor of each symmetric positive-definite matrix
        of a [..., n, n] (torch.linalg.cholesky): lower triangular L with
        ``a = L L^T`` (only a's lower triangle is read), or ``L^T`` with
        ``upper=True``. A matrix that is not positive-definite raises
        ValueError naming cholesky and its batch index. Backward as
        torch's: ``L^-T Phi(L^T g) L^-1`` (symmetric). Nothing saved."""
        if not isinstance(upper, (bool, np.bool_)):
            raise TypeError(f"cholesky: upper must be a bool, got {upper!r}")
        return self._apply1(Op.CHOLESKY, self._square_operand(a, "cholesky"), bool(upper))

    def eigh(self, a):
        """``(values, vectors)`` of each symmetric matrix of a [..., n, n]
        (torch.linalg.eigh; only the lower triangle is read): values
        [..., n] ascending, vectors [..., n, n] orthonormal columns, each
        signed so that its entry of largest magnitude is positive (an
        eigenvector is defined up to sign; this choice is deterministic).
        Both are nodes: views of one EIGH node [..., n+1, n] (values in
        row 0). Gradients as torch.linalg's, finite for distinct
        eigenvalues: ``V (diag(gL) + skew(V^T gV) / (L_j - L_i)) V^T``;
        for a matrix whose vectors get no cotangent (all zero), ``V
        diag(gL) V^T``, finite at repeated eigenvalues too."""
        a = self._square_operand(a, "eigh")
        packed = self._apply1(Op.EIGH, a)
        nd = len(packed.shape)
        n = packed.shape[-1]
        return self.select(packed, nd - 2, 0), self.narrow(packed, nd - 2, 1, n)
