"""The landmark replacement rule: what happens to an uncovered point when the landmark set is full.

For an arriving x that no landmark covers while there are n_L landmarks
(case 3 of `jaxstream.embedding.learner`), `replace_landmark`:

1. admits x, or its neighbour of smallest degree, by the degree rule of
   Hjuler et al. (STACS 2019): x when deg(x) <= 2·sqrt(|E|) in the graph
   G_ε of the buffered points. A lower bound on |E| from the edges at the
   landmarks and at x (O(n_L·N)) settles most cases; the O(N²) count runs
   otherwise (`Info.full_degrees`);
2. grows ε to the smallest value >= ε at which some landmark, the admitted
   one included, is redundant, and removes it (`grow_eps`: a fixed-point
   iteration on the landmark-to-point distances, no sorted list of pairs);
3. applies the options beyond the paper when their params are on:
   ``min_support`` (`weakest`) and ``density_shift`` (`densest`).

Ties go to the earliest arrival. The expensive parts run through
`jaxstream._batching.rare`, so that under `vmap` they cost only for the
streams that take them. Why the fixed point gives the smallest ε, and what
the options measured: ``docs/internals/landmarks.md``.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from .._batching import rare
from .._loops import static_trip_counts_enabled
from .._ops import first_argmin
from .types import Config, State

Array = jax.Array

__all__ = ["Case3", "replace_landmark", "grow_eps", "x_passes_degree_rule", "densest", "weakest", "full_dist",
           "DENSE_CHUNK"]

_IMAX = np.iinfo(np.int32).max

#: Candidates of `densest` whose neighbours are counted at a time (a (chunk, N) block of distances).
DENSE_CHUNK = 32


class Case3(NamedTuple):
    """The outcome of case 3 (small results only; the learner applies them).

    Attributes:
      new: int32 slot of the landmark admitted (x or x's neighbour, moved by
        ``density_shift``).
      rm_row: int32 position (0..n_L) of the removed landmark in
        ``landmark_slots + [new]`` (n_L: the admitted one itself).
      eps: ε after the growth.
      full: bool, the O(N²) degree count ran.
    """

    new: Array
    rm_row: Array
    eps: Array
    full: Array


def grow_eps(DL, lm_valid, lm_arrival, valid, eps):
    """Smallest ε' >= eps at which some landmark is redundant, for every landmark.

    Landmark u is redundant at ε' iff ``G_u(ε') <= ε'`` with
    ``G_u(ε') = max{m_u(v) : d(u, v) <= ε'}`` (the spec's prefix maximum) and
    ``m_u(v)`` the distance from v to the nearest other landmark. Only the
    points v that u owns (u is their nearest landmark) can have
    ``m_u(v) > d(u, v)``, so G_u only needs those. Because G_u is
    non-decreasing, iterating ``c <- max(c, G_u(c))`` from c = eps climbs
    through infeasible values only and stops at the smallest fixed point,
    i.e. the smallest feasible ε' >= eps. All landmarks iterate together;
    each round is O(N) and the number of rounds is the longest chain of
    nested private-neighbour intervals, typically a handful.

    Args:
      DL: (R, N) distances from the R landmark rows to the buffered points
        (inf for empty slots, 0 from a landmark to itself).
      lm_valid: (R,) bool, rows that are landmarks.
      lm_arrival: (R,) int32 arrival index of each row (tie rule).
      valid: (N,) bool occupied buffer slots.
      eps: current ε.

    Returns:
      ``(eps_new, row_removed, eps_per_row)``: scalar, int32 and (R,); ties
      go to the earliest arrival.
    """
    R, N = DL.shape
    DL = jnp.where(lm_valid[:, None], DL, jnp.inf)
    a = jnp.min(DL, axis=0)
    near = DL == a[None, :]
    # v's nearest landmark owns it. When two landmarks tie for nearest, m = a and v has no private
    # interval, so ownership only matters for points with a unique nearest landmark (no argmin needed).
    unique = jnp.sum(near, axis=0, dtype=jnp.int32) == 1
    m = jnp.min(jnp.where(near, jnp.inf, DL), axis=0)
    live = valid & unique & (m > eps)  # unique implies m > a; an interval ending at or before eps never matters
    # (R, N), fixed over the iteration: the end m(v) of v's private interval in its owner's row, -inf elsewhere
    M = jnp.where(near & live[None, :], m[None, :], -jnp.inf)

    def fixed_point(c0, a, M):
        def body(carry):
            # dense masked max over each row's owned points instead of a scatter-max (collisions, and a
            # batched scatter under vmap, cost more than R x N arithmetic)
            c, _ = carry
            viol = (a[None, :] <= c[:, None]) & (M > c[:, None])
            c_new = jnp.maximum(c, jnp.max(jnp.where(viol, M, -jnp.inf), axis=1))
            return c_new, jnp.any(c_new > c)

        return lax.while_loop(lambda carry: carry[1], body, (c0, jnp.array(True)))[0]

    c0 = jnp.full((R,), eps, DL.dtype)
    if not static_trip_counts_enabled():
        c = fixed_point(c0, a, M)
    else:
        # Reverse-differentiable form (`jaxstream._loops`): the fixed point without derivatives,
        # then the value it stopped at, read differentiably: each row's c is ε or the largest
        # interval end M its owned points reach at c (the same value, since c is a fixed point).
        c_fix = fixed_point(*lax.stop_gradient((c0, a, M)))
        reach = (a[None, :] <= c_fix[:, None]) & (M >= c_fix[:, None])
        c = jnp.maximum(c0, jnp.max(jnp.where(reach, M, -jnp.inf), axis=1))
    eps_u = jnp.where(lm_valid, c, jnp.inf)
    eps_new = jnp.min(eps_u)
    tied = lm_valid & (eps_u == eps_new)
    rm = first_argmin(jnp.where(tied, lm_arrival, _IMAX))
    return eps_new, rm, eps_u


def x_passes_degree_rule(deg_x, deg_sum):
    """deg(x) <= 2·sqrt(|E|), i.e. deg(x)² <= 4|E| = 2·Σ deg, in exact unsigned arithmetic.

    uint32 holds 2·Σ deg <= 2·N·(N − 1) for every buffer allowed
    (N <= 40000), where int32 would overflow past N ≈ 32768.

    Args:
      deg_x: int, deg(x).
      deg_sum: Σ deg = 2|E| (an upper bound on it settles nothing; pass the
        exact sum or a lower bound).
    """
    d = deg_x.astype(jnp.uint32)
    return d * d <= jnp.uint32(2) * deg_sum.astype(jnp.uint32)


def full_dist(state: State, slot, dx, config: Config) -> Array:
    """(N, N) distances of buffered points: inf for empty slots, 0 on the diagonal.

    Args:
      state: the state after x was written at `slot`.
      slot: x's buffer slot.
      dx: (N,) x's distances to the buffer (those its coverage was decided with).
    """
    N = config.buffer_size
    if config.cache:
        D = state.dist
    else:
        D = config.dist.dist(state.params, state.points, state.points)
        D = D.at[slot].set(dx).at[:, slot].set(dx)
    eye = jnp.eye(N, dtype=bool)
    vv = state.valid[:, None] & state.valid[None, :]
    return jnp.where(vv, jnp.where(eye, 0.0, D), jnp.inf)


def _landmark_rows(state: State, slot, dx, config: Config) -> Array:
    """(n_L, N) distances from the landmarks to the buffer: exact zeros on their own slots, inf for empty
    slots, and x's column from `dx` (the distances its coverage was decided with)."""
    slots = state.landmark_slots  # exactly n_L landmarks in case 3
    if config.cache:
        DL = state.dist[slots]
    else:
        DL = config.dist.dist(state.params, state.points[slots], state.points)
    cols = jnp.arange(config.buffer_size)[None, :]
    return jnp.where(cols == slot, dx[slots][:, None],
                     jnp.where(slots[:, None] == cols, 0.0, jnp.where(state.valid[None, :], DL, jnp.inf)))


def _exact_degree_rule(op, st: State, config: Config):
    """The degree rule with all O(N²) degrees: ``(new slot, its (N,) distance row)``."""
    slot, dx = op
    N = config.buffer_size
    D = full_dist(st, slot, dx, config)
    adj = (D <= st.eps) & ~jnp.eye(N, dtype=bool)
    deg = jnp.sum(adj, axis=1, dtype=jnp.int32)
    use_x = x_passes_degree_rule(deg[slot], jnp.sum(deg, dtype=jnp.uint32))
    nb = adj[slot]
    min_deg = jnp.min(jnp.where(nb, deg, _IMAX))
    cand = nb & (deg == min_deg)
    u = first_argmin(jnp.where(cand, st.arrival, _IMAX))
    new = jnp.where(use_x, slot, u)
    return new, D[new]


def _admit(state: State, slot, dx, DL, config: Config):
    """The degree rule: ``(new, row, full)``, the admitted slot, its (N,) distances and whether the O(N²)
    count ran.

    Twice the number of edges incident to a landmark comes from one pass over
    `DL`: an edge to a non-landmark is seen once (weight 2), an edge between
    two landmarks twice (weight 1 each). x is not a landmark yet and has no
    edge to one (it is uncovered), so its edges are added apart. x passes
    on that lower bound of |E| is final; otherwise all degrees are counted.
    """
    eps = state.eps
    self_ = state.landmark_slots[:, None] == jnp.arange(config.buffer_size)[None, :]
    w = jnp.where(state.is_landmark, 1, 2).astype(jnp.int32)
    e_twice = jnp.sum(jnp.where((DL <= eps) & ~self_, w[None, :], 0), dtype=jnp.int32)
    deg_x = jnp.sum(dx <= eps, dtype=jnp.int32) - 1  # dx[slot] = 0 counts x itself
    quick = x_passes_degree_rule(deg_x, e_twice.astype(jnp.uint32) + 2 * deg_x.astype(jnp.uint32))
    new, row = rare(~quick, lambda op, st: _exact_degree_rule(op, st, config), (slot, dx), (slot, dx), state)
    return new, row, ~quick


def replace_landmark(small, state: State, config: Config) -> Case3:
    """Case 3: degree rule, ε growth and the options, for an uncovered x with a full landmark set.

    Args:
      small: ``(slot, dx)``: x's buffer slot and its (N,) distances to the
        buffer (0 at `slot`, inf for empty slots).
      state: the state after x was written at `slot` (read only).

    Returns:
      `Case3`; the caller applies it.
    """
    slot, dx = small
    n_L = config.max_landmarks
    DL = _landmark_rows(state, slot, dx, config)
    new, row, full = _admit(state, slot, dx, DL, config)
    slots1 = jnp.concatenate([state.landmark_slots, new[None]])
    DL1 = jnp.concatenate([DL, row[None]], axis=0)
    arrival1 = state.arrival[slots1]
    eps_new, rm_row, _ = grow_eps(DL1, jnp.ones((n_L + 1,), bool), arrival1, state.valid, state.eps)
    # min_support (off by default, so its pass and sort run only where some stream asks for it)
    rm_row = rare(state.params.min_support > 0, weakest, rm_row,
                  (rm_row, eps_new), (DL1, arrival1, state.params.min_support))
    # density_shift (off by default; runs only when the new landmark is kept, and then costs O(|cand|·N))
    shift = state.params.density_shift
    new = rare((shift > 0) & (rm_row != n_L), lambda sm, st: densest(sm, st, config), new,
               (new, eps_new * shift, row), state)
    return Case3(new, rm_row.astype(jnp.int32), eps_new, full)


def weakest(small, big):
    """min_support: the least supported landmark goes first when some has fewer than m neighbours.

    Args:
      small: ``(rm_row, eps_new)``: the row the ε growth removes and the new ε.
      big: ``(DL1, arrival1, min_support)``: the (n_L + 1, N) rows of the
        landmarks and the admitted point, their (n_L + 1,) arrival indices,
        and m.

    Returns:
      The row to remove: the weakest one (fewest neighbours, ties: the
      earliest arrival) when some row is weak, else `rm_row`.
    """
    rm_row, eps_new = small
    DL1, arrival1, min_support = big
    support = jnp.sum(DL1 <= eps_new, axis=1, dtype=jnp.int32) - 1  # each row's own 0 excluded
    # weak: fewer than m neighbours and fewer than a quarter of a typical landmark's (so that landmarks at
    # the edge of a region the stream is still filling are not taken for noise)
    typical = jnp.median(support.astype(DL1.dtype))
    weak = (support < min_support) & (support.astype(DL1.dtype) < 0.25 * typical)
    min_sup = jnp.min(jnp.where(weak, support, _IMAX))
    weak_rm = first_argmin(jnp.where(weak & (support == min_sup), arrival1, _IMAX))
    return jnp.where(jnp.any(weak), weak_rm, rm_row)


def _candidate_rows(state: State, ids, cols, config: Config) -> Array:
    """(c, N) distances from the buffer slots `ids` (c,) to the buffer (0 on their own slots, inf for empty);
    `cols` is ``arange(N)`` (made once, outside the caller's loop)."""
    if config.cache:
        Dc = state.dist[ids]
    else:
        Dc = config.dist.dist(state.params, state.points[ids], state.points)
    return jnp.where(ids[:, None] == cols[None, :], 0.0, jnp.where(state.valid[None, :], Dc, jnp.inf))


def densest(small, state: State, config: Config):
    """density_shift: the buffered point within r of `new` with the most buffered points within r.

    Stays at `new` when that point is already a landmark. Ties go to the
    earliest arrival. Only the candidates (the points within r of `new`)
    have their neighbours counted: they are sorted to the front and counted
    in chunks of `DENSE_CHUNK` rows against the buffer, so a call costs
    O(ceil(|cand| / chunk) · chunk · N) distance work instead of O(N²).

    Args:
      small: ``(new, r, row)``: slot of the landmark just admitted, the radius
        r = c·ε, and its (N,) distances to the buffer (inf for empty slots,
        0 at `new`).
      state: the state after x was written (read only).

    Returns:
      The slot of the landmark to keep (int, dtype of `new`).
    """
    new, r, row = small
    N = config.buffer_size
    c = min(N, DENSE_CHUNK)
    cand = row <= r
    order = jnp.argsort(~cand, stable=True).astype(jnp.int32)  # candidates first
    n_cand = jnp.sum(cand, dtype=jnp.int32)
    cols = jnp.arange(N, dtype=jnp.int32)

    def body(carry):
        i, best_count, best_arr, best = carry
        start = jnp.minimum(i * c, N - c)
        ids = lax.dynamic_slice(order, (start,), (c,))
        pos = start + jnp.arange(c, dtype=jnp.int32)
        take = (pos >= i * c) & (pos < n_cand)  # rows of this round not counted in an earlier one
        Dc = _candidate_rows(state, ids, cols, config)
        count = jnp.where(take, jnp.sum(Dc <= r, axis=1, dtype=jnp.int32), -1)
        arr = jnp.where(take, state.arrival[ids], _IMAX)
        cmax = jnp.max(count)
        j = first_argmin(jnp.where(count == cmax, arr, _IMAX))
        better = (cmax > best_count) | ((cmax == best_count) & (arr[j] < best_arr))
        return (i + 1, jnp.where(better, cmax, best_count), jnp.where(better, arr[j], best_arr),
                jnp.where(better, ids[j], best))

    init = (jnp.zeros((), jnp.int32), jnp.int32(-1), jnp.int32(_IMAX), new.astype(jnp.int32))
    best = lax.while_loop(lambda carry: carry[0] * c < n_cand, body, init)[3]
    return jnp.where(state.is_landmark[best], new, best).astype(new.dtype)
