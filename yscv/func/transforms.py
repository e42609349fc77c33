"""The transforms that take a function and return a function: `grad`,
`value_and_grad`, `jacrev`, `jacfwd`, `hessian` (both calling forms,
pytree arguments; see `yscv.func`)."""
from __future__ import annotations

import numpy as np

from ..errors import BatchingError
from .calling import (_Wrt, _call, _check_argnums, _contract, _dual_form, _final, _grads, _lift,
                      _pick, _scalar, _wrt, _wrt_leaves, _zeros)
from .vmap import vmap

__all__ = ["grad", "value_and_grad", "jacrev", "jacfwd", "hessian"]


def _gradient_body(f, argnums, has_aux: bool, fname: str):
    """``body(g, args) -> (out, aux, grads)`` with ``grads`` one pytree per
    argnums entry (one, not a tuple, for an int argnums)."""
    def run(g, args):
        final = _final(g)
        pos = _check_argnums(argnums, len(args), fname)
        args, wrt = _wrt(g, args, pos, fname)
        out, aux = _call(f, g, args, has_aux, fname)
        _scalar(out, fname)
        return out, aux, _pick(wrt.split(_grads(g, out, wrt.flat, final=final)), argnums)
    run.final_ok = True
    return run


def value_and_grad(f, argnums=0, has_aux: bool = False):
    """``F(...) -> (value, grad)``, or ``((value, aux), grad)`` with
    ``has_aux`` (JAX's shape). ``f`` must return one element; the gradient of
    a pytree argument (a dict of parameters, say) is a pytree of the same
    structure."""
    run = _gradient_body(f, argnums, has_aux, "value_and_grad")

    def body(g, args):
        out, aux, gr = run(g, args)
        return ((out, aux), gr) if has_aux else (out, gr)

    body.final_ok = True
    return _dual_form(body, f, "value_and_grad")


def grad(f, argnums=0, has_aux: bool = False):
    """``F(...) -> grad`` (or ``(grad, aux)`` with ``has_aux``): the gradient
    of ``f``'s one-element output with respect to argument ``argnums`` (a
    pytree of gradients for a pytree argument: a dict for a dict)."""
    run = _gradient_body(f, argnums, has_aux, "grad")

    def body(g, args):
        _, aux, gr = run(g, args)
        return (gr, aux) if has_aux else gr

    body.final_ok = True
    return _dual_form(body, f, "grad")


def jacrev(f, argnums=0, has_aux: bool = False):
    """The Jacobian by reverse mode, one recorded VJP per output element:
    shape ``out.shape + in.shape`` (a tuple of them for a tuple argnums; a
    pytree of them, one per leaf, for a pytree argument)."""
    return _jacrev(f, argnums, has_aux, "jacrev")


def _jacrev(f, argnums, has_aux: bool, fname: str):
    def body(g, args):
        final = _final(g)
        pos = _check_argnums(argnums, len(args), fname)
        args, wrt = _wrt(g, args, pos, fname)
        out, aux = _call(f, g, args, has_aux, fname)
        oshape = out.shape
        m = int(np.prod(oshape))
        rows = [[] for _ in wrt.flat]
        for e in range(m):
            seed = np.zeros(m, dtype=g.dtype)
            seed[e] = 1
            for k, gk in enumerate(_grads(g, out, wrt.flat, grad=seed.reshape(oshape),
                                          final=final)):
                rows[k].append(gk)
        jacs = [_assemble(g, r, oshape, n.shape) for r, n in zip(rows, wrt.flat)]
        res = _pick(wrt.split(jacs), argnums)
        return (res, aux) if has_aux else res

    body.final_ok = True
    return _dual_form(body, f, fname)


def _assemble(g, parts, oshape, ishape):
    """Stack per-element rows into a node of shape oshape + ishape (a
    constant of zeros when there is no row: an empty output)."""
    if not parts:
        return _zeros(g, tuple(oshape) + tuple(ishape))
    if len(parts) == 1:
        return g.reshape(parts[0], tuple(oshape) + tuple(ishape))
    return g.reshape(g.stack(parts, 0), tuple(oshape) + tuple(ishape))


def _linear_vjp(g, out, wrt):
    """The recorded VJP ``u -> J^T u`` with ``u`` a variable (its value is
    immaterial: the VJP is linear in it) and the recorded ``J^T u``."""
    u = _lift(g, g.variable(np.zeros(out.shape, dtype=g.dtype)), out)
    if not g.requires_grad(out) or not wrt:
        return u, None
    return u, g.gradients(out, wrt, grad=u, create_graph=True)


def jacfwd(f, argnums=0, has_aux: bool = False):
    """The Jacobian by forward mode: every column ``J e_k`` at once, as one
    JVP (through the transpose of the recorded VJP) vmapped over the basis
    of the inputs, as torch.func builds it; shape ``out.shape + in.shape``
    (per leaf of a pytree argument)."""
    return _jacfwd(f, argnums, has_aux, "jacfwd")


