"""What lets slpc follow a stream that moves: the data's current extent, the ring of
recent points, forgetting with an automatic memory, and the drift offset.

A stream can leave the region its first points came from in two ways, and
slpc handles both without being told which:

* **A trace advances** (new ground, old ground still valid): the length
  price, R and L are measured in the data's current extent (`extent`), and
  the curve-free noise proxy looks for neighbours among the last points
  (`remember`), not the oldest.
* **A source drifts** (old ground is stale): a row of age a weighs
  ``exp(−a/τ)`` in the objective (`row_weights`; the reservoir keeps recent
  rows). τ (`Params.memory`) is fixed, infinite (the paper's objective) or,
  by default (NaN), automatic (`follow_drift`): it shrinks while new points
  lie farther from the old points than from the recent ones, and grows
  otherwise. On a stream in random order with a finite memory the
  prequential loss measures x_t against the line moved by the source's
  estimated offset (`drift_offset`); the line itself does not move.

Guarantee: with τ = inf the objective is the paper's (regret O(√T) against
the best fixed line). With a finite τ, follow-the-perturbed-leader on the
discounted loss competes with the best line on each window of about τ
rounds instead; no bound is claimed for the moved line. The drift test, its
constants and the guarantee in full: docs/internals/slpc.md, section
"Streams that move".
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from .. import _ops, geometry
from . import history
from .objective import Params
from .types import Observation, State

Array = jax.Array

__all__ = ["extent", "DRIFT_FAR", "remember", "memory", "row_weights", "drift_offset",
           "offset_fit", "across", "DRIFT_RIDGE", "follow_drift", "DRIFT_EMA", "DRIFT_HIGH", "DRIFT_FACTOR",
           "DRIFT_MIN_OLD", "DRIFT_SPAN", "MEMORY_SHRINK", "MEMORY_MIN"]

#: Weight of the past in the drift score, an exponential moving average of the rounds' verdicts.
DRIFT_EMA = 0.9
#: The drift score above which the automatic memory τ shrinks.
DRIFT_HIGH = 0.5
#: x_t counts as "farther" when its squared distance to the chord of its two nearest old points
#: exceeds DRIFT_FACTOR times the larger of its curve-free residual and σ̂².
DRIFT_FACTOR = 2.0
#: The fewest rows older than the memory for a round to test x_t.
DRIFT_MIN_OLD = 20
#: A round tests x_t only when more than this share of the old rows project on each side of it along the line.
DRIFT_SPAN = 0.2
#: Factor by which τ shrinks in a round whose drift score is above DRIFT_HIGH.
MEMORY_SHRINK = 0.9
#: The shortest automatic memory, in rounds.
MEMORY_MIN = 30.0
#: On a stream arriving in order, x_t whose squared distance to the chord of its two nearest old points exceeds
#: DRIFT_FAR·σ̂² is on new ground: the round does not test it.
DRIFT_FAR = 25.0
#: Ridge of the drift offset's least-squares fit, relative to its mean diagonal (`offset_fit`).
DRIFT_RIDGE = 1e-6


def extent(hx, valid, verts, nv, prm: Params, p: int):
    """The data's current scale, and the round's R and L, from the objective's rows.

    Args:
      hx: (H + 1, d) the history (standardised); valid: (H + 1,) the rows in the objective.
      verts: (V, d) the line's vertices; nv: their number.
      prm: `Params` (R, L > 0: user-given, kept; 0: automatic).
      p: max_segments.

    Returns:
      ``(spread, params)``: the RMS distance of the rows to their mean
      (floored at δ; the length price is measured in it), and `prm` with R
      (auto: the rows' largest norm / √d) and L (auto: max(0.1·p·d·R, 2·ℓ(f̂)),
      so the current line is always feasible) resolved.
    """
    d = hx.shape[1]
    wv = valid.astype(hx.dtype)
    cnt = jnp.maximum(jnp.sum(wv), 1.0)
    mean = jnp.sum(jnp.where(valid[:, None], hx, 0.0), 0) / cnt  # (not a matrix product: the same sum order under vmap)
    spread = jnp.sqrt(jnp.sum(wv * _ops.coord_sum((hx - mean) ** 2)) / cnt)
    r_auto = jnp.sqrt(jnp.max(jnp.where(valid, _ops.coord_sum(hx * hx), 0.0))) / math.sqrt(d)
    R = jnp.where(prm.R > 0, prm.R, jnp.maximum(r_auto, prm.delta))
    L = jnp.where(prm.L > 0, prm.L, jnp.maximum(0.1 * p * d * R, 2.0 * geometry.polyline_length(verts, nv)))
    spread = jnp.maximum(spread, prm.delta)
    return _ops.materialize((spread, prm._replace(R=R, L=L)))


def remember(recent, u, n_seen):
    """The ring of recent points (NN_ROWS, d) with u in row n_seen mod NN_ROWS."""
    return recent.at[n_seen % history.NN_ROWS].set(u)


def memory(state: State) -> Array:
    """τ_t: the round's forgetting time scale (`Params.memory`, or the automatic one when NaN)."""
    return jnp.where(jnp.isnan(state.params.memory), state.memory, state.params.memory)


