"""Masked geometry and k-means for fixed-capacity centre slots.

Centres live in ``p`` slots; the active ones are the prefix
``arange(p) < n_clusters`` (`center_mask`). Every function has fixed shapes
and no data-dependent Python control flow, so it can be jitted and vmapped.
Distances over centre slots are computed in blocks of `CENTER_BLOCK` slots up
to the block that holds the last active slot (a loop with a dynamic trip
count), so their cost follows k, not the capacity p; under `vmap` the loop
runs to the largest k of the batch.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax import lax

from .. import _ops
from .._loops import fori_upto

Array = jax.Array
#: Centre slots scored at a time: nothing of size (points, max_clusters, d) is stored.
CENTER_BLOCK = 8

__all__ = ["CENTER_BLOCK", "GREEDY_CANDIDATES", "sq_distances", "center_mask", "nearest_center",
           "nearest_center_blocked", "kmeans", "add_farthest_center", "add_greedy_center", "remove_cheapest_center",
           "ProposalRows", "proposal_rows"]


def _sq_dist_pn(points: Array, centers: Array) -> Array:
    """(n, d) × (p, d) -> (p, n) squared distances, computed coordinate-major.

    Differences are taken explicitly (not ||x||² − 2x·c + ||c||²), so the
    result is exact to rounding and never negative; the (d, p, n) layout makes
    the reduction over d a sum of d contiguous planes (fast on XLA:CPU).
    """
    diff = centers.T[:, :, None] - points.T[:, None, :]
    return jnp.sum(diff * diff, axis=0)


def _min_argmin0(a: Array) -> tuple[Array, Array]:
    """Min and argmin over axis 0 (ties -> lowest index), as int32 (min + equality: faster on CPU)."""
    m = jnp.min(a, axis=0)
    idx = jnp.arange(a.shape[0], dtype=jnp.int32).reshape((-1,) + (1,) * (a.ndim - 1))
    i = jnp.min(jnp.where(a == m[None], idx, a.shape[0] - 1), axis=0)
    return m, i


def sq_distances(points: Array, centers: Array) -> Array:
    """Squared Euclidean distances, (n, d) × (p, d) -> (n, p)."""
    return _sq_dist_pn(points, centers).T


def center_mask(n_clusters, capacity: int) -> Array:
    """(capacity,) bool, True for the active prefix of `n_clusters` slots."""
    return jnp.arange(capacity) < n_clusters


def nearest_center(points: Array, centers: Array, mask: Array) -> tuple[Array, Array]:
    """Squared distance to, and slot of, the nearest active centre (dense over all slots).

    Args:
      points: (n, d).
      centers: (p, d).
      mask: (p,) bool; inactive slots never win (ties go to the lowest slot).

    Returns:
      ``(sq_dist (n,), slot (n,) int32)``.
    """
    return _min_argmin0(jnp.where(mask[:, None], _sq_dist_pn(points, centers), jnp.inf))


def nearest_center_blocked(points_t: Array, centers: Array, n_clusters) -> tuple[Array, Array]:
    """`nearest_center` for the active prefix, computed only over the blocks it occupies.

    Args:
      points_t: (d, n) points, transposed.
      centers: (p, d).
      n_clusters: () active prefix length (≥ 1).

    Returns:
      ``(sq_dist (n,), slot (n,) int32)``.
    """
    p, d = centers.shape
    blk = min(CENTER_BLOCK, p)
    nb = -(-p // blk)
    cp = jnp.zeros((nb * blk, d), centers.dtype).at[:p].set(centers)
    n = points_t.shape[1]

    def body(b, carry):
        best, arg = carry
        cb = lax.dynamic_slice_in_dim(cp, b * blk, blk)
        diff = cb.T[:, :, None] - points_t[:, None, :]
        d2 = jnp.sum(diff * diff, axis=0)
        slots = b * blk + jnp.arange(blk, dtype=jnp.int32)
        d2 = jnp.where((slots < n_clusters)[:, None], d2, jnp.inf)
        m, i = _min_argmin0(d2)
        better = m < best
        return jnp.where(better, m, best), jnp.where(better, b * blk + i, arg)

    n_blocks = (jnp.clip(n_clusters, 1, p) + blk - 1) // blk
    init = (jnp.full((n,), jnp.inf, centers.dtype), jnp.zeros((n,), jnp.int32))
    return fori_upto(n_blocks, nb, body, init)


def kmeans(points: Array, centers: Array, *, point_mask: Optional[Array] = None,
           center_mask: Optional[Array] = None, n_iters: int = 10) -> Array:
    """Masked Lloyd iterations from given initial centres (dense over all slots).

    Each iteration assigns every valid point to its nearest active centre and
    moves every active centre to the mean of its points. Inactive slots and
    centres with no point keep their position. The number of iterations is
    static.

    Args:
      points: (n, d) points, e.g. the fixed-capacity history.
      centers: (p, d) initial centres (warm start).
      point_mask: (n,) bool, valid points (default: all).
      center_mask: (p,) bool, active slots (default: all).
      n_iters: number of Lloyd iterations (static).

    Returns:
      (p, d) centres.
    """
    n, _ = points.shape
    p = centers.shape[0]
    pm = jnp.ones((n,), bool) if point_mask is None else point_mask
    cm = jnp.ones((p,), bool) if center_mask is None else center_mask

    def body(_, c):
        _, a = nearest_center(points, c, cm)
        return _centroids(points, pm, a, c, cm)

    return lax.fori_loop(0, n_iters, body, centers)


def _centroids(points: Array, pm: Array, a: Array, c: Array, cm: Array) -> Array:
    p = c.shape[0]
    # One-hot sums rather than segment_sum: a scatter is slow under vmap on CPU.
    w = ((a[None, :] == jnp.arange(p)[:, None]) & pm[None, :]).astype(points.dtype)
    counts = jnp.sum(w, axis=1)
    sums = _ops.einsum("pn,nd->pd", w, points)
    move = cm & (counts > 0)
    return jnp.where(move[:, None], sums / jnp.maximum(counts, 1.0)[:, None], c)


def _kmeans_blocked(points: Array, points_t: Array, pm: Array, centers: Array, k, n_iters: int):
    """Lloyd on the active prefix only (distances over its blocks); returns (centres, slot, d2)."""
    def body(_, c):
        _, a = nearest_center_blocked(points_t, c, k)
        return _centroids_blocked(points, pm, a, c, k)[0]

    c = lax.fori_loop(0, n_iters, body, centers)
    d2, a = nearest_center_blocked(points_t, c, k)
    return c, a, d2


def _centroids_blocked(points: Array, pm: Array, a: Array, c: Array, k):
    """`_centroids` for the active prefix k, over its blocks of slots only; also returns the
    (p,) counts of valid points per slot (0 beyond the blocks)."""
    p, d = c.shape
    blk = min(CENTER_BLOCK, p)
    nb = -(-p // blk)
    pad = nb * blk - p
    cp = jnp.concatenate([c, jnp.zeros((pad, d), c.dtype)])

    def body(b, carry):
        cp, counts = carry
        slots = b * blk + jnp.arange(blk, dtype=jnp.int32)
        w = ((a[None, :] == slots[:, None]) & pm[None, :]).astype(points.dtype)     # (blk, n)
        cnt = jnp.sum(w, axis=1)
        sums = _ops.einsum("bn,nd->bd", w, points)
        cb = lax.dynamic_slice_in_dim(cp, b * blk, blk)
        move = (slots < k) & (cnt > 0)
        new = jnp.where(move[:, None], sums / jnp.maximum(cnt, 1.0)[:, None], cb)
        return (lax.dynamic_update_slice_in_dim(cp, new, b * blk, axis=0),
                lax.dynamic_update_slice_in_dim(counts, cnt, b * blk, axis=0))

    n_blocks = (jnp.clip(k, 1, p) + blk - 1) // blk
    cp, counts = fori_upto(n_blocks, nb, body, (cp, jnp.zeros((nb * blk,), points.dtype)))
    return cp[:p], counts[:p]


def add_farthest_center(points: Array, point_mask: Array, centers: Array, n_clusters) -> Array:
    """Put a new centre in slot `n_clusters` at the valid point farthest from the active ones.

    The deterministic (farthest-point) variant of k-means++ seeding. Returns
    `centers` unchanged when all slots are used.
    """
    p = centers.shape[0]
    dmin, _ = nearest_center_blocked(points.T, centers, n_clusters)
    _, i = _min_argmin0(-jnp.where(point_mask, dmin, -jnp.inf))
    new = centers.at[jnp.minimum(n_clusters, p - 1)].set(points[i])
    return jnp.where(n_clusters < p, new, centers)


#: Stored points tried as the seed of the k̂ + 1 row's second start.
GREEDY_CANDIDATES = 32


def add_greedy_center(points: Array, point_mask: Array, centers: Array, n_clusters, sq_dist: Array,
                      n_candidates: int = GREEDY_CANDIDATES) -> Array:
    """Put a new centre in slot `n_clusters` at the candidate point that lowers the k-means loss most.

    The greedy variant of k-means++ seeding, deterministic: the candidates are
    every ⌈n/n_candidates⌉-th stored row, and each is scored by the loss the
    active centres plus it would have (one assignment step). Unlike the farthest
    point, which an outlying handful of points attracts, it splits a cluster
    that holds several groups. Returns `centers` unchanged when all slots are used.

    Args:
      points: (n, d); point_mask: (n,) bool (at least one valid).
      centers: (p, d); n_clusters: () k.
      sq_dist: (n,) squared distance of each point to its nearest active centre.
      n_candidates: number of candidate rows (static).

    Returns:
      (p, d) centres.
    """
    n = points.shape[0]
    p = centers.shape[0]
    stride = -(-n // min(n_candidates, n))
    cand = points[::stride]                                               # (C, d)
    ok = point_mask[::stride]
    d2 = jnp.sum((cand[:, None, :] - points[None, :, :]) ** 2, axis=-1)   # (C, n)
    gain = jnp.sum(jnp.where(point_mask[None], jnp.maximum(sq_dist[None] - d2, 0.0), 0.0), axis=1)
    _, i = _min_argmin0(-jnp.where(ok, gain, -jnp.inf))
    new = centers.at[jnp.minimum(n_clusters, p - 1)].set(cand[i])
    return jnp.where(n_clusters < p, new, centers)


def _removal_cost(points_t: Array, point_mask: Array, centers: Array, k) -> Array:
    """(p,) increase of the k-means loss if each active centre were removed (inf if inactive).

    Nearest and second-nearest distances over the active blocks of slots, then
    the per-slot sums over those blocks (no dense (p, n) table).
    """
    p, d = centers.shape
    blk = min(CENTER_BLOCK, p)
    nb = -(-p // blk)
    cp = jnp.concatenate([centers, jnp.zeros((nb * blk - p, d), centers.dtype)])
    n = points_t.shape[1]
    n_blocks = (jnp.clip(k, 1, p) + blk - 1) // blk

    def nearest2(b, carry):
        first, second, arg = carry
        cb = lax.dynamic_slice_in_dim(cp, b * blk, blk)
        diff = cb.T[:, :, None] - points_t[:, None, :]
        slots = b * blk + jnp.arange(blk, dtype=jnp.int32)
        d2 = jnp.where((slots < k)[:, None], jnp.sum(diff * diff, axis=0), jnp.inf)   # (blk, n)
        m, i = _min_argmin0(d2)
        m2 = jnp.min(jnp.where(jnp.arange(blk)[:, None] == i[None, :], jnp.inf, d2), axis=0)
        better = m < first
        second = jnp.where(better, jnp.minimum(first, m2), jnp.minimum(second, m))
        return jnp.where(better, m, first), second, jnp.where(better, b * blk + i, arg)

    inf = jnp.full((n,), jnp.inf, centers.dtype)
    first, second, a = fori_upto(n_blocks, nb, nearest2, (inf, inf, jnp.zeros((n,), jnp.int32)))
    gain = jnp.where(point_mask, second - first, 0.0)

    def sums(b, cost):
        slots = b * blk + jnp.arange(blk, dtype=jnp.int32)
        cb = jnp.sum(jnp.where(a[None, :] == slots[:, None], gain[None, :], 0.0), axis=1)
        return lax.dynamic_update_slice_in_dim(cost, cb, b * blk, axis=0)

    cost = fori_upto(n_blocks, nb, sums, jnp.zeros((nb * blk,), centers.dtype))[:p]
    return jnp.where(center_mask(k, p), cost, jnp.inf)


def remove_cheapest_center(points: Array, point_mask: Array, centers: Array, n_clusters,
                           ids: Optional[Array] = None):
    """Drop the active centre whose removal increases the k-means loss least.

    The cost of removing centre j is the sum, over the valid points whose
    nearest centre is j, of (distance² to the second nearest − distance² to
    the nearest). Ties go to the lowest slot. The remaining centres are
    compacted to the first ``n_clusters − 1`` slots (order kept), the freed
    slot is zeroed. Nothing changes when ``n_clusters <= 1``.

    Args:
      points: (n, d); point_mask: (n,) bool.
      centers: (p, d); n_clusters: () k.
      ids: optional (p,) int32 labels carried along with the slots (the
        freed slot gets −1).

    Returns:
      (p, d) centres, or ``(centres, ids)`` when `ids` is given.
    """
    p = centers.shape[0]
    _, j = _min_argmin0(_removal_cost(points.T, point_mask, centers, n_clusters))
    idx = jnp.arange(p)
    src = jnp.where(idx >= j, jnp.minimum(idx + 1, p - 1), idx)
    keep = center_mask(n_clusters - 1, p)
    ok = n_clusters > 1
    new = jnp.where(ok, jnp.where(keep[:, None], centers[src], 0.0), centers)
    if ids is None:
        return new
    return new, jnp.where(ok, jnp.where(keep, ids[src], -1), ids)


class ProposalRows(NamedTuple):
    """The round's k-means rows for k̂ − 1, k̂, k̂ + 1 (row 1 is k̂).

    Attributes:
      n_clusters: (3,) int32 k of each row (clamped to [1, p]).
      valid: (3,) bool; False for k̂ − 1 < 1 or k̂ + 1 > p.
      centers: (3, p, d) k-means centres of each row (zeros after k).
      counts: (3, p) number of stored points nearest to each centre.
      ids: (3, p) int32 stable labels of each row's slots (−1 inactive).
      within_ss: (3,) Σ over stored points of the squared distance to the
        row's nearest centre (unweighted; for row k̂ + 1, of its farthest-point
        start, `proposal_rows`).
      max_within: (3,) the largest within-cluster sum of squares W_j of a
        centre of the row (unweighted; row k̂ + 1: its farthest-point start).
    """

    n_clusters: Array
    valid: Array
    centers: Array
    counts: Array
    ids: Array
    within_ss: Array
    max_within: Array


def proposal_rows(points: Array, point_mask: Array, centers: Array, n_clusters, ids: Array,
                  next_id, n_iters: int = 5) -> ProposalRows:
    """k-means for k̂ − 1, k̂ and k̂ + 1, warm-started from the current centres.

    Row k̂: Lloyd from ĉ. Row k̂ + 1: that row plus one new centre (label
    `next_id`), then Lloyd, from two starts, keeping the one with the lower
    loss: the new centre at the stored point farthest from the row (a new
    group's first points) and at the point that lowers the loss most
    (`add_greedy_center`; it splits a cluster that holds several groups, where
    the farthest point can be an outlying handful of points, every round, and
    the k̂ + 1 row then saves too little ever to be accepted; the price and σ̂
    still come from the farthest-point start, see `ProposalRows`). Row k̂ − 1: that row without
    its cheapest centre (`remove_cheapest_center`, labels compacted with it),
    then Lloyd. Lloyd runs on the active slots only (distances over their
    blocks), for `n_iters` static iterations. Everything is a deterministic
    function of the history and ĉ, so a round's proposal family is fixed.

    Args:
      points: (H, d) stored points; point_mask: (H,) bool (at least one valid).
      centers: (p, d) current centres; n_clusters: () k̂.
      ids: (p,) int32 labels of the current slots; next_id: () the next unused label.
      n_iters: Lloyd iterations (static).

    Returns:
      `ProposalRows`.
    """
    p, d = centers.shape
    k = jnp.asarray(n_clusters, jnp.int32)
    points_t = points.T
    pm = point_mask
    cm = center_mask(k, p)
    c = jnp.where(cm[:, None], centers, 0.0)
    ids = jnp.where(cm, ids, -1)
    c_mid, a_mid, d2_mid = _kmeans_blocked(points, points_t, pm, c, k, n_iters)
    c_up = add_farthest_center(points, pm, c_mid, k)
    c_up2 = add_greedy_center(points, pm, c_mid, k, d2_mid)
    ids_up = jnp.where(k < p, ids.at[jnp.minimum(k, p - 1)].set(next_id), ids)
    c_dn, ids_dn = remove_cheapest_center(points, pm, c_mid, k, ids)
    ks = jnp.stack([jnp.maximum(k - 1, 1), k, jnp.minimum(k + 1, p)])
    valid = jnp.stack([k > 1, jnp.asarray(True), k < p])

    def lloyd(c0, kk):
        return _kmeans_blocked(points, points_t, pm, c0, kk, n_iters)

    c_ud, a_ud, d2_ud = jax.vmap(lloyd)(jnp.stack([c_dn, c_up, c_up2]), ks[jnp.array([0, 2, 2])])
    # Rows: k̂ − 1, k̂, k̂ + 1 from the farthest point, k̂ + 1 from the greedy point.
    ks4 = ks[jnp.array([0, 1, 2, 2])]
    cs = jnp.stack([c_ud[0], c_mid, c_ud[1], c_ud[2]])
    a = jnp.stack([a_ud[0], a_mid, a_ud[1], a_ud[2]])
    d2m = jnp.where(pm[None], jnp.stack([d2_ud[0], d2_mid, d2_ud[1], d2_ud[2]]), 0.0)
    cs = jnp.where(center_mask(ks4[:, None], p)[:, :, None], cs, 0.0)
    wss = jnp.sum(d2m, axis=1)
    w_max = jnp.max(jax.vmap(lambda v, a_: jax.ops.segment_sum(v, a_, num_segments=p))(d2m, a), axis=1)
    # The k̂ + 1 row proposed is the start with the lower loss (ties: the farthest point's); its
    # within_ss and max_within stay the farthest start's, so the price and σ̂ are as they were
    # (the greedy start splits the widest cluster where it can, which would lower the price).
    pick = jnp.where(wss[3] < wss[2], 3, 2)
    rows = jnp.stack([0, 1, pick])
    cs, a = cs[rows], a[rows]
    counts = jax.vmap(lambda c_, a_, k_: _centroids_blocked(points, pm, a_, c_, k_)[1])(cs, a, ks)
    return ProposalRows(ks, valid, cs, counts, jnp.stack([ids_dn, ids, ids_up]), wss[:3], w_max[:3])