def _jacfwd(f, argnums, has_aux: bool, fname: str, symmetric: bool = False):
    def body(g, args):
        final = _final(g)
        pos = _check_argnums(argnums, len(args), fname)
        if not has_aux:
            start = len(g)
            try:
                res = _jacfwd_vmapped(f, g, args, pos, argnums, final, fname, symmetric)
            except BatchingError:
                # f does what vmap cannot (reads a value, ...): one JVP per column
                g.truncate(start)
                res = None
            if res is not None:
                return res
        args, wrt = _wrt(g, args, pos, fname)
        out, aux = _call(f, g, args, has_aux, fname)
        u, vjps = _linear_vjp(g, out, wrt.flat)
        jacs = []
        for k, n in enumerate(wrt.flat):
            size = int(np.prod(n.shape))
            if size == 0 or vjps is None or not g.requires_grad(vjps[k]):
                jacs.append(_zeros(g, tuple(out.shape) + tuple(n.shape)))
                continue
            cols = []
            for e in range(size):
                t = np.zeros(size, dtype=g.dtype)
                t[e] = 1
                s = g.sum(g.mul(vjps[k], t.reshape(n.shape)))
                (col,) = (g.gradient_constants(s, [u]) if final
                          else g.gradients(s, [u], create_graph=True))
                cols.append(col)
            # columns are d out / d x_e: stack on a trailing axis
            jac = g.stack(cols, len(out.shape)) if len(cols) > 1 else g.unsqueeze(cols[0], -1)
            jacs.append(g.reshape(jac, tuple(out.shape) + tuple(n.shape)))
        res = _pick(wrt.split(jacs), argnums)
        return (res, aux) if has_aux else res

    body.final_ok = True
    return _dual_form(body, f, fname)


def _jacfwd_vmapped(f, g, args, pos, argnums, final: bool, fname: str, symmetric: bool):
    """jacfwd's body as one vmapped JVP: sample ``e`` of the vmap runs ``f``
    on its own copy of the arguments (`_wrt` lifts them to the new level)
    and returns ``J t_e`` for the e-th basis tangent ``t_e`` of all the
    differentiated leaves together; the columns are then split per leaf.
    One forward, one recorded VJP and one reverse walk on ``S``-sample
    batches (``S`` the number of differentiated elements) instead of ``S``
    walks.

    ``symmetric`` (`hessian`): ``f`` is the gradient of a one-element
    function, so its Jacobian is symmetric and column ``e`` is row ``e``,
    the VJP of ``f`` against ``t_e``: one reverse walk, not two."""
    given = _wrt_leaves(args, pos, fname)
    shapes = [tuple(n.shape) for leaves, _ in given for n in leaves]
    sizes = [int(np.prod(s)) for s in shapes]
    total = sum(sizes)
    if total == 0:
        return None   # nothing to differentiate: the loop's zeros
    eye = np.eye(total, dtype=g.dtype)
    tangents, off = [], 0
    for shape, size in zip(shapes, sizes):
        tangents.append(g.constant(np.ascontiguousarray(eye[:, off:off + size])
                                   .reshape((total,) + shape)))
        off += size

    def column(gs, *ts):
        a, wrt = _wrt(gs, args, pos, fname)
        out, _ = _call(f, gs, a, False, fname)
        if symmetric and len(ts) == 1 and int(np.prod(out.shape)) == total:
            (row,) = _grads(gs, out, wrt.flat, grad=gs.reshape(ts[0], out.shape), final=final)
            return gs.reshape(row, out.shape)
        u, vjps = _linear_vjp(gs, out, wrt.flat)
        s = None if vjps is None else _contract(gs, vjps, ts)
        if s is None or not gs.requires_grad(s):
            return _zeros(gs, out.shape)
        (c,) = gs.gradient_constants(s, [u]) if final else gs.gradients(s, [u],
                                                                        create_graph=True)
        return c

    cols = vmap(column, out_axes=-1, randomness="same")(g, *tangents)
    oshape = tuple(cols.shape)[:-1]
    jacs, off = [], 0
    for shape, size in zip(shapes, sizes):
        part = cols if size == total else g.narrow(cols, len(oshape), off, size)
        jacs.append(g.reshape(part, oshape + shape))
        off += size
    wrt = _Wrt()
    for leaves, spec in given:
        wrt.add(leaves, spec)
    return _pick(wrt.split(jacs), argnums)


def hessian(f, argnums=0):
    """``jacfwd(jacrev(f))``: shape ``in.shape + in.shape`` for a one-element
    output (``out.shape + in.shape + in.shape`` in general); for a
    one-element output each column is the symmetric Hessian's row, one
    reverse walk over the gradient (reverse over reverse). The argument
    differentiated is an array or NodeId (the inner Jacobian must be one
    node)."""
    return _jacfwd(_jacrev(f, argnums, False, "hessian"), argnums, False, "hessian",
                   symmetric=True)
