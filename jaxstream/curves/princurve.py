"""Hastie–Stuetzle principal curves, as R's princurve 2.1.6 fits them: slpc's batch baseline.

`principal_curve` fits one curve with princurve's defaults (a smoothing spline
of df = 5 per coordinate, ``thresh = 0.001``, ``maxit = 10``, ``stretch = 2``):
it starts from the first principal component line, then alternates smoothing
each coordinate against the projection index λ, stretching the two end
segments and projecting the points back onto the polygonal line, until the
total squared distance stops changing. The returned curve is the stretched
polygonal line the final λ and distances were computed on.

`smooth_spline` is the smoother: a penalised cubic B-spline on ``n_knots``
knots at quantiles of the unique λ, its penalty solved for trace(S) = df.
`sequential_principal_curve_losses` is the slpc paper's "sequential
princurve": refit on x_1..x_t, score x_{t+1}.

Every fit has fixed capacities, a pure function of ``(points[n, d], mask[n])``
that jits and vmaps, so all the refits of a stream run as one batch. The
steps, the smoother and where they differ from R's: docs/internals/slpc.md,
section "The baseline: princurve".
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from .. import _ops
from .._checks import check_capacity, check_points, is_concrete
from ..geometry import polyline_sq_dist, segment_mask, segment_sq_dist

__all__ = ["SplineFit", "PrincipalCurve", "SequentialResult", "smooth_spline", "principal_curve",
           "sequential_principal_curve_losses", "bspline_design", "bspline_penalty", "bspline_penalty_root"]

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


class PrincipalCurve(NamedTuple):
    """A Hastie–Stuetzle principal curve fitted with `principal_curve`.

    Attributes:
      vertices: (n, d) the curve as a polygonal line, vertices in λ order
        (the smoothed values, end segments stretched); rows past
        ``n_vertices`` repeat the last vertex. Use with
        ``jaxstream.geometry.polyline_sq_dist(x, vertices, n_vertices)``.
      n_vertices: () int, number of valid points (one vertex each).
      lam: (n,) projection index λ of each point (arc length along the
        projections, princurve's ``lambda``); 0 at masked rows.
      sqdist: (n,) squared distance of each point to the curve (0 at masked
        rows).
      dist: () total squared distance over the valid points (= Σ sqdist;
        with ``max_iter = 0`` it is the true residual of the principal
        component line, not princurve's n-fold start value).
      projections: (n, d) the projection of each point (princurve's ``s``).
      order: (n,) the valid points' indices in λ order, then the masked ones
        (princurve's ``ord``, 0-based).
      n_iter: () int, number of smoothing iterations run.
      converged: () bool, whether the relative change of ``dist`` fell below
        ``thresh``.
    """

    vertices: Array
    n_vertices: Array
    lam: Array
    sqdist: Array
    dist: Array
    projections: Array
    order: Array
    n_iter: Array
    converged: Array


class SequentialResult(NamedTuple):
    """Output of `sequential_principal_curve_losses`.

    Attributes:
      losses: (T,) prequential losses: ``losses[t]`` (0-based; round t + 1)
        is the squared distance of x_{t+1} (``stream[t]``) to the curve fitted
        on ``stream[:t]``; NaN for ``t < t0``.
      total: () sum of the losses over rounds t0 + 1 … T.
      n_iter: (T,) iterations of each refit (0 for ``t < t0``).
      converged: (T,) whether each refit converged (False for ``t < t0``).
    """

    losses: Array
    total: Array
    n_iter: Array
    converged: Array


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


# --------------------------------------------------------------------------
# Hastie–Stuetzle iteration
# --------------------------------------------------------------------------

def _stretch_ends(verts, m, stretch):
    """princurve's end stretch of the first and last (m-th) vertices."""
    last, prev = verts[m - 1], verts[m - 2]
    first = verts[0] + stretch * (verts[0] - verts[1])
    verts = verts.at[m - 1].set(last + stretch * (last - prev))
    return verts.at[0].set(first)


def _curve_from(values, lam, mask, m, stretch):
    """Vertices: values in λ order (ties by index), stretched, padded with the last one."""
    n = values.shape[0]
    order = jnp.argsort(jnp.where(mask, lam, jnp.inf), stable=True)
    verts = _stretch_ends(values[order], m, stretch)
    return jnp.where((jnp.arange(n) < m)[:, None], verts, verts[m - 1])


def _nearest_segment(x, verts, m):
    """Index of the nearest active segment of each point.

    Same result as `jaxstream.geometry.polyline_projection` up to rounding,
    with (n, V) instead of (n, V, d) intermediates: the n × (V − 1) distances
    are expanded into matrix products, which is what the O(n²) projection
    step of a refit costs. Cancellation in the expansion can only swap
    segments whose distances agree to ~1e-7·|x|² (the caller centres x); the
    distance itself is recomputed exactly on the chosen segment.
    """
    a, b = verts[:-1], verts[1:]
    ab = b - a
    den = jnp.sum(ab * ab, axis=-1)
    num = _ops.matmul(x, ab.T) - jnp.sum(a * ab, axis=-1)
    t = jnp.clip(num / jnp.where(den > 0, den, 1.0), 0.0, 1.0)
    t = jnp.where(den > 0, t, 0.0)
    pa2 = jnp.sum(x * x, axis=-1)[:, None] - 2.0 * _ops.matmul(x, a.T) + jnp.sum(a * a, axis=-1)
    d2 = pa2 - t * (2.0 * num - t * den)
    d2 = jnp.where(segment_mask(m, verts.shape[0]), d2, jnp.inf)
    return jnp.argmin(d2, axis=-1)


def _project(x, mask, verts, m):
    """princurve's ``project_to_curve`` on an already stretched polygonal line."""
    n = x.shape[0]
    seg = _nearest_segment(x, verts, m)
    sqdist, t = segment_sq_dist(x, verts[seg], verts[seg + 1])
    point = verts[seg] + t[:, None] * (verts[seg + 1] - verts[seg])
    key = jnp.where(mask, seg + 0.1 + 0.9 * t, jnp.inf)
    order = jnp.argsort(key, stable=True)
    ps = point[order]
    step = jnp.sqrt(jnp.sum((ps[1:] - ps[:-1]) ** 2, axis=-1))
    step = jnp.where(jnp.arange(1, n) < m, step, 0.0)
    cum = jnp.concatenate([jnp.zeros((1,), x.dtype), jnp.cumsum(step)])
    lam = jnp.zeros((n,), x.dtype).at[order].set(cum)
    sqdist = jnp.where(mask, sqdist, 0.0)
    return dict(lam=jnp.where(mask, lam, 0.0), sqdist=sqdist, dist=jnp.sum(sqdist),
                projections=jnp.where(mask[:, None], point, 0.0), order=order)


def _principal_curve(x, mask, df, max_iter, thresh, stretch, n_knots):
    dt = x.dtype
    w = mask.astype(dt)
    m = jnp.sum(mask.astype(jnp.int32))
    nf = jnp.sum(w)
    xbar = jnp.sum(x * w[:, None], axis=0) / nf
    # Work on centred data (the fit is translation-equivariant), which also
    # keeps the expanded distances of `_nearest_segment` accurate.
    xc = (x - xbar) * w[:, None]
    evals, evecs = jnp.linalg.eigh(_ops.matmul(xc.T, xc))
    v1 = evecs[:, -1]
    # Fix the sign (R's svd sign is arbitrary too) so that fits are reproducible.
    v1 = v1 * jnp.where(v1[jnp.argmax(jnp.abs(v1))] < 0, -1.0, 1.0)
    lam0 = _ops.matmul(xc, v1)
    s0 = jnp.where(mask[:, None], lam0[:, None] * v1, 0.0)
    sq0 = jnp.where(mask, jnp.sum((xc - s0) ** 2, axis=-1), 0.0)
    start = dict(lam=lam0, sqdist=sq0, dist=jnp.sum(sq0), projections=s0,
                 order=jnp.argsort(jnp.where(mask, lam0, jnp.inf), stable=True))
    # princurve's convergence bookkeeping: dist_old = sum(diag(var(x))) and
    # the start's dist = n · Σ_{k>=2} d_k² (n times the true residual).
    var_total = jnp.sum(evals) / (nf - 1.0)
    crit0 = nf * jnp.maximum(jnp.sum(evals) - evals[-1], 0.0)
    carry0 = (jnp.asarray(0, jnp.int32), jnp.abs(var_total - crit0) <= thresh * var_total, crit0,
              _curve_from(s0, lam0, mask, m, stretch), start)

    def cond(c):
        it, done = c[:2]
        return (~done) & (it < max_iter)

    def body(c):
        it, _, crit, _, prev = c
        fit = _smooth_spline(prev["lam"], xc, mask, df, n_knots).fitted
        verts = _curve_from(fit, prev["lam"], mask, m, stretch)
        new = _project(xc, mask, verts, m)
        done = jnp.abs(crit - new["dist"]) <= thresh * crit
        return it + 1, done, new["dist"], verts, new

    it, done, _, verts, cur = lax.while_loop(cond, body, carry0)
    proj = jnp.where(mask[:, None], cur["projections"] + xbar, 0.0)
    return PrincipalCurve(verts + xbar, m, cur["lam"], cur["sqdist"], cur["dist"], proj,
                          cur["order"], it, done)


_principal_curve_jit = jax.jit(_principal_curve, static_argnums=6)


def _check_numeric(df, max_iter, thresh, stretch):
    if is_concrete(df) and not float(df) > 1.0:
        raise ValueError(f"df must be > 1; got {df}")
    if is_concrete(max_iter) and int(max_iter) < 0:
        raise ValueError(f"max_iter must be >= 0; got {max_iter}")
    if is_concrete(thresh) and not float(thresh) >= 0.0:
        raise ValueError(f"thresh must be >= 0; got {thresh}")
    if is_concrete(stretch) and not 0.0 <= float(stretch) <= 2.0:
        raise ValueError(f"stretch must be in [0, 2] (as in princurve); got {stretch}")


def principal_curve(points, mask=None, *, df: float = 5.0, max_iter: int = 10, thresh: float = 1e-3,
                    stretch: float = 2.0, n_knots: int = 40) -> PrincipalCurve:
    """Hastie–Stuetzle principal curve of the valid points (R princurve 2.1.6).

    One pure, jit-compiled function of fixed shapes: vmap it over data sets
    (with masks) or over the numeric parameters. With concrete inputs the
    data are validated first; under a transformation only shapes are.

    Args:
      points: (n, d) data; n is the capacity.
      mask: (n,) bool, the valid rows (default: all). At least 4 valid rows
        and 2 distinct points are needed; masked rows never change the fit.
      df: equivalent degrees of freedom of the smoothing spline (> 1).
      max_iter: maximum number of smoothing/projection iterations (>= 0).
      thresh: convergence threshold on the relative change of the total
        squared distance.
      stretch: factor in [0, 2] by which the two end segments are extended.
      n_knots: number of spline knots (static, >= 4); see `smooth_spline`.

    Returns:
      `PrincipalCurve`. Its ``vertices`` / ``n_vertices`` are the curve.

    Raises:
      ValueError: on a wrong shape, NaN/inf at valid rows, too few valid
        points, or out-of-range parameters.
    """
    n_knots = check_capacity(n_knots, "n_knots", minimum=4)
    x, mask = _prepare(points, mask, "points", min_valid=4)
    _check_numeric(df, max_iter, thresh, stretch)
    dt = x.dtype
    return _principal_curve_jit(x, mask, jnp.asarray(df, dt), jnp.asarray(max_iter, jnp.int32),
                                jnp.asarray(thresh, dt), jnp.asarray(stretch, dt), n_knots)


def _prepare(points, mask, name, min_valid):
    x = check_points(points, name, allow_nonfinite=True)
    n = x.shape[0]
    if mask is None:
        mask = jnp.ones((n,), bool)
    else:
        mask = jnp.asarray(mask)
        if mask.shape != (n,):
            raise ValueError(f"mask must have shape ({n},) to match {name}; got {tuple(mask.shape)}")
        mask = mask.astype(bool)
    if is_concrete(x) and is_concrete(mask):
        xv, mv = np.asarray(x), np.asarray(mask)
        if mv.sum() < min_valid:
            raise ValueError(f"{name} needs at least {min_valid} valid rows; got {int(mv.sum())}")
        bad = ~np.isfinite(xv[mv]).all(axis=1)
        if bad.any():
            first = int(np.flatnonzero(mv)[np.flatnonzero(bad)[0]])
            raise ValueError(f"{name} has {int(bad.sum())} valid row(s) with NaN or inf (first at index {first})")
        if np.all(xv[mv] == xv[mv][0]):
            raise ValueError(f"the valid rows of {name} are all the same point; a curve needs 2 distinct points")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(float)
    # NaN at masked rows must not leak into the fit through 0·NaN.
    x = jnp.where(mask[:, None], x, 0.0)
    return x, mask


# --------------------------------------------------------------------------
# Sequential princurve (refit on x_1..x_t, score x_{t+1})
# --------------------------------------------------------------------------

@partial(jax.jit, static_argnames=("t0", "n_knots", "batch_size"))
def _sequential(xs, df, max_iter, thresh, stretch, *, t0, n_knots, batch_size):
    n_rounds = xs.shape[0]
    data = xs[:-1]  # the last point is only ever scored
    cap = data.shape[0]

    def refit_and_score(t):
        mask = jnp.arange(cap) < t
        fit = _principal_curve(jnp.where(mask[:, None], data, 0.0), mask, df, max_iter, thresh,
                               stretch, n_knots)
        loss = polyline_sq_dist(xs[t][None, :], fit.vertices, fit.n_vertices)[0]
        return loss, fit.n_iter, fit.converged

    # Pad the rounds to a multiple of the batch (repeating the last one) so
    # that lax.map compiles one batched body and no separate remainder.
    n_fits = n_rounds - t0
    n_pad = -n_fits % batch_size
    ts = jnp.minimum(jnp.arange(t0, n_rounds + n_pad), n_rounds - 1)
    loss, n_iter, conv = lax.map(refit_and_score, ts, batch_size=batch_size)
    loss, n_iter, conv = loss[:n_fits], n_iter[:n_fits], conv[:n_fits]
    pad = t0
    losses = jnp.concatenate([jnp.full((pad,), jnp.nan, xs.dtype), loss])
    n_iter = jnp.concatenate([jnp.zeros((pad,), n_iter.dtype), n_iter])
    conv = jnp.concatenate([jnp.zeros((pad,), bool), conv])
    return SequentialResult(losses, jnp.sum(loss), n_iter, conv)


def sequential_principal_curve_losses(stream, t0: int = 20, *, df: float = 5.0, max_iter: int = 10,
                                      thresh: float = 1e-3, stretch: float = 2.0, n_knots: int = 40,
                                      batch_size: int = 8) -> SequentialResult:
    """The slpc paper's "sequential princurve": refit on x_1..x_t, score x_{t+1}.

    For every t = t0 … T − 1 a Hastie–Stuetzle curve (`principal_curve`) is
    fitted on the first t points and the loss of round t + 1 is the squared
    distance of x_{t+1} to it (prequential: the point is scored before it is
    learned). All T − t0 refits run inside one jit-compiled call as a
    ``lax.map`` over t with ``batch_size`` refits vmapped at a time; each refit
    uses the fixed capacity T − 1 and the mask "first t points".

    Memory: the projection step of a refit holds a few (T, T) arrays (point ×
    segment), so a batch needs about ``batch_size · 6 · T²`` numbers
    (≈ 50 MB in float32 for T = 500, batch_size = 8), whatever d. Time
    grows as (T − t0) · T² · iterations: every refit runs at the full
    capacity, and a batch iterates until its slowest refit has converged,
    which is why small batches are as fast on CPU (the refits are already
    vectorised over points and segments); an accelerator may want larger
    ones.

    Args:
      stream: (T, d) observations in arrival order.
      t0: first fit size (static); rounds 1 … t0 get no loss. >= 4, < T.
      df, max_iter, thresh, stretch, n_knots: as in `principal_curve`.
      batch_size: refits vmapped together (static, >= 1).

    Returns:
      `SequentialResult`; ``total`` is Σ of ``losses`` over rounds t0 + 1 … T
      (``losses[t0:]``).

    Raises:
      ValueError: on a wrong shape, NaN/inf, a stream not longer than t0, an
        out-of-range parameter, or first t0 points all equal.
    """
    t0 = check_capacity(t0, "t0", minimum=4)
    n_knots = check_capacity(n_knots, "n_knots", minimum=4)
    batch_size = check_capacity(batch_size, "batch_size", minimum=1)
    xs = check_points(stream, "stream", min_rows=t0 + 1)
    if is_concrete(xs):
        head = np.asarray(xs[:t0])
        if np.all(head == head[0]):
            raise ValueError(f"the first t0={t0} points of stream are all the same point; a curve needs 2 distinct points")
    _check_numeric(df, max_iter, thresh, stretch)
    dt = xs.dtype
    return _sequential(xs, jnp.asarray(df, dt), jnp.asarray(max_iter, jnp.int32), jnp.asarray(thresh, dt),
                       jnp.asarray(stretch, dt), t0=t0, n_knots=n_knots, batch_size=batch_size)
