"""Penalised cubic smoothing splines on traced knots: the smoother of `principal_curve`.

A cubic B-spline basis on ``n_knots`` knots at quantiles of the unique x, its
penalty ∫ f''² solved for trace(S) = df by bisection on log ρ (Demmler–Reinsch
form), as R's ``smooth.spline`` does. Public names are re-exported by
`jaxstream.curves.princurve`.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from .. import _ops
from .._checks import check_capacity, is_concrete

Array = jax.Array

_BISECTION_STEPS = 64
_LOG_RHO_RANGE = 30.0  # bisection on log ρ within ±30 around the scaled penalty
_MIN_KNOT_GAP = 0.25  # smallest knot gap, as a fraction of the even spacing


class SplineFit(NamedTuple):
    """A penalised cubic regression spline fitted with `smooth_spline`.

    Attributes:
      fitted: (n, k) fitted values at the input x (0 at masked rows).
      df: () trace of the smoother matrix S (equivalent degrees of freedom).
      penalty_weight: () λ_s of Σ w (y − f)² + λ_s ∫ f''², with x rescaled to
        [0, 1] over the valid points (as ``smooth.spline`` rescales it).
      knots: (n_knots,) knots on the rescaled axis.
      x_range: (2,) min and max of the valid x (the rescaling).
    """

    fitted: Array
    df: Array
    penalty_weight: Array
    knots: Array
    x_range: Array


# --------------------------------------------------------------------------
# Cubic B-splines on traced knots
# --------------------------------------------------------------------------

def _safe_div(a, b):
    ok = b > 0
    return jnp.where(ok, a / jnp.where(ok, b, 1.0), 0.0)


def _bspline_levels(u, t, interval):
    """Cox–de Boor recursion up to degree 3.

    Args:
      u: (q,) evaluation points.
      t: (K + 6,) clamped knot vector (each end knot repeated 4 times).
      interval: (q,) index i of the knot span [t_i, t_{i+1}) holding u.

    Returns:
      List of the degree-0…3 bases, shapes (q, K + 5 − p).
    """
    nb0 = t.shape[0] - 1
    b = (jnp.arange(nb0) == interval[:, None]).astype(u.dtype)
    levels = [b]
    for p in (1, 2, 3):
        nb = nb0 - p
        tj, tjp, tj1, tjp1 = t[:nb], t[p:p + nb], t[1:1 + nb], t[p + 1:p + 1 + nb]
        b = (_safe_div(u[:, None] - tj, tjp - tj) * b[:, :nb]
             + _safe_div(tjp1 - u[:, None], tjp1 - tj1) * b[:, 1:nb + 1])
        levels.append(b)
    return levels


def _deriv(t, b_lower, p):
    """Derivative of the degree-p basis from the degree-(p−1) basis."""
    nb = b_lower.shape[-1] - 1
    left = _safe_div(b_lower[:, :nb], t[p:p + nb] - t[:nb])
    right = _safe_div(b_lower[:, 1:], t[p + 1:p + 1 + nb] - t[1:1 + nb])
    return p * (left - right)


def _clamped(knots):
    return jnp.concatenate([jnp.repeat(knots[:1], 3), knots, jnp.repeat(knots[-1:], 3)])


def _span(u, knots):
    """Knot span (index into the clamped vector) of each u, closed at the right end."""
    k = knots.shape[0]
    i = jnp.searchsorted(knots, u, side="right", method="compare_all") - 1
    return jnp.clip(i, 0, k - 2) + 3


def bspline_design(u: Array, knots: Array) -> Array:
    """Clamped cubic B-spline basis.

    Args:
      u: (q,) points inside [knots[0], knots[-1]].
      knots: (K,) strictly increasing knots (boundary knots included).

    Returns:
      (q, K + 2) basis matrix; each row sums to 1.
    """
    return _bspline_levels(u, _clamped(knots), _span(u, knots))[3]


def bspline_penalty_root(knots: Array) -> Array:
    """A square root E of the roughness penalty: EᵀE = Ω, Ω_ij = ∫ B_i'' B_j''.

    Args:
      knots: (K,) strictly increasing knots.

    Returns:
      (2(K − 1), K + 2) matrix: the basis' second derivatives at two
      Gauss–Legendre points per knot span, times the square roots of the
      quadrature weights (B'' is linear on each span, so the rule is exact).
    """
    t = _clamped(knots)
    a, b = knots[:-1], knots[1:]
    h = b - a
    mid = 0.5 * (a + b)
    off = h / (2.0 * np.sqrt(3.0))
    u = jnp.concatenate([mid - off, mid + off])
    w = jnp.concatenate([h, h]) * 0.5
    span = jnp.concatenate([jnp.arange(knots.shape[0] - 1)] * 2) + 3
    levels = _bspline_levels(u, t, span)
    d2 = _deriv(t, _deriv(t, levels[1], 2), 3)
    return d2 * jnp.sqrt(w)[:, None]


def bspline_penalty(knots: Array) -> Array:
    """Exact roughness penalty Ω_ij = ∫ B_i''(u) B_j''(u) du of the cubic basis.

    Args:
      knots: (K,) strictly increasing knots.

    Returns:
      (K + 2, K + 2) symmetric positive semi-definite matrix (null space: the
      linear functions).
    """
    root = bspline_penalty_root(knots)
    return _ops.matmul(root.T, root)


# --------------------------------------------------------------------------
# Smoothing spline with a target df
# --------------------------------------------------------------------------

def _quantile_knots(u, mask, n_knots):
    """``n_knots`` knots at evenly spaced quantiles of the unique valid u ∈ [0, 1]."""
    n = u.shape[0]
    su = jnp.sort(jnp.where(mask, u, jnp.inf))
    valid = jnp.arange(n) < jnp.sum(mask)
    tol = 1e-6
    new = valid & jnp.concatenate([jnp.ones((1,), bool), su[1:] > su[:-1] + tol])
    n_unique = jnp.sum(new)
    slot = jnp.where(new, jnp.cumsum(new) - 1, n)
    uniq = jnp.zeros((n,), u.dtype).at[slot].set(su, mode="drop")
    pos = jnp.arange(n_knots, dtype=u.dtype) * ((n_unique - 1) / (n_knots - 1))
    lo = jnp.clip(jnp.floor(pos).astype(jnp.int32), 0, n - 1)
    hi = jnp.clip(lo + 1, 0, jnp.maximum(n_unique - 1, 0))
    frac = pos - lo
    q = uniq[lo] + frac * (uniq[hi] - uniq[lo])
    q = q.at[0].set(0.0).at[-1].set(1.0)
    # Knots closer than a fraction of the even spacing make the penalty and
    # Gram matrices too ill-conditioned for float32 (∫B''² grows as gap⁻³):
    # push knots apart to a minimum gap g (k_j = max(q_j, k_{j-1} + g), a
    # running max of q_j − j·g), then rescale onto [0, 1].
    g = _MIN_KNOT_GAP / (n_knots - 1)
    j = jnp.arange(n_knots, dtype=u.dtype)
    lower = j[:, None] >= j[None, :]
    knots = jnp.max(jnp.where(lower, (q - j * g)[None, :], -jnp.inf), axis=1) + j * g
    return knots / knots[-1]


def _trace(mu, rho):
    return jnp.sum(mu / (mu + rho * (1.0 - mu)))


def _tril_inverse(low):
    """Inverse of a lower-triangular matrix, by forward substitution on rows.

    Row i of X = L⁻¹ is (e_i − L[i, :i] X[:i]) / L[i, i]. XLA's CPU triangular
    solve (also behind `jnp.linalg.inv`) is tens of times slower at these
    sizes, and an inverse square root from `eigh` loses too much accuracy in
    float32; a loop keeps the compiled program small.
    """
    n = low.shape[-1]
    eye = jnp.eye(n, dtype=low.dtype)

    def row(i, x):
        # rows >= i of x are still zero, so the full product is L[i, :i] X[:i]
        xi = (eye[i] - _ops.matmul(low[i], x)) / low[i, i]
        return x.at[i].set(xi)

    return lax.fori_loop(0, n, row, jnp.zeros_like(low))


def _rough_eigenvalues(gram, pen, c):
    """Eigenvalues μ in [0, 1] of L⁻¹GL⁻ᵀ, L = chol(G + cΩ) (M × M work only)."""
    linv = _tril_inverse(jnp.linalg.cholesky(gram + c * pen))
    m = _ops.matmul(_ops.matmul(linv, gram), linv.T)
    return jnp.clip(jnp.linalg.eigvalsh(0.5 * (m + m.T)), 0.0, 1.0)


def _demmler_reinsch(basis, root, c):
    """Demmler–Reinsch form of the smoother from an orthogonalisation.

    With [B; √c·E] = QR (Q = [Q1; Q2], Q1 the n data rows) and
    Q1ᵀQ1 = V diag(μ) Vᵀ, the smoother of penalty λ_s = ρc is
    S = Q1 V diag(1/(μ + ρ(1 − μ))) Vᵀ Q1ᵀ and trace(S) = Σ μ/(μ + ρ(1 − μ)).
    Q comes from CholeskyQR2 (two Cholesky orthogonalisation passes, only
    matrix products and M × M factorisations): the second pass works on an
    almost orthonormal matrix, so float32 keeps the accuracy that a single
    Cholesky factor of G + cΩ (whose condition number is squared) loses, at
    a fraction of the cost of a Householder QR on CPU.

    Returns:
      ``(Q1 V, μ)``.
    """
    z = jnp.concatenate([basis, jnp.sqrt(c) * root])
    eye = jnp.eye(z.shape[1], dtype=z.dtype)

    def orthogonalise(_, p):
        zp = _ops.matmul(z, p)
        g = _ops.matmul(zp.T, zp)
        # A relative jitter at rounding level keeps the first factor finite
        # when G + cΩ is numerically singular; the second pass removes it.
        g = g + (jnp.finfo(g.dtype).eps * jnp.trace(g) / g.shape[0]) * eye
        return _ops.matmul(p, _tril_inverse(jnp.linalg.cholesky(g)).T)

    q1 = _ops.matmul(basis, lax.fori_loop(0, 2, orthogonalise, eye))
    mu, vec = jnp.linalg.eigh(_ops.matmul(q1.T, q1))
    return _ops.matmul(q1, vec), jnp.clip(mu, 0.0, 1.0)


def _solve_rho(mu, df):
    """log ρ with Σ μ/(μ + ρ(1 − μ)) = df (bisection; trace decreases in ρ)."""
    def body(_, lohi):
        lo, hi = lohi
        mid = 0.5 * (lo + hi)
        too_big = _trace(mu, jnp.exp(mid)) > df
        return jnp.where(too_big, mid, lo), jnp.where(too_big, hi, mid)
    dt = mu.dtype
    lo, hi = lax.fori_loop(0, _BISECTION_STEPS, body,
                           (jnp.asarray(-_LOG_RHO_RANGE, dt), jnp.asarray(_LOG_RHO_RANGE, dt)))
    return 0.5 * (lo + hi)


def _smooth_spline(x, y, mask, df, n_knots):
    dt = y.dtype
    w = mask.astype(dt)
    lo = jnp.min(jnp.where(mask, x, jnp.inf))
    hi = jnp.max(jnp.where(mask, x, -jnp.inf))
    width = jnp.where(hi > lo, hi - lo, 1.0)
    u = jnp.where(mask, jnp.clip((x - lo) / width, 0.0, 1.0), 0.0)
    knots = _quantile_knots(u, mask, n_knots)
    basis = bspline_design(u, knots) * w[:, None]
    root = bspline_penalty_root(knots)
    gram = _ops.matmul(basis.T, basis)
    pen = _ops.matmul(root.T, root)
    # R's scaling of the penalty (smooth.spline's ratio r) gives a first,
    # rough solve (M × M work); the accurate decomposition is then centred on
    # its solution, so that the μ that decide the trace sit near 1/2.
    c0 = jnp.trace(gram) / jnp.trace(pen)
    c1 = c0 * jnp.exp(_solve_rho(_rough_eigenvalues(gram, pen, c0), df))
    qv, mu = _demmler_reinsch(basis, root, c1)
    rho = jnp.exp(_solve_rho(mu, df))
    y0 = jnp.where(mask[:, None], y, 0.0)  # no 0·NaN from padding
    fitted = _ops.matmul(qv, _ops.matmul(qv.T, y0) / (mu + rho * (1.0 - mu))[:, None])
    fitted = jnp.where(mask[:, None], fitted, 0.0)
    return SplineFit(fitted, _trace(mu, rho), c1 * rho, knots, jnp.stack([lo, hi]))


def smooth_spline(x, y, mask=None, *, df: float = 5.0, n_knots: int = 40) -> SplineFit:
    """Cubic smoothing spline with ``df`` equivalent degrees of freedom.

    Minimises Σ_i w_i (y_i − f(x_i))² + λ_s ∫ f''² over cubic splines with
    ``n_knots`` knots at quantiles of the unique valid x, λ_s chosen so that
    trace(S) = df (S the n × n smoother matrix, w_i = mask_i). It is the
    smoother princurve uses (``smooth.spline(x, y, df = df)``), with the
    differences listed in docs/internals/slpc.md (section "The baseline:
    princurve"). Traceable: with concrete
    inputs it validates them, under a transformation it only checks shapes.

    Args:
      x: (n,) abscissae (any order, ties allowed).
      y: (n,) or (n, k) responses; the k columns share x, hence λ_s.
      mask: (n,) bool, the valid rows (default: all). At least 2 distinct
        valid x are needed.
      df: target trace of the smoother, > 1; values out of reach (below 2 or
        above the number of unique x) give the linear fit or the
        interpolating spline.
      n_knots: number of knots (static), >= 4.

    Returns:
      `SplineFit` (``fitted`` has the shape of ``y``).
    """
    n_knots = check_capacity(n_knots, "n_knots", minimum=4)
    x = jnp.asarray(x)
    y = jnp.asarray(y)
    if x.ndim != 1:
        raise ValueError(f"x must be 1-D; got shape {tuple(x.shape)}")
    squeeze = y.ndim == 1
    y2 = y[:, None] if squeeze else y
    if y2.ndim != 2 or y2.shape[0] != x.shape[0]:
        raise ValueError(f"y must have shape ({x.shape[0]},) or ({x.shape[0]}, k); got {tuple(y.shape)}")
    mask = jnp.ones(x.shape, bool) if mask is None else jnp.asarray(mask).astype(bool)
    if mask.shape != x.shape:
        raise ValueError(f"mask must have shape {tuple(x.shape)}; got {tuple(mask.shape)}")
    dt = jnp.result_type(float, x.dtype, y2.dtype)
    x, y2 = x.astype(dt), y2.astype(dt)
    if all(is_concrete(a) for a in (x, y2, mask)):
        m = np.asarray(mask)
        if not (np.isfinite(np.asarray(x)[m]).all() and np.isfinite(np.asarray(y2)[m]).all()):
            raise ValueError("x and y must be finite at the valid rows")
        if np.unique(np.asarray(x)[m]).size < 2:
            raise ValueError("smooth_spline needs at least 2 distinct valid x")
    if is_concrete(df) and not float(df) > 1.0:
        raise ValueError(f"df must be > 1; got {df}")
    fit = _smooth_spline_jit(x, y2, mask, jnp.asarray(df, dt), n_knots)
    if squeeze:
        fit = fit._replace(fitted=fit.fitted[:, 0])
    return fit


_smooth_spline_jit = jax.jit(_smooth_spline, static_argnums=4)