def row_weights(state: State) -> Array:
    """(H + 1,) what each stored row weighs in the objective (rows past n_stored: meaningless).

    A row stands for m/n_stored points, m = min(n_seen, max(τ, H)) (n_seen for
    a uniform reservoir), discounted by exp(−age/τ).
    """
    H = state.hist_x.shape[0] - 1
    dt = state.params.delta.dtype
    tau = memory(state)
    m = jnp.minimum(state.n_seen.astype(dt), jnp.maximum(tau, float(H)))
    age = (state.n_seen - state.hist_t).astype(dt)
    return m / jnp.maximum(state.n_stored, 1).astype(dt) * jnp.exp(-age / tau)


def across(rows, verts, seg, t):
    """Each row's residual to its projection on a line, and the unit direction of the segment it
    projects inside (zeros at an end, or on a segment of length 0).

    Args:
      rows: (n, d); verts: (V, d) the line's vertices.
      seg: (n,) int each row's nearest segment; t: (n,) its position on it, in [0, 1].

    Returns:
      ``(r, unit)``, (n, d) each.
    """
    a = verts[seg]
    ab = verts[seg + 1] - a
    len2 = _ops.coord_sum(ab * ab)
    inside = (t > 0) & (t < 1) & (len2 > 0)
    unit = ab * jnp.where(inside, jax.lax.rsqrt(jnp.where(inside, len2, 1.0)), 0.0)[:, None]
    return rows - (a + t[:, None] * ab), unit


def _fit(r, unit, w, s):
    """`offset_fit` from `across`'s residuals and directions. P_i = I − u_i·u_iᵀ is never formed:
    Σ w·s^k·P = (Σ w·s^k)·I − Uᵀ·diag(w·s^k)·U, and P·r = r − u·(u·r)."""
    d = r.shape[1]
    dt = r.dtype
    eye = jnp.eye(d, dtype=dt)
    Pr = r - unit * _ops.coord_sum(unit * r)[:, None]

    def moment(c):  # Σ c_i·P_i, (d, d)
        return jnp.sum(c) * eye - _ops.matmul((c[:, None] * unit).T, unit)

    ws = w * s
    G = jnp.block([[moment(w), -moment(ws)], [-moment(ws), moment(ws * s)]])
    b = jnp.concatenate([_ops.matmul(w, Pr), -_ops.matmul(ws, Pr)])
    # The ridge is DRIFT_RIDGE times G's mean diagonal, floored by the rows' total weight: in 1-D
    # (or wherever every row projects inside the line) no direction is across it, G is 0 up to
    # rounding, and a ridge in its own trace alone let that rounding through (offsets of 1e23,
    # infinite losses).
    floor = (jnp.sum(w) + jnp.sum(ws * s)) / (4 * d)
    ridge = DRIFT_RIDGE * jnp.maximum(jnp.trace(G) / (2 * d), floor) + jnp.finfo(dt).tiny
    out = jnp.linalg.solve(G + ridge * jnp.eye(2 * d, dtype=dt), b)[:d]
    return jnp.where(jnp.isfinite(out), out, 0.0)


def offset_fit(rows, w, s, verts, nv) -> Array:
    """The weighted least-squares offset of rows from a line, at age 0 (`drift_offset`'s fit).

    Minimises Σ_i w_i·‖P_i·(r_i − o + s_i·v)‖² over o and v, where r_i is row
    i's residual to the line (the row less its projection) and P_i projects
    across the segment it projects onto (I at an end), and returns o.

    Args:
      rows: (n, d) points.
      w: (n,) weights ≥ 0 (0: padding).
      s: (n,) each row's age in any fixed unit (0: the round the offset is for).
      verts: (V, d) the line's vertices; nv: their number (≥ 2).

    Returns:
      (d,) o. A ridge of DRIFT_RIDGE times the mean diagonal (at least a
      share of the rows' total weight) keeps directions no row sees (along a
      straight line; every direction in 1-D) at 0; zeros when every weight
      is 0.
    """
    pj = geometry.polyline_projection(rows, verts, nv)
    return _fit(*across(rows, verts, pj["segment"], pj["t"]), w, s)


