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
from ._spline import (SplineFit, _smooth_spline, bspline_design, bspline_penalty, bspline_penalty_root,
                      smooth_spline)

__all__ = ["SplineFit", "PrincipalCurve", "SequentialResult", "smooth_spline", "principal_curve",
           "sequential_principal_curve_losses", "bspline_design", "bspline_penalty", "bspline_penalty_root"]

Array = jax.Array


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
