"""slpc's history: the reservoir of past points and the noise level σ̂² it holds.

While it has room every point is stored (exact full information). Once full,
it is a uniform reservoir sample of x_1 … x_{t−1} (Vitter's algorithm R),
each stored point standing for n/H points; x_t always enters the round's
objective with weight 1 (the scratch row H) before it is offered to the
reservoir.

The noise level σ̂² prices complexity (`jaxstream.curves.objective`). It is a
median of squared residuals kept sorted incrementally (one removal and one
insertion per round: O(H), no sort).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import jax
import jax.numpy as jnp

from .. import _ops
from .._stats import chi2_lower_wh
from .candidates import seg_d2_points

Array = jax.Array

__all__ = ["NOISE_QUANTILE", "NN_INFLATION", "NN_ROWS", "sorted_quantile",
           "sorted_replace", "weighted_median", "arc_weights", "noise_level", "nn_residual", "TREND_WINDOW", "TREND_DEGREE", "trend_residual", "trend_residuals", "HEAD_WINDOW", "ring_last", "trace_head", "ORDER_FULL", "ORDER_NONE", "ORDERED", "arrival_order", "mean_sq_step", "curve_free_residual", "Slot",
           "reservoir_slot"]

NOISE_QUANTILE = 0.5
# `weighted_median` reads the weight at this many sorted values and interpolates between them.
MEDIAN_KNOTS = 16
# The two-nearest-neighbour residual of a point on a noisy curve is about
# 1.5 times its residual to the curve (the two neighbours are noisy too).
NN_INFLATION = 1.5
# The curve-free proxy looks for the two nearest neighbours among the last
# NN_ROWS points (a ring buffer, `State.recent`): a sample of fixed size, so
# its density (and so its bias: in a dense sample the two nearest neighbours
# straddle x across the noise band) does not grow with n; and a sample of
# where the stream is now, so that on a trace or a drifting source the
# neighbours are near x (the oldest points, on a trace, are far from it and
# would make the noise look as large as the distance travelled).
NN_ROWS = 64
# On a dense trace arriving in order the last 64 points are packed closer
# than the noise and the two nearest straddle x at the spacing's scale: the
# chord reads the spacing, not the noise. There the noise is read across a
# quadratic fit in time to the last TREND_WINDOW points
# (`curve_free_residual`, `trend_residual`).
TREND_WINDOW = 16
TREND_DEGREE = 2
# The prediction on a trace in order reaches from the line's end to where the trace is now:
# a straight-line fit in time to its last HEAD_WINDOW points (`trace_head`).
HEAD_WINDOW = 16
# `arrival_order`: the ratio of the ring's mean squared step between
# consecutive points to twice its variance is about 1 for points i.i.d. along
# a curve and small on traces arriving in order (the measured ranges behind
# the two thresholds: docs/internals/slpc.md, "Arrival order"); between
# ORDER_FULL and ORDER_NONE the order weight falls linearly from 1 to 0.
ORDER_FULL = 0.4
ORDER_NONE = 0.7
# The weight from which the trend noise proxy, the head path and the drift gate
# treat the stream as a trace (the length unit uses the weight itself).
ORDERED = 0.5


def sorted_quantile(srt, n, extra, use_extra, q: float):
    """q-quantile (linear interpolation) of the n values of the sorted array
    srt (inf-padded) plus, if use_extra, the value extra — without a sort: O(len(srt))."""
    m = n + use_extra.astype(n.dtype)
    pe = jnp.sum(srt < extra).astype(jnp.int32)  # extra's rank among srt
    size = srt.shape[0]

    def at(i):
        s_i = srt[jnp.clip(i, 0, size - 1)]
        s_m1 = srt[jnp.clip(i - 1, 0, size - 1)]
        return jnp.where(use_extra, jnp.where(i < pe, s_i, jnp.where(i == pe, extra, s_m1)), s_i)

    pos = q * jnp.maximum(m - 1, 0).astype(srt.dtype)
    i = jnp.floor(pos).astype(jnp.int32)
    frac = pos - i
    return at(i) * (1 - frac) + at(jnp.minimum(i + 1, jnp.maximum(m - 1, 0))) * frac


def sorted_replace(srt, old, remove, new, insert):
    """srt (sorted, inf-padded) with one copy of `old` removed (if remove) and
    `new` inserted (if insert), O(len(srt)). With remove, `old` must be in
    srt (in a round it is a stored row's value); otherwise the result may
    not be sorted.

    Both ranks are counted on srt itself, and the result is one elementwise
    select among srt shifted by −1, 0, +1: two independent reductions and
    one elementwise pass (removing and then inserting would chain twice as
    many dependent operations).
    """
    n = srt.shape[0]
    i = jnp.arange(n)
    inf = jnp.full((1,), jnp.inf, srt.dtype)
    nxt = jnp.concatenate([srt[1:], inf])
    prv = jnp.concatenate([srt[:1], srt[:-1]])  # prv[0] is never used
    p = jnp.sum(srt < old)
    removed = remove & (p < n)
    q = jnp.sum(srt < new) - (removed & (old < new)).astype(p.dtype)  # new's rank after the removal
    # After the removal, row k is srt[k] (k < p) or srt[k + 1]; row k − 1 likewise.
    at_k = jnp.where(removed & (i >= p), nxt, srt)
    at_km1 = jnp.where(removed & (i - 1 >= p), srt, prv)
    out = jnp.where(i < q, at_k, jnp.where(i == q, new, at_km1))
    return jnp.where(insert, out, at_k)


def weighted_median(srt, vals, weights, n=None):
    """The weighted median of `vals` (m,) with `weights` (m,) >= 0, read off sorted candidates.

    ``srt`` (k,) holds candidate values in increasing order, the first ``n``
    of them valid (default all; the stored rows' values). The weight at or
    below `MEDIAN_KNOTS` of them, evenly spaced in rank from the first to the
    n-th, is summed in one dense pass; the median is interpolated linearly in
    that weight between the two consecutive knots that straddle half the
    total (the first knot when it already reaches half). +inf when every
    weight is 0 or no knot reaches half. No sort, no loop: one pass over
    MEDIAN_KNOTS·m entries (512 stored rows: knots 34 ranks, 7 %, apart).
    """
    k = srt.shape[0]
    n = jnp.asarray(k if n is None else n, jnp.int32)
    last = jnp.clip(n - 1, 0, k - 1)
    J = min(MEDIAN_KNOTS, k)
    idx = jnp.round(jnp.arange(J, dtype=srt.dtype) * last.astype(srt.dtype) / max(J - 1, 1)).astype(jnp.int32)
    c = srt[idx]
    half = 0.5 * jnp.sum(weights)
    mass = jnp.sum(jnp.where(vals[None, :] <= c[:, None], weights[None, :], 0.0), 1)
    i = jnp.argmax(mass >= half)
    lo_c, hi_c = c[jnp.maximum(i - 1, 0)], c[i]
    lo_m, hi_m = jnp.where(i > 0, mass[jnp.maximum(i - 1, 0)], 0.0), mass[i]
    frac = jnp.clip((half - lo_m) / jnp.where(hi_m > lo_m, hi_m - lo_m, 1.0), 0.0, 1.0)
    out = jnp.where(i > 0, lo_c + frac * (hi_c - lo_c), hi_c)
    ok = (half > 0) & (mass[i] >= half) & jnp.isfinite(hi_c)
    return jnp.where(ok, out, jnp.inf)


def arc_weights(seg, tpar, valid, w, verts, nv):
    """(n,) what each row weighs in the noise level: its share of the line's length.

    A row that projects inside segment k of the line weighs
    ``w·ℓ_k / Σ w`` over the rows inside segment k, so every stretch of line
    counts by its length, however many points lie along it: a trace that
    dwells (a ferry at its pier: half its reports) or a dense stretch does not
    outvote the rest of the line. A row that projects past one of the line's
    ends (new ground not yet covered) weighs 0.

    Args:
      seg: (n,) each row's nearest segment; tpar: (n,) its position on it in [0, 1].
      valid: (n,) the rows in the objective; w: (n,) their weights.
      verts: (V, d) the line's vertices; nv: their number.
    """
    V = verts.shape[0]
    seg_len = jnp.sqrt(_ops.coord_sum((verts[1:] - verts[:-1]) ** 2))
    seg_len = jnp.where(jnp.arange(V - 1) < nv - 1, seg_len, 0.0)
    past_end = ((seg == 0) & (tpar <= 0.0)) | ((seg == nv - 2) & (tpar >= 1.0))
    along = jnp.where(valid & ~past_end, w, 0.0)
    count = _ops.segment_sum(along, seg, V - 1)
    share = seg_len / jnp.where(count > 0, count, 1.0)
    return along * share[seg]


# Wide signature: the history's sorted and stored residuals, as the round holds them.
def noise_level(sorted_e, sorted_r, vals_e, vals_r, weights, n, e_x, r_x, use_x, d: int):
    """σ̂²: the per-coordinate noise variance the price is measured in.

    Residuals to a curve in R^d with isotropic noise σ² are σ²·χ²_{d−1}, so
    a median squared residual divided by χ²_{d−1}'s median estimates σ². The
    residuals used are each row's *prequential* one, its distance to the
    line before the line learned it (``hist_e``): the current line's own
    residuals fall as the line folds into the noise band, which lowers the
    price, which lets it fold more. In the first rounds the prequential
    residuals are the misfit, not the noise, and would price out the very
    vertices that fix it; the same statistic of each point's curve-free
    residual (``hist_r``, `curve_free_residual`) needs no curve. σ̂² is the
    smaller of the two.

    The medians are weighted by `arc_weights`: the noise of a summary is the
    scatter *along the line*, each stretch counted by its length, not by how
    many points happen to lie on it (a trace that dwells at one place for
    many reports would otherwise price the whole line at the jitter there,
    and the line would fold through the band elsewhere). The weighted median
    is read among the stored rows' values (x_t's
    weight counts, its value is not a candidate). With no weight (no row
    projects inside the line, or the weighted median lies past the stored
    values) the plain medians of the `n` stored rows and x_t are used.

    Args:
      sorted_e, sorted_r: (H,) the stored rows' prequential and curve-free
        residuals, sorted (inf-padded).
      vals_e, vals_r: (H + 1,) the same per row, x_t's in row H.
      weights: (H + 1,) `arc_weights` (0 for rows not in the objective).
      n: number of stored rows.
      e_x, r_x: x_t's residuals; use_x: whether x_t is in the objective.
      d: dimension.
    """
    q = chi2_lower_wh(max(d - 1, 1), NOISE_QUANTILE)

    def median(srt, vals, extra):
        plain = sorted_quantile(srt, n, extra, use_x, NOISE_QUANTILE)
        # x_t's weight counts; its value is not a candidate (the median is read among the stored
        # rows': inserting it into the sorted candidates cost more than the rest of the statistic)
        arc = weighted_median(srt, vals, weights, n)
        return jnp.where(jnp.isfinite(arc), arc, plain)

    # both statistics in one batched computation (half the kernels)
    me, mr = jax.vmap(median)(jnp.stack([sorted_e, sorted_r]), jnp.stack([vals_e, vals_r]), jnp.stack([e_x, r_x]))
    return jnp.minimum(me, mr / NN_INFLATION) / q


def mean_sq_step(recent, n_seen):
    """() the mean squared distance between consecutive points of the ring of recent points.

    Args:
      recent: (NN_ROWS, d) the ring, point n in row n mod NN_ROWS.
      n_seen: () points in the ring so far (all rows valid from NN_ROWS on).
    """
    R = recent.shape[0]
    rows = jnp.arange(R)
    # row k holds the successor of row k − 1, except the oldest row of a full ring
    # (its row − 1 holds the newest point) and row 0 of a ring not yet wrapped
    pair = (rows < n_seen) & jnp.where(n_seen >= R, rows != n_seen % R, rows >= 1)
    step = _ops.coord_sum((recent - jnp.roll(recent, 1, axis=0)) ** 2)
    return jnp.sum(jnp.where(pair, step, 0.0)) / jnp.maximum(jnp.sum(pair), 1).astype(recent.dtype)


def arrival_order(recent, n_seen):
    """How much the last points arrived in order along a trace: a weight in [0, 1].

    The statistic is the ring's mean squared distance between consecutive
    points over twice the variance of its points (the mean squared distance
    between two of them): about 1 when the points arrive in random order
    along a curve, small when each point lies near the previous one compared
    with the ring's extent (a GPS trace, a loop driven in order). The weight
    is 1 below `ORDER_FULL`, 0 above `ORDER_NONE`, linear between, and 0
    before 16 points. Scale-, shift- and rotation-free.

    Args:
      recent: (NN_ROWS, d) the ring of recent points, point n in row n mod NN_ROWS.
      n_seen: () points in the ring so far (all rows valid from NN_ROWS on).

    Returns:
      () the weight (1: in order).
    """
    dt = recent.dtype
    valid = jnp.arange(recent.shape[0]) < n_seen
    m = jnp.maximum(jnp.sum(valid), 1).astype(dt)
    mean = jnp.sum(jnp.where(valid[:, None], recent, 0.0), 0) / m
    var = jnp.sum(jnp.where(valid, _ops.coord_sum((recent - mean) ** 2), 0.0)) / m
    ratio = mean_sq_step(recent, n_seen) / jnp.maximum(2.0 * var, jnp.finfo(dt).tiny)
    weight = jnp.clip((ORDER_NONE - ratio) / (ORDER_NONE - ORDER_FULL), 0.0, 1.0)
    return jnp.where(n_seen >= 16, weight, 0.0).astype(dt)


def _trend_rows(m: int, deg: int = TREND_DEGREE):
    """The fit of a degree-`deg` polynomial in time to m consecutive points, as rows of
    weights (NumPy, static): for each position c of the window, ``(hat[c] (m,), slope[c] (m,),
    1 − leverage[c])``: the fitted point at c, the fitted velocity at c, and the factor by which
    noise at c shrinks in the residual (ordinary least squares, E r_c² = (1 − h_c)·σ²)."""
    t = np.arange(m, dtype=np.float64)
    t = (t - t.mean()) / max(t.std(), 1.0)
    X = np.stack([t ** k for k in range(deg + 1)], 1)
    pinv = np.linalg.pinv(X)
    hat = X @ pinv
    dX = np.stack([k * t ** max(k - 1, 0) for k in range(deg + 1)], 1)
    return hat, dX @ pinv, 1.0 - np.diag(hat)


def _across_trend(P, resid_row, slope_row, shrink):
    """The residual across the fit, given the fit's rows at one position (see `trend_residual`)."""
    # Weighted sums as elementwise products and a sum over the points: every coordinate is
    # summed in the same order. That makes the residual exact under sign flips and powers of
    # 2 (tested); under a coordinate swap XLA:CPU's fused multiply-adds still round the
    # coordinate sums differently in the last bit.
    r = jnp.sum(resid_row[:, None] * P, 0)
    v = jnp.sum(slope_row[:, None] * P, 0)
    vv = _ops.coord_sum(v * v)
    along = jnp.where(vv > 0, _ops.coord_sum(r * v) ** 2 / jnp.where(vv > 0, vv, 1.0), 0.0)
    return jnp.maximum(_ops.coord_sum(r * r) - along, 0.0) / shrink


def trend_residual(P, c: int):
    """The squared residual of point c of m consecutive points P (m, d) across a local
    polynomial fit in time, scaled to be unbiased: about σ²·χ²_{d−1}.

    The points of a trace arriving in order, fitted by a quadratic in their arrival index
    (`TREND_DEGREE`), leave residuals that are the noise: the trace's own curvature is in the
    fit. The component along the fitted velocity is dropped (a receiver's irregular speed
    moves points along the trace, not across it), so the residual counts d − 1 coordinates of
    noise, like the distance to a curve; it is divided by 1 − h_c (h_c the fit's leverage at c).

    Args:
      P: (m, d) consecutive points in arrival order (m > TREND_DEGREE + 1).
      c: static index of the point whose residual is returned.

    Returns:
      () the residual.
    """
    hat, slope, shrink = _trend_rows(P.shape[0])
    dt = P.dtype
    resid = np.eye(P.shape[0])[c] - hat[c]
    return _across_trend(P, jnp.asarray(resid, dt), jnp.asarray(slope[c], dt), float(shrink[c]))


def trend_residuals(P):
    """`trend_residual` of every point of a run of n >= `TREND_WINDOW` points in arrival order,
    each across the fit to the `TREND_WINDOW` consecutive points centred on it (clipped to
    the run's ends): (n,)."""
    n, m = P.shape[0], TREND_WINDOW
    hat, slope, shrink = _trend_rows(m)
    starts = np.clip(np.arange(n) - m // 2, 0, n - m)
    pos = np.arange(n) - starts
    dt = P.dtype
    windows = P[starts[:, None] + np.arange(m)[None]]  # (n, m, d)
    resid = jnp.asarray(np.eye(m)[pos] - hat[pos], dt)
    return jax.vmap(_across_trend)(windows, resid, jnp.asarray(slope[pos], dt), jnp.asarray(shrink[pos], dt))


def ring_last(recent, n_seen, m: int):
    """(m, d) the last m points of the ring of recent points, oldest first (point n is in row
    n mod NN_ROWS; rows before the first point wrap onto the ring's end)."""
    return recent[(n_seen - m + jnp.arange(m)) % recent.shape[0]]


def trace_head(recent, n_seen):
    """Where a trace arriving in order is now: a straight-line fit in time to its last
    `HEAD_WINDOW` points (ordinary least squares on the arrival index), at the newest one.

    Args:
      recent: (NN_ROWS, d) the ring of recent points, point n in row n mod NN_ROWS.
      n_seen: () points in the ring so far (at least `HEAD_WINDOW` for a meaningful fit).

    Returns:
      ``(position (d,), velocity (d,))``: the fitted newest point and the fitted step per
      point.
    """
    m = HEAD_WINDOW
    P = ring_last(recent, n_seen, m)
    t = np.arange(m, dtype=np.float64) - (m - 1) / 2
    dt = P.dtype
    mean = jnp.mean(P, 0)
    velocity = jnp.sum(jnp.asarray(t / np.sum(t * t), dt)[:, None] * (P - mean), 0)  # as in `_across_trend`
    return mean + float(t[-1]) * velocity, velocity


def curve_free_residual(u, recent, n_seen, ordered=True):
    """x_t's curve-free residual: the chord's, or on a trace arriving in order the trend's.

    The chord proxy (`nn_residual` among the ring of recent points) is
    calibrated for neighbours spaced along the curve; on a dense trace
    arriving in order (spacing ≪ σ) it measures the spacing, not the noise,
    every price is too cheap and the line folds in the noise band. On a
    stream arriving in order (``ordered``, from `arrival_order`) with at
    least `TREND_WINDOW` points the residual is instead the middle point's
    across a quadratic fit in time to the last `TREND_WINDOW` points, x_t
    included (`trend_residual`), times `NN_INFLATION` (the chord's
    calibration). What each proxy reads on which stream:
    docs/internals/slpc.md, "The noise level".

    Args:
      u: (d,) x_t (standardised).
      recent: (NN_ROWS, d) the ring of recent points, point n in row n mod NN_ROWS.
      n_seen: () points seen before x_t.
      ordered: () bool, whether the stream arrives in order (False: the chord alone).

    Returns:
      () the residual (0 before two points).
    """
    R, m = recent.shape[0], TREND_WINDOW
    r_chord = nn_residual(u, recent, jnp.arange(R) < n_seen)
    window = jnp.concatenate([ring_last(recent, n_seen, m - 1), u[None]])
    r_trend = trend_residual(window, m // 2) * NN_INFLATION
    return jnp.where(ordered & (n_seen >= m - 1), r_trend, r_chord)


def nn_residual(u, P, valid):
    """Squared distance of u (d,) to the segment joining its two nearest valid rows of P (n, d)."""
    d2 = jnp.where(valid, _ops.coord_sum((P - u) ** 2), jnp.inf)
    i1 = jnp.argmin(d2)
    i2 = jnp.argmin(d2.at[i1].set(jnp.inf))
    r, _ = seg_d2_points(u[None], P[i1], P[i2])
    return jnp.where(jnp.isfinite(d2[i2]), r[0], 0.0)


class Slot(NamedTuple):
    """Where the reservoir puts x_t.

    Attributes:
      put: whether x_t is stored.
      full: whether the history was full before the round.
      row: the row that takes x_t (H, the scratch row, when it is not stored).
      n_stored: rows stored after the round.
    """

    put: Array
    full: Array
    row: Array
    n_stored: Array


def reservoir_slot(uniform, n_seen, n_stored, H: int, store: bool, memory=float("inf")) -> Slot:
    """Vitter's algorithm R for x_t, the n_seen-th point (counting it), biased to
    recent points when ``memory`` is finite.

    Once full, x_t takes row j = ⌊u·m⌋ if j < H, with m = min(n_seen,
    max(memory, H)): a uniform sample of the past (m = n_seen, algorithm R)
    until n_seen passes max(memory, H), then each point enters with
    probability H/m into a uniform row, so a row survives a round with
    probability 1 − 1/m: the rows' ages are geometric (an exponentially
    biased reservoir, Aggarwal 2006).

    Args:
      uniform: a uniform in [0, 1).
      n_seen: points learned, x_t included.
      n_stored: rows stored before the round.
      H: capacity.
      store: whether the round stores x_t at all (False: offline refit).
      memory: τ, the forgetting time scale (inf: none).
    """
    full = n_stored >= H
    m = jnp.minimum(n_seen.astype(uniform.dtype), jnp.maximum(memory, float(H)))
    j = jnp.minimum((uniform * m).astype(jnp.int32), n_seen - 1)
    put = store & ((~full) | (j < H))
    row = jnp.where(full, j, n_stored)
    row = jnp.where(put, row, H)  # H: the scratch row writes onto itself
    return Slot(put, full, row, jnp.where(put & ~full, n_stored + 1, n_stored))


class Rows(NamedTuple):
    """The history's per-row arrays (see `jaxstream.curves.State`)."""

    hist_x: Array
    hist_r: Array
    hist_t: Array
    hist_e: Array
    sorted_r: Array
    sorted_e: Array


def offer(rows: Rows, slot: Slot, u, r_u, e_u, t_u) -> Rows:
    """The history after offering x_t (standardised u, residuals r_u, e_u) to the reservoir.

    ``rows.hist_r`` / ``rows.hist_e`` hold x_t's residuals in the scratch row
    already (so that the value a stored row gives up is read from the row the
    reservoir chose, whichever it is).
    """
    sr = sorted_replace(rows.sorted_r, rows.hist_r[slot.row], slot.put & slot.full, r_u, slot.put)
    se = sorted_replace(rows.sorted_e, rows.hist_e[slot.row], slot.put & slot.full, e_u, slot.put)
    return Rows(rows.hist_x.at[slot.row].set(u), rows.hist_r.at[slot.row].set(r_u),
                rows.hist_t.at[slot.row].set(t_u), rows.hist_e.at[slot.row].set(e_u), sr, se)