def drift_offset(state: State, projection=None, weights=None) -> Array:
    """(d,) standardised: how far the source has moved, at the next point's round, from where
    the line stands (zero with an unlimited memory).

    The line fits the remembered rows, weighted by exp(−age/τ), so on a
    drifting source it stands about τ rounds behind the stream. Each row's
    residual to the line, across it (the part a move of the line can
    explain: the component orthogonal to its segment; all of it at an end),
    is fitted by weighted least squares (the objective's row weights) as
    w − (a_i/τ)·v: a constant offset w of the source at age 0, the next
    point's round, less a constant velocity v per τ rounds (`offset_fit`).
    ``w`` is returned. On a stationary source w is noise of variance about
    σ̂²/n per direction; the memory is unlimited there unless the drift
    test fired.

    Args:
      state: slpc `State` (before the round: row H, the scratch row, is not used).
      projection: optional ``(seg, t)``, (H,) each: the stored rows' nearest
        segments and positions on the current line, when the round has them
        (the cache's minima); computed otherwise.
      weights: optional (H,) the stored rows' objective weights, zero past
        ``n_stored`` (the round's `Observation.w`); `row_weights` otherwise.

    Returns:
      (d,) the offset w in standardised units; zeros when τ is infinite.
    """
    H = state.hist_x.shape[0] - 1
    dt = state.params.delta.dtype
    tau = memory(state)
    finite = jnp.isfinite(tau)
    rows, verts = state.hist_x[:H], state.std_vertices
    if projection is None:
        pj = geometry.polyline_projection(rows, verts, state.n_vertices)
        projection = (pj["segment"], pj["t"])
    if weights is None:
        weights = jnp.where(jnp.arange(H) < state.n_stored, row_weights(state)[:H], 0.0)
    w = jnp.where(finite, weights, 0.0)
    s = jnp.where(finite, (state.n_seen - state.hist_t[:H]).astype(dt) / jnp.where(finite, tau, 1.0), 0.0)
    return jnp.where(finite, _fit(*across(rows, verts, *projection), w, s), 0.0)


def follow_drift(state: State, obs: Observation, r_u):
    """The next automatic memory τ and drift score, after a round that stores x_t.

    Args:
      state: the state before the round.
      obs: the round's `Observation`.
      r_u: x_t's squared distance to the chord of its two nearest recent points.

    Returns:
      ``(memory, drift)`` for the next state (the test: docs/internals/slpc.md,
      section "The automatic memory").
    """
    H = obs.hx.shape[0] - 1
    dt = obs.sigma2.dtype
    horizon = jnp.minimum(state.memory, 0.5 * state.n_seen.astype(dt))  # half the stream while unlimited
    age = (state.n_seen - state.hist_t[:H]).astype(dt)
    old = (jnp.arange(H) < state.n_stored) & (age > horizon)
    n_old = jnp.sum(old)
    # positions along the line, compared as (segment, parameter) pairs
    seg, t = obs.seg[:H], obs.tpar[:H]
    seg_x, t_x = obs.seg[H], obs.tpar[H]
    below = jnp.sum(old & ((seg < seg_x) | ((seg == seg_x) & (t < t_x))))
    above = jnp.sum(old & ((seg > seg_x) | ((seg == seg_x) & (t > t_x))))
    span = DRIFT_SPAN * n_old
    r_old = history.nn_residual(obs.u, obs.hx[:H], old)
    # On a trace arriving in order, x_t far from every old point is on new ground (it projects
    # among old points past a fold of the line too); a drifting source's old points lie a few σ away.
    near = (r_old <= DRIFT_FAR * obs.noise2) | (obs.order < history.ORDERED)
    counts = (n_old >= DRIFT_MIN_OLD) & (below > span) & (above > span) & near
    farther = (r_old > DRIFT_FACTOR * jnp.maximum(r_u, obs.noise2)).astype(dt)
    drift = jnp.where(counts, DRIFT_EMA * state.drift + (1 - DRIFT_EMA) * farther, state.drift)
    shrunk = jnp.maximum(MEMORY_MIN, jnp.minimum(state.memory, state.n_seen.astype(dt)) * MEMORY_SHRINK)
    # τ grows only on evidence: a round that tested x_t and saw no drift, or a trace in order (where
    # new ground says nothing). On a stream in random order a round that cannot test leaves τ as it
    # is: once the line has grown a strand for the newest points of a drifting curve, every old
    # point projects on one side of x_t along it, no round could test, and τ would grow for good.
    # Held at τ, the rows age past it and the test resumes.
    grow = counts | (obs.order >= history.ORDERED)
    return jnp.where(counts & (drift > DRIFT_HIGH), shrunk, jnp.where(grow, state.memory + 1.0, state.memory)), drift
