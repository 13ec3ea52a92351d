"""Online landmark replacement and landmark MDS.

The learner keeps a bounded set of landmarks chosen online from a stream so
that the landmarks stay a dominating set of a geometric graph whose
threshold ε only grows (C. Thongprayoon and N. Masuda, Proc. R. Soc. A
2024), and embeds any point in R^k by landmark MDS (V. de Silva and
J. B. Tenenbaum, 2004). See ``shared/spec/landmarks.md``.

The algorithm, for an arriving point x (ε the current threshold, L the
landmarks, n_L = ``max_landmarks``):

1. x is within ε of a landmark (covered): L does not change.
2. Otherwise, if |L| < n_L, x becomes a landmark.
3. Otherwise (degree rule of Hjuler et al., STACS 2019): with |E| the number
   of edges of the graph G_ε of buffered points (x included), x is added to L
   when deg(x) <= 2·sqrt(|E|), else its neighbour of smallest degree (ties:
   the earliest arrival), which has deg <= sqrt(|E|). Then ε grows to the
   smallest value >= ε at which some landmark is redundant (all of its closed
   neighbourhood is covered by other landmarks) and that landmark is removed;
   ties go to the landmark that arrived earliest.

How ε growth is computed (no sorted list of all pairs). Landmark u is
redundant at ε' iff ``G_u(ε') <= ε'`` where ``G_u(ε') = max{m_u(v) : d(u, v)
<= ε'}`` is the spec's prefix maximum and ``m_u(v)`` the distance from v to
the nearest landmark other than u. A point v whose nearest landmark is not u
has ``m_u(v) <= d(u, v) <= ε'``, so it never violates the condition; only
the points u owns (u is their nearest landmark, first position on ties)
matter, and for them ``m_u(v)`` is the distance to the second-nearest
landmark. Because G_u is a non-decreasing step function, the iteration
``c <- max(c, G_u(c))`` started at the current ε only passes over infeasible
values (every ε' in [c, G_u(c)) has ``G_u(ε') >= G_u(c) > ε'``) and stops at
the smallest feasible ε' >= ε: the value a walk through u's points sorted
by distance would find, without sorting. It runs for all landmarks at once
on the (n_L + 1) x N landmark-to-point distances; each round is O(N) and
the number of rounds is bounded by the number of points a landmark owns
(two or three on the benchmark streams). The landmark with the smallest
value is removed (ties: the earliest arrival); ε only takes values of pair
distances, as when the paper adds edges one at a time.

The degree rule needs |E|, which is O(N²) to count. The edges incident to
the landmarks or to x (O(n_L·N)) are a lower bound on |E|; the full count
runs only when the bound does not settle deg(x) <= 2·sqrt(|E|)
(`Info.full_degrees`; it never happened on the benchmark streams).

Cost per arrival: O(N) distance evaluations (x to the buffer); case 3 adds
O(n_L·N); ``align=True`` adds an n_L x n_L eigendecomposition whenever the
landmarks change. The rare branches are written as loops that run at most
once (`_rare`); under `run_streams` (vmap) a custom batching rule runs them
only for the streams that take them, in chunks of B/16 streams (a
plain ``lax.cond`` would run both sides for every stream at every step, and
a batched loop every stream at each step where one stream needs it: 95 % of
the steps of 64 S-curve streams). `update` is not reverse-differentiable (it
contains while loops and a custom_vmap); `loss` is.

Memory is bounded by static capacities: ``max_landmarks`` and
``buffer_size`` (the points that form the graph). When the buffer is full,
the oldest point that is not a landmark is evicted (landmarks are never
evicted; ``buffer_size >= max_landmarks + 1`` guarantees a candidate). With
``buffer_size`` at least the stream's length the algorithm is the paper's,
unbounded one.

Distances: Euclidean by default, any jax-traceable symmetric metric
``metric(a, b) -> scalar`` on points of shape (p,), or ``"precomputed"``:
stream items are indices (shape (1,), see `index_stream`) into a distance
matrix that travels in the params (``Params.distances``).
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Optional

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from .._checks import check_capacity, check_point, check_points, is_concrete
from .._core import StreamLearner
from .distances import Metric, _make_dist, metric_kind
from .lmds import lmds_fit

Array = jax.Array

_IMAX = np.iinfo(np.int32).max

__all__ = [
    "Params", "State", "Info", "Embedding", "default_params", "init", "build_update",
    "landmark_mds", "default_buffer_size", "embedding", "landmarks", "landmark_weights", "predict", "loss",
    "CASE_COVERED", "CASE_ADDED", "CASE_REPLACED",
]

CASE_COVERED, CASE_ADDED, CASE_REPLACED = 1, 2, 3


# ---------------------------------------------------------------------------
# The online learner: pytrees
# ---------------------------------------------------------------------------

class Params(NamedTuple):
    """Numeric parameters (vmappable).

    Attributes:
      eps0: initial threshold ε (default 0: only duplicates are covered; the
        authors use 1e-20).
      distances: (n_items, n_items) distance matrix for
        ``metric="precomputed"``; shape (0, 0) otherwise.
      min_support: int32, m, a noise-robust replacement rule (an option
        beyond the paper; 0, the default, is the paper's rule). In case 3, ε
        grows as in the paper; then, if some landmark (the new one included)
        has fewer than m other buffered points within the new ε, the one
        with the fewest (ties: the earliest arrival) is removed instead of
        the redundant one. An isolated point that became a landmark is thus
        dropped at the next swap instead of being kept until ε reaches it;
        the landmarks then dominate every point except those in
        neighbourhoods of fewer than m points. "Weak" also requires fewer
        than a quarter of the median landmark's support, so that landmarks
        at the edge of a region the stream is still filling are kept.
        Measured (``benchmarks/bench_landmarks.py --only robust``): m = 4
        lowers σ on the S-curve, the noisy S-curve and the Swiss roll for
        n_L >= 20 but raises it on very uneven clusters (a small cluster
        looks like noise), so it is not the default.
      density_shift: float, c, a second option beyond the paper (0, the
        default, is off). In case 3, when the landmark just admitted (x or
        its neighbour) is kept, it is moved to the densest buffered point
        within r = c·ε of it (the point with the most buffered points within
        r; ties: the earliest arrival), unless that point is already a
        landmark. ε and the removed landmark are decided as without it.
        This pulls new landmarks from the thin edge of a noisy region toward
        its middle. Costs, at each swap that keeps the new landmark, a
        count of the buffered points within r of each candidate (the points
        within r of the new landmark; O(|candidates|·N), in chunks of 32
        rows). A plain array like `min_support`: any value of either runs
        the same compiled `update`. Per update on noisy S-curves (T = 400,
        n_L = 20, buffer 401, 2-core CPU shared with other jobs;
        ``bench_landmarks.py --only options``), one stream / 128 vmapped
        streams per stream-update: paper 12.6 / 13.7 µs, min_support=4
        20.6 / 28.4, density_shift=0.5 20.2 / 27.2, both 28.3 / 44.3 (batch
        ratios 1.09 / 1.38 / 1.35 / 1.56). Measured (``benchmarks/bench_landmarks.py --only robust``,
        the rank of online σ among 50 random landmark sets, averaged over 8
        realizations of each stream, n_L = 10/20/100): with
        ``min_support=4, density_shift=0.5`` the mean rank is at or below
        random's median in 11 of 12 cells (S-curve, noisy S-curve, Swiss
        roll, uneven clusters), the paper's rule in 7; on uneven clusters
        at n_L = 100 both sit at 0.54 and at n_L = 10 the paper's rule is
        better (0.28 vs 0.33), so it is not the default.
    """

    eps0: Array
    distances: Array
    min_support: Array
    density_shift: Array


class Embedding(NamedTuple):
    """The landmark MDS of the current landmarks, in compact form.

    Attributes:
      slots: (n_L,) int32 buffer slots of the landmarks (0 for padding).
      ids: (n_L,) int32 arrival indices of the landmarks (-1 for padding).
      mask: (n_L,) bool.
      coords: (n_L, k) landmark coordinates (aligned when ``align=True``).
      weights: (n_L, k), offset: (k,): a point with squared distances δ (n_L,)
        to the landmarks is embedded at ``δ @ weights + offset``.
      eigvals: (k,) top eigenvalues of B.
      n_positive: int32, number of positive eigenvalues of B; fewer than k
        means the trailing coordinates are zero (the documented traced
        behaviour; the wrapper raises).
    """

    slots: Array
    ids: Array
    mask: Array
    coords: Array
    weights: Array
    offset: Array
    eigvals: Array
    n_positive: Array


class State(NamedTuple):
    """Learner state (fixed shapes; N = buffer_size, p = point size).

    Attributes:
      points: (N, p) buffered points (items are indices for precomputed).
      valid: (N,) bool, occupied slots.
      arrival: (N,) int32 arrival index of each slot's point (-1 when empty).
      is_landmark: (N,) bool.
      landmark_slots: (n_L,) int32, the buffer slots of the landmarks in a
        fixed order of positions (-1 for an empty position); a swap reuses the
        removed landmark's position. Kept alongside `is_landmark` so that no
        step has to search the buffer for them.
      eps: scalar threshold ε (non-decreasing).
      n_seen: int32, points seen so far (the next arrival index).
      dist: (N, N) cached distances between buffered points when
        ``cache_distances``; shape (0, 0) otherwise.
      embedding: `Embedding` kept up to date by `update` when ``align=True``
        (zeros otherwise).
      params: `Params`.
    """

    points: Array
    valid: Array
    arrival: Array
    is_landmark: Array
    landmark_slots: Array
    eps: Array
    n_seen: Array
    dist: Array
    embedding: Embedding
    params: Params


class Info(NamedTuple):
    """What happened at one arrival.

    Attributes:
      loss: prequential loss, the squared distance from x to its nearest
        landmark before the update (the squared covering radius at x; x is
        covered iff ``loss <= eps_before²``); inf for the very first point.
      case: 1 (covered), 2 (added, |L| < n_L), 3 (uncovered with |L| = n_L:
        degree rule and ε growth).
      replaced: True when the landmark set changed by a swap (case 3 and the
        removed landmark is not the one just added).
      eps: ε after the update.
      added: arrival index of the landmark added (x, or x's neighbour under
        the degree rule), -1 if none.
      removed: arrival index of the landmark removed in case 3, -1 if none.
      evicted: arrival index of the buffered point evicted to make room for
        x, -1 if none.
      n_landmarks: |L| after the update.
      full_degrees: True when case 3 needed the O(N²) count of all edges
        (the O(n_L·N) lower bound on |E| did not settle the degree rule).
      y: (k,) coordinates of x under the landmarks *after* the update (what
        an online user sees at x's arrival), when the learner tracks its
        embedding (``align=True`` or ``embed_arrivals=True``); None
        otherwise.
    """

    loss: Array
    case: Array
    replaced: Array
    eps: Array
    added: Array
    removed: Array
    evicted: Array
    n_landmarks: Array
    full_degrees: Array
    y: Optional[Array] = None


class _Cfg(NamedTuple):
    max_landmarks: int
    buffer_size: int
    n_components: int
    align: bool
    cache: bool
    dist: _Dist
    track: bool = False  # keep the embedding in the state (align or embed_arrivals)
    weighted: bool = False  # weighted landmark MDS (each landmark weighs the points it stands for)


def default_params(eps0: float = 0.0, distances=None, min_support: int = 0,
                   density_shift: float = 0.0) -> Params:
    """Default numeric parameters.

    Args:
      eps0: initial ε (0: the first points are isolated).
      distances: (n, n) matrix for ``metric="precomputed"``; None otherwise.
      min_support: see `Params` (0: the paper's admission rule).
      density_shift: see `Params` (0: off).
    """
    if isinstance(min_support, (int, np.integer)) and min_support < 0:
        raise ValueError(f"min_support must be >= 0; got {min_support}")
    if isinstance(density_shift, (int, float, np.integer, np.floating)) and not 0 <= density_shift <= 1:
        raise ValueError(f"density_shift must be in [0, 1]; got {density_shift}")
    if distances is None:
        D = jnp.zeros((0, 0))
    else:
        D = np.asarray(distances) if is_concrete(distances) else distances
        if is_concrete(D):
            _check_distance_matrix(D)
        D = jnp.asarray(D)
    return Params(jnp.asarray(eps0, D.dtype), D, jnp.asarray(min_support, jnp.int32),
                  jnp.asarray(density_shift, D.dtype))


def _check_distance_matrix(D: np.ndarray) -> None:
    if D.ndim != 2 or D.shape[0] != D.shape[1] or D.shape[0] == 0:
        raise ValueError(f"distances must be a non-empty square (n, n) matrix; got shape {D.shape}")
    if not np.isfinite(D).all():
        raise ValueError("distances contain NaN or inf")
    if (D < 0).any():
        raise ValueError("distances must be non-negative")
    if not np.array_equal(D, D.T):
        raise ValueError("distances must be exactly symmetric (use (D + D.T) / 2)")
    if (np.diag(D) != 0).any():
        raise ValueError("distances must have a zero diagonal")


# ---------------------------------------------------------------------------
# The online learner: algorithm
# ---------------------------------------------------------------------------

def _empty_embedding(n_L: int, k: int, dtype) -> Embedding:
    return Embedding(jnp.zeros((n_L,), jnp.int32), jnp.full((n_L,), -1, jnp.int32), jnp.zeros((n_L,), bool),
                     jnp.zeros((n_L, k), dtype), jnp.zeros((n_L, k), dtype), jnp.zeros((k,), dtype),
                     jnp.zeros((k,), dtype), jnp.zeros((), jnp.int32))


def _empty_state(cfg: _Cfg, p: int, dtype, params: Params) -> State:
    N = cfg.buffer_size
    dist = jnp.zeros((N, N) if cfg.cache else (0, 0), dtype)
    return State(points=jnp.zeros((N, p), dtype), valid=jnp.zeros((N,), bool),
                 arrival=jnp.full((N,), -1, jnp.int32), is_landmark=jnp.zeros((N,), bool),
                 landmark_slots=jnp.full((cfg.max_landmarks,), -1, jnp.int32),
                 eps=jnp.asarray(params.eps0, dtype), n_seen=jnp.zeros((), jnp.int32), dist=dist,
                 embedding=_empty_embedding(cfg.max_landmarks, cfg.n_components, dtype), params=params)


def _landmark_slots(state: State):
    """(slots, mask): landmark buffer slots by position (0 where empty) and which are used."""
    mask = state.landmark_slots >= 0
    return jnp.where(mask, state.landmark_slots, 0), mask


def _fresh_embedding(state: State, cfg: _Cfg) -> Embedding:
    """Landmark MDS of the current landmarks (no alignment); weighted by `_landmark_weights` when
    ``cfg.weighted`` (see `lmds_fit`)."""
    slots, mask = _landmark_slots(state)
    if cfg.cache:
        sq = state.dist[slots][:, slots] ** 2
    else:
        P = state.points[slots]
        sq = cfg.dist.sqdist(state.params, P, P)
    weights = _landmark_weights(state, cfg.dist) if cfg.weighted else None
    m = lmds_fit(sq, cfg.n_components, mask, weights=weights)
    ids = jnp.where(mask, state.arrival[slots], -1)
    return Embedding(slots, ids, mask, m.coords, m.weights, m.offset, m.eigvals, m.n_positive)


def _procrustes(new: Embedding, ref: Embedding) -> Embedding:
    """Align `new` to `ref` on the landmarks they share (rotation/reflection + translation).

    Translation is included because the landmark MDS is centred on the
    landmarks' centroid, which moves when a landmark is swapped. With fewer
    than k + 1 shared landmarks the rotation is not determined and only the
    translation is applied (none without shared landmarks).
    """
    k = new.coords.shape[1]
    match = (new.ids[:, None] == ref.ids[None, :]) & new.mask[:, None] & ref.mask[None, :]
    has = jnp.any(match, axis=1)
    P = ref.coords[_argmin(~match, axis=1)]
    w = has.astype(new.coords.dtype)
    n = jnp.sum(w)
    safe_n = jnp.maximum(n, 1.0)
    cY = (w @ new.coords) / safe_n
    cP = (w @ P) / safe_n
    M = ((new.coords - cY) * w[:, None]).T @ (P - cP)
    U, _, Vt = jnp.linalg.svd(M)
    R = jnp.where(n >= k + 1, U @ Vt, jnp.eye(k, dtype=M.dtype))
    shift = jnp.where(n >= 1, cP - cY @ R, jnp.zeros_like(cP))
    coords = jnp.where(new.mask[:, None], new.coords @ R + shift, 0.0)
    return new._replace(coords=coords, weights=new.weights @ R, offset=new.offset @ R + shift)


def _rare_loop(pred, fn, default, small, big):
    """``fn(small, big)`` if `pred` else `default`, as a while loop that runs at most once.

    Only `small` (and the small result) travels in the loop carry. `big`
    (e.g. the state with its (N, N) distance cache) is read-only inside the
    loop: a loop-invariant operand, which XLA neither copies nor selects.
    It passes through an optimization barrier together with the predicate
    (the one carry element the body changes), so that XLA cannot hoist the
    branch out of the loop (which would run it unconditionally; under vmap
    it did when only the unchanged `small` went through). `fn` must read
    what it needs from its arguments, not from a closure.
    """
    def body(c):
        _, sm, bg = lax.optimization_barrier((c[0], c[2], big))
        return jnp.zeros_like(c[0]), fn(sm, bg), c[2]

    return lax.while_loop(lambda c: c[0], body, (pred, default, small))[1]


# Under vmap, `_rare` gathers the streams that take the branch into chunks and runs `fn` on those only,
# unless the per-stream inputs it would copy exceed this many bytes (an (N, N) distance cache), where it
# runs `fn` on every stream whenever some stream needs it.
_COMPACT_MAX_BYTES = 4 << 20


def _chunk(batch: int) -> int:
    """Streams per chunk of a compacted rare branch: B/16 (at least 1), i.e. about three chunks when 18 % of
    the streams take the branch, the rate of case 3 on an S-curve."""
    return max(1, batch // 16)


def _rare(pred, fn, default, small, big):
    """``fn(small, big)`` if `pred` else `default`, for a rarely taken, expensive branch.

    One stream: a while loop that runs at most once (`_rare_loop`), i.e.
    ``lax.cond`` without copying `big`. Under vmap, ``lax.cond`` would
    become a select that runs both branches for every stream at every step,
    and the loop alone would run `fn` for every stream at each step where
    some stream needs it (on most steps of a large batch). Instead the
    batching rule compacts: the indices of the streams that take the branch
    are sorted to the front and `fn` runs, vmapped, on chunks of
    `_chunk(B)` of them in a loop that stops after the last one, so
    the work follows the number of streams that need the branch. Results
    are the same as one stream's, stream by stream.
    """
    @jax.custom_batching.custom_vmap
    def rare(pred, default, small, big):
        return _rare_loop(pred, fn, default, small, big)

    @rare.def_vmap
    def rule(axis_size, in_batched, pred, default, small, big):
        p_b, d_b, s_b, g_b = in_batched
        bcast = lambda x, b: x if b else jnp.broadcast_to(x, (axis_size,) + jnp.shape(x))
        default = jax.tree_util.tree_map(bcast, default, d_b)
        ax = lambda b: 0 if b else None
        s_ax, g_ax = jax.tree_util.tree_map(ax, s_b), jax.tree_util.tree_map(ax, g_b)
        vfn = jax.vmap(fn, in_axes=(s_ax, g_ax))
        if not p_b:  # the same predicate for every stream
            out = _rare_loop(pred, lambda sm, bg: vfn(sm, bg), default, small, big)
            return out, jax.tree_util.tree_map(lambda _: True, out)
        per_stream = sum(np.prod(np.shape(x)[1:], dtype=np.int64) * jnp.dtype(x.dtype).itemsize
                         for x, b in zip(jax.tree_util.tree_leaves((small, big)), jax.tree_util.tree_leaves((s_b, g_b)))
                         if b)
        c = _chunk(axis_size)
        if per_stream > _COMPACT_MAX_BYTES or c == axis_size:
            out = _rare_loop(jnp.any(pred), lambda sm, bg: _select_rows(pred, vfn(sm, bg), default),
                             default, small, big)
            return out, jax.tree_util.tree_map(lambda _: True, out)
        order = jnp.argsort(~pred, stable=True).astype(jnp.int32)  # streams that take the branch first
        n_true = jnp.sum(pred, dtype=jnp.int32)

        def body(carry):
            i, res = carry
            start = jnp.minimum(i * c, axis_size - c)
            ids = lax.dynamic_slice(order, (start,), (c,))  # distinct streams
            pos = start + jnp.arange(c, dtype=jnp.int32)
            take = (pos >= i * c) & (pos < n_true)
            take_rows = lambda tree, b: jax.tree_util.tree_map(lambda x, bb: x[ids] if bb else x, tree, b)
            sm, bg = lax.optimization_barrier((take_rows(small, s_b), take_rows(big, g_b)))
            out = vfn(sm, bg)
            res = jax.tree_util.tree_map(
                lambda r, o: r.at[ids].set(jnp.where(take.reshape((c,) + (1,) * (o.ndim - 1)), o, r[ids])), res, out)
            return i + 1, res

        _, out = lax.while_loop(lambda carry: carry[0] * c < n_true, body, (jnp.zeros((), jnp.int32), default))
        return out, jax.tree_util.tree_map(lambda _: True, out)

    return rare(pred, default, small, big)


def _select_rows(pred, new, old):
    return jax.tree_util.tree_map(lambda a, b: jnp.where(pred.reshape((-1,) + (1,) * (a.ndim - 1)), a, b), new, old)


def _argmin(x, axis=-1):
    """First index of the minimum along `axis` (int32).

    Same result as ``jnp.argmin`` for inputs without NaN, but a min followed by
    a masked min over indices: XLA:CPU runs this several times faster than its
    variadic argmin reduction.
    """
    n = x.shape[axis]
    shape = [1] * x.ndim
    shape[axis] = n
    idx = jnp.arange(n, dtype=jnp.int32).reshape(shape)
    mn = jnp.min(x, axis=axis, keepdims=True)
    return jnp.min(jnp.where(x == mn, idx, n), axis=axis)


def _grow_eps(DL, lm_valid, lm_arrival, valid, eps):
    """Smallest ε' >= eps at which some landmark is redundant, for every landmark.

    Landmark u is redundant at ε' iff ``G_u(ε') <= ε'`` with
    ``G_u(ε') = max{m_u(v) : d(u, v) <= ε'}`` (the spec's prefix maximum) and
    ``m_u(v)`` the distance from v to the nearest other landmark. Only the
    points v that u owns (u is their nearest landmark) can have
    ``m_u(v) > d(u, v)``, so G_u only needs those. Because G_u is
    non-decreasing, iterating ``c <- max(c, G_u(c))`` from c = eps climbs
    through infeasible values only (every ε' in [c, G_u(c)) has
    G_u(ε') >= G_u(c) > ε') and stops at the smallest fixed point, i.e. the
    smallest feasible ε' >= eps. All landmarks iterate together; each round
    is O(N) and the number of rounds is the longest chain of nested
    private-neighbour intervals, typically a handful.

    Args:
      DL: (R, N) distances from the R landmark rows to the buffered points
        (inf for empty slots, 0 from a landmark to itself).
      lm_valid: (R,) bool, rows that are landmarks.
      lm_arrival: (R,) int32 arrival index of each row (tie rule).
      valid: (N,) bool occupied buffer slots.
      eps: current ε.

    Returns:
      ``(eps_new, row_removed, eps_per_row)``; ties go to the earliest
      arrival.
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

    def body(carry):
        # dense masked max over each row's owned points instead of a scatter-max (collisions, and a
        # batched scatter under vmap, cost more than R x N arithmetic)
        c, _ = carry
        viol = (a[None, :] <= c[:, None]) & (M > c[:, None])
        c_new = jnp.maximum(c, jnp.max(jnp.where(viol, M, -jnp.inf), axis=1))
        return c_new, jnp.any(c_new > c)

    c0 = jnp.full((R,), eps, DL.dtype)
    c, _ = lax.while_loop(lambda carry: carry[1], body, (c0, jnp.array(True)))
    eps_u = jnp.where(lm_valid, c, jnp.inf)
    eps_new = jnp.min(eps_u)
    tied = lm_valid & (eps_u == eps_new)
    rm = _argmin(jnp.where(tied, lm_arrival, _IMAX))
    return eps_new, rm, eps_u


def _full_dist(state: State, slot, dx, cfg: _Cfg):
    """(N, N) distances of buffered points: inf for empty slots, 0 on the diagonal."""
    N = cfg.buffer_size
    if cfg.cache:
        D = state.dist
    else:
        D = cfg.dist.dist(state.params, state.points, state.points)
        D = D.at[slot].set(dx).at[:, slot].set(dx)
    eye = jnp.eye(N, dtype=bool)
    vv = state.valid[:, None] & state.valid[None, :]
    return jnp.where(vv, jnp.where(eye, 0.0, D), jnp.inf)


def _x_passes_degree_rule(deg_x, deg_sum):
    """deg(x) <= 2·sqrt(|E|), i.e. deg(x)² <= 4|E| = 2·Σ deg, in exact unsigned arithmetic.

    uint32 holds 2·Σ deg <= 2·N·(N − 1) for every buffer allowed
    (N <= 40000), where int32 would overflow past N ≈ 32768.
    """
    d = deg_x.astype(jnp.uint32)
    return d * d <= jnp.uint32(2) * deg_sum.astype(jnp.uint32)


class _Case3(NamedTuple):
    new: Array        # slot of the landmark added (x or x's neighbour)
    rm_row: Array     # position (0..n_L) of the removed landmark in slots + [new]
    eps: Array        # ε after the growth
    full: Array       # the O(N²) degree count ran


def _case3(small, state: State, cfg: _Cfg) -> _Case3:
    """Degree rule and ε growth for an uncovered x with a full landmark set.

    x is already in the buffer at `slot` (`state` is the state after x was
    written). Returns only small results; the caller applies them.

    |E| is only needed to decide deg(x) <= 2·sqrt(|E|). The edges incident to
    the landmarks or to x are a lower bound on |E| that costs O(n_L·N); only
    when it does not settle the rule are all O(N²) pairs counted.
    """
    slot, dx = small
    N, n_L = cfg.buffer_size, cfg.max_landmarks
    eps, valid = state.eps, state.valid
    slots = state.landmark_slots  # exactly n_L landmarks in case 3
    if cfg.cache:
        DL = state.dist[slots]
    else:
        DL = cfg.dist.dist(state.params, state.points[slots], state.points)
    cols = jnp.arange(N)[None, :]
    self_ = slots[:, None] == cols
    # exact zeros on the diagonal, x's column from dx (the distances its coverage was decided with)
    DL = jnp.where(cols == slot, dx[slots][:, None],
                   jnp.where(self_, 0.0, jnp.where(valid[None, :], DL, jnp.inf)))
    # twice the number of edges incident to a landmark, in one pass: an edge to a non-landmark is seen once
    # (weight 2), an edge between two landmarks twice (weight 1 each). x is not a landmark yet and has no
    # edge to one (it is uncovered), so its edges are added apart.
    w = jnp.where(state.is_landmark, 1, 2).astype(jnp.int32)
    e_twice = jnp.sum(jnp.where((DL <= eps) & ~self_, w[None, :], 0), dtype=jnp.int32)
    deg_x = jnp.sum(dx <= eps, dtype=jnp.int32) - 1  # dx[slot] = 0 counts x itself

    def exact(op, st):
        slot, dx = op
        D = _full_dist(st, slot, dx, cfg)
        adj = (D <= st.eps) & ~jnp.eye(N, dtype=bool)
        deg = jnp.sum(adj, axis=1, dtype=jnp.int32)
        use_x = _x_passes_degree_rule(deg[slot], jnp.sum(deg, dtype=jnp.uint32))
        nb = adj[slot]
        min_deg = jnp.min(jnp.where(nb, deg, _IMAX))
        cand = nb & (deg == min_deg)
        u = _argmin(jnp.where(cand, st.arrival, _IMAX))
        new = jnp.where(use_x, slot, u)
        return new, D[new]

    quick = _x_passes_degree_rule(deg_x, e_twice.astype(jnp.uint32) + 2 * deg_x.astype(jnp.uint32))
    new, row = _rare(~quick, exact, (slot, dx), (slot, dx), state)
    slots1 = jnp.concatenate([slots, new[None]])
    DL1 = jnp.concatenate([DL, row[None]], axis=0)
    arrival1 = state.arrival[slots1]
    eps_new, rm_row, _ = _grow_eps(DL1, jnp.ones((n_L + 1,), bool), arrival1, valid, eps)
    # min_support (off by default, so its pass and sort run only where some stream asks for it)
    rm_row = _rare(state.params.min_support > 0, _weakest, rm_row,
                   (rm_row, eps_new), (DL1, arrival1, state.params.min_support))
    # density_shift (off by default; runs only when the new landmark is kept, and then costs O(|cand|·N))
    shift = state.params.density_shift
    new = _rare((shift > 0) & (rm_row != n_L), lambda sm, st: _densest(sm, st, cfg), new,
                (new, eps_new * shift, row), state)
    return _Case3(new, rm_row.astype(jnp.int32), eps_new, ~quick)


# Candidates of `_densest` whose neighbours are counted per round (a (chunk, N) block of distances).
_DENSE_CHUNK = 32


def _densest(small, state: State, cfg: _Cfg):
    """density_shift: the buffered point within r of `new` with the most buffered points within r.

    Stays at `new` when that point is already a landmark. Ties go to the
    earliest arrival. Only the candidates (the points within r of `new`)
    have their neighbours counted: they are sorted to the front and counted
    in chunks of `_DENSE_CHUNK` rows against the buffer, so a call costs
    O(ceil(|cand| / chunk) · chunk · N) distance work instead of O(N²).

    Args:
      small: ``(new, r, row)``: slot of the landmark just admitted, the radius
        r = c·ε, and its (N,) distances to the buffer (inf for empty slots,
        0 at `new`).
      state: the state after x was written (read only).
    """
    new, r, row = small
    N = cfg.buffer_size
    c = min(N, _DENSE_CHUNK)
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
        if cfg.cache:
            Dc = state.dist[ids]
        else:
            Dc = cfg.dist.dist(state.params, state.points[ids], state.points)
        Dc = jnp.where(ids[:, None] == cols[None, :], 0.0, jnp.where(state.valid[None, :], Dc, jnp.inf))
        count = jnp.where(take, jnp.sum(Dc <= r, axis=1, dtype=jnp.int32), -1)
        arr = jnp.where(take, state.arrival[ids], _IMAX)
        cmax = jnp.max(count)
        j = _argmin(jnp.where(count == cmax, arr, _IMAX))
        better = (cmax > best_count) | ((cmax == best_count) & (arr[j] < best_arr))
        return (i + 1, jnp.where(better, cmax, best_count), jnp.where(better, arr[j], best_arr),
                jnp.where(better, ids[j], best))

    init = (jnp.zeros((), jnp.int32), jnp.int32(-1), jnp.int32(_IMAX), new.astype(jnp.int32))
    best = lax.while_loop(lambda carry: carry[0] * c < n_cand, body, init)[3]
    return jnp.where(state.is_landmark[best], new, best).astype(new.dtype)


def _weakest(small, big):
    """min_support: the least supported landmark goes first when some has fewer than m neighbours."""
    rm_row, eps_new = small
    DL1, arrival1, min_support = big
    support = jnp.sum(DL1 <= eps_new, axis=1, dtype=jnp.int32) - 1  # each row's own 0 excluded
    # weak: fewer than m neighbours and fewer than a quarter of a typical landmark's (so that landmarks at
    # the edge of a region the stream is still filling are not taken for noise)
    typical = jnp.median(support.astype(DL1.dtype))
    weak = (support < min_support) & (support.astype(DL1.dtype) < 0.25 * typical)
    min_sup = jnp.min(jnp.where(weak, support, _IMAX))
    weak_rm = _argmin(jnp.where(weak & (support == min_sup), arrival1, _IMAX))
    return jnp.where(jnp.any(weak), weak_rm, rm_row)


def _step(state: State, x, cfg: _Cfg):
    """One arrival; returns (new_state, info).

    Every array the step writes is written in place (a slot, a row and a
    column of the cache); the rare branches read the state without carrying
    it, so no step copies or selects an O(N²) leaf.
    """
    params = state.params
    N, n_L = cfg.buffer_size, cfg.max_landmarks
    lm = state.is_landmark
    if cfg.dist.precomputed or cfg.dist.callable_metric:
        dx = cfg.dist.dist(params, x[None], state.points)[0]
        sq = dx * dx
    else:  # squared distances first, so that the loss is differentiable at 0
        sq = cfg.dist.sqdist(params, x[None], state.points)[0]
        dx = jnp.sqrt(sq)
    dx = jnp.where(state.valid, dx, jnp.inf)
    loss = jnp.min(jnp.where(lm & state.valid, sq, jnp.inf))
    covered = jnp.any(lm & (dx <= state.eps))
    n_lm = jnp.sum(lm)

    free = ~state.valid
    has_free = jnp.any(free)
    oldest = _argmin(jnp.where(state.valid & ~lm, state.arrival, _IMAX))
    slot = jnp.where(has_free, _argmin(~free), oldest)
    evicted = jnp.where(has_free, -1, state.arrival[slot])
    t = state.n_seen
    dx = dx.at[slot].set(0.0)
    case = jnp.where(covered, CASE_COVERED, jnp.where(n_lm < n_L, CASE_ADDED, CASE_REPLACED))
    added_now = case == CASE_ADDED
    s = state._replace(
        points=state.points.at[slot].set(x.astype(state.points.dtype)),
        valid=state.valid.at[slot].set(True),
        arrival=state.arrival.at[slot].set(t),
        is_landmark=lm.at[slot].set(added_now),
        landmark_slots=state.landmark_slots.at[jnp.where(added_now, n_lm, n_L)].set(slot, mode="drop"),
        n_seen=t + 1,
        dist=state.dist.at[slot].set(dx).at[:, slot].set(dx) if cfg.cache else state.dist,
    )
    is3 = case == CASE_REPLACED
    no3 = _Case3(slot.astype(jnp.int32), jnp.int32(n_L), s.eps, jnp.array(False))
    r = _rare(is3, lambda op, st: _case3(op, st, cfg), no3, (slot, dx), s)
    accept = is3
    slots1 = jnp.concatenate([s.landmark_slots, r.new[None]])
    rm = slots1[jnp.minimum(r.rm_row, n_L)]
    # apply the swap with index tricks (out-of-range indices are dropped), not a select of whole arrays
    lm1 = s.is_landmark.at[jnp.where(accept, r.new, N)].set(True, mode="drop")
    lm1 = lm1.at[jnp.where(accept, rm, N)].set(False, mode="drop")
    # the new landmark takes the removed one's position (nothing moves if it is itself removed)
    ls1 = s.landmark_slots.at[jnp.where(accept, r.rm_row, n_L)].set(r.new, mode="drop")
    s = s._replace(is_landmark=lm1, landmark_slots=ls1, eps=jnp.where(accept, r.eps, s.eps))
    added = jnp.where(accept, s.arrival[r.new], jnp.where(added_now, t, -1)).astype(jnp.int32)
    removed = jnp.where(accept, s.arrival[rm], -1).astype(jnp.int32)
    replaced = accept & (removed != added)
    y = None
    if cfg.track:
        changed = added_now | replaced

        def refresh(ls, st):
            emb = _fresh_embedding(st._replace(landmark_slots=ls), cfg)
            return _procrustes(emb, st.embedding) if cfg.align else emb

        emb = _rare(changed, refresh, s.embedding, s.landmark_slots, s)
        s = s._replace(embedding=emb)
        y = _embed_points(s, emb, x.astype(s.points.dtype), cfg)
    info = Info(loss=loss, case=case.astype(jnp.int32), replaced=replaced, eps=s.eps, added=added,
                removed=removed, evicted=evicted.astype(jnp.int32),
                n_landmarks=jnp.sum(s.is_landmark).astype(jnp.int32), full_degrees=is3 & r.full, y=y)
    return s, info


def _check_items(x, cfg: _Cfg, params: Params, name: str) -> None:
    """Host-side check that precomputed stream items are valid indices."""
    if not cfg.dist.precomputed or not is_concrete(x) or not is_concrete(params.distances):
        return
    x = np.asarray(x)
    n = np.shape(params.distances)[0]
    if n == 0:
        raise ValueError("metric='precomputed' needs a distance matrix: pass distances=... to landmark_mds "
                         "or to default_params")
    if x.shape[-1] != 1:
        raise ValueError(f"{name}: with metric='precomputed' items are indices of shape (1,); got {x.shape}")
    bad = (x != np.round(x)) | (x < 0) | (x >= n)
    if bad.any():
        raise ValueError(f"{name}: precomputed items must be integer indices in [0, {n}); "
                         f"first bad value {x[bad][0]!r}")


def _first_state(cfg: _Cfg, x, dtype, params: Params) -> State:
    """The state after the first point: what `_step` gives on an empty state, built directly."""
    s = _empty_state(cfg, x.shape[0], dtype, params)
    s = s._replace(points=s.points.at[0].set(x.astype(dtype)), valid=s.valid.at[0].set(True),
                   arrival=s.arrival.at[0].set(0), is_landmark=s.is_landmark.at[0].set(True),
                   landmark_slots=s.landmark_slots.at[0].set(0),
                   n_seen=jnp.ones((), jnp.int32))
    if cfg.track:  # one landmark: the MDS is the origin, with no positive eigenvalue
        e = s.embedding
        s = s._replace(embedding=e._replace(ids=e.ids.at[0].set(0), mask=e.mask.at[0].set(True)))
    return s


@functools.lru_cache(maxsize=64)
def _init_scan(cfg: _Cfg):
    return jax.jit(lambda s, xs: lax.scan(lambda s_, x: _step(s_, x, cfg), s, xs)[0])


def init(key, x_init, params: Params, *, cfg: _Cfg) -> State:
    """Build the state from the first points (they arrive one by one as in `update`).

    With ε = eps0 = 0 the first ``max_landmarks`` distinct points become the
    landmarks, as in the paper. `key` is accepted for the common learner
    shape; the algorithm is deterministic.
    """
    del key
    x_init = check_points(x_init, "x_init", min_rows=1)
    if cfg.dist.precomputed:
        if x_init.shape[1] != 1:
            raise ValueError("with metric='precomputed' x_init holds indices, shape (n0, 1); "
                             f"got {tuple(x_init.shape)}")
        _check_items(x_init, cfg, params, "x_init")
    dtype = x_init.dtype if not cfg.dist.precomputed else jnp.asarray(params.distances).dtype
    x_init = x_init.astype(dtype)
    state = _first_state(cfg, x_init[0], dtype, params)
    if x_init.shape[0] > 1:
        state = _init_scan(cfg)(state, x_init[1:])
    return state


def build_update(cfg: _Cfg):
    """The kernel ``update(key, state, x[p]) -> (state, info)`` for a configuration."""

    def update(key, state: State, x):
        del key
        check_point(x, state.points.shape[1])
        return _step(state, x, cfg)

    return update


def embedding(state: State, *, n_components: int, metric: Metric = None, align: bool = False,
              weighted: bool = False) -> Embedding:
    """The landmark MDS of the current landmarks.

    With ``align=True`` the state's tracked (aligned) embedding is returned;
    otherwise it is computed from the landmarks (one eigendecomposition).
    ``weighted=True`` (an option beyond the paper): each landmark counts for
    the buffered points it stands for (`landmark_weights`) in a weighted
    landmark MDS (`lmds_fit`), so that a landmark on an outlier or a small
    cluster weighs what those points weigh. `n_components` and `metric` must
    match the learner's. With ``align=True`` the tracked embedding is
    returned as the learner keeps it — weighted if and only if the learner
    was built with ``weighted=True`` — and the `weighted` argument is not
    used (the state does not record which kind it holds, so a mismatch
    cannot be detected here).
    """
    if align:
        return state.embedding
    cfg = _make_cfg(int(state.embedding.mask.shape[0]), state.points.shape[0], n_components, False, metric,
                    state.dist.shape[0] > 0, weighted=weighted)
    return _fresh_embedding(state, cfg)


def landmark_weights(state: State, *, metric: Metric = None) -> Array:
    """How many buffered points each landmark stands for: (n_L,) int32, by landmark position.

    A buffered point counts for its nearest landmark (ties: the first
    position), except that every landmark counts itself, so a landmark
    that coincides with another (possible under ``density_shift`` or a
    precomputed metric with zero off-diagonal distances) keeps weight >= 1;
    empty positions get 0. O(n_L·N) distance work. `metric` must match the
    learner's.
    """
    return _landmark_weights(state, _make_dist(metric))


def _landmark_weights(state: State, dist) -> Array:
    slots, mask = _landmark_slots(state)
    if state.dist.shape[0] > 0:
        DL = state.dist[slots]
    else:
        DL = dist.dist(state.params, state.points[slots], state.points)
    n_L, N = slots.shape[0], state.points.shape[0]
    DL = jnp.where(mask[:, None] & state.valid[None, :], DL, jnp.inf)
    own = _argmin(DL, axis=0)
    # a landmark's own slot is its own (a tie at distance 0 with a coincident landmark would give it to the
    # first position, leaving the other copy with weight 0: dropped from the weighted MDS)
    own = own.at[jnp.where(mask, slots, N)].set(jnp.arange(n_L, dtype=own.dtype), mode="drop")
    hit = (own[None, :] == jnp.arange(n_L, dtype=own.dtype)[:, None]) & state.valid[None, :]
    return jnp.where(mask, jnp.sum(hit, axis=1, dtype=jnp.int32), 0)


def _embed_points(state: State, emb: Embedding, x, cfg: _Cfg):
    single = x.ndim == 1
    X = x[None] if single else x
    sq = cfg.dist.sqdist(state.params, X, state.points[emb.slots])
    y = jnp.where(emb.mask, sq, 0.0) @ emb.weights + emb.offset
    return y[0] if single else y


def predict(state: State, x, *, cfg: _Cfg):
    """Embedding of x (p,) or (m, p) under the current landmarks -> (k,) or (m, k).

    With ``align=True`` the tracked embedding is used (aligned by orthogonal
    Procrustes to the previous one each time the landmarks changed), so
    consecutive predictions do not flip; otherwise it is computed afresh.
    With ``weighted=True`` the embedding is the weighted landmark MDS.
    Dimensions beyond ``embedding.n_positive`` are zero.
    """
    emb = state.embedding if cfg.track else _fresh_embedding(state, cfg)
    return _embed_points(state, emb, jnp.asarray(x), cfg)


def loss(state: State, x, *, cfg: _Cfg):
    """Squared distance from x (p,) to its nearest landmark (inf with no landmark)."""
    sq = cfg.dist.sqdist(state.params, jnp.asarray(x)[None], state.points)[0]
    return jnp.min(jnp.where(state.is_landmark & state.valid, sq, jnp.inf))


def landmarks(state: State):
    """The current landmarks in compact form (host-side; concrete state).

    Returns:
      ``(points (n, p), arrival_indices (n,), slots (n,))`` sorted by arrival.
    """
    lm = np.asarray(state.is_landmark)
    slots = np.flatnonzero(lm)
    arr = np.asarray(state.arrival)[slots]
    order = np.argsort(arr, kind="stable")
    slots = slots[order]
    return np.asarray(state.points)[slots], arr[order], slots


def default_buffer_size(max_landmarks: int) -> int:
    """The default buffer: ``max(1024, 10 · max_landmarks)`` points.

    The buffer is a window: once it is full the oldest non-landmark point
    is evicted, so the graph (and ε, and which landmark is redundant) only
    sees the most recent points besides the landmarks. 10·n_L alone was a
    100-point window at the paper's n_L = 10; 1024 covers the paper's
    streams of about a thousand points whole. Pass ``buffer_size`` >= the
    stream's length for the paper's unbounded algorithm.
    """
    return max(1024, 10 * int(max_landmarks))


def _make_cfg(max_landmarks, buffer_size, n_components, align, metric, cache_distances,
              embed_arrivals=False, weighted=False) -> _Cfg:
    n_L = check_capacity(max_landmarks, "max_landmarks", 1)
    N = check_capacity(default_buffer_size(n_L) if buffer_size is None else buffer_size, "buffer_size", n_L + 1)
    if N > 40000:
        raise ValueError(f"buffer_size={N} is too large (the graph pass is O(N^2) and degree sums are uint32)")
    k = check_capacity(n_components, "n_components", 1)
    dist = _make_dist(metric)
    cache = dist.callable_metric if cache_distances is None else bool(cache_distances)
    if dist.precomputed:
        cache = False  # a lookup is as cheap as the cache
    return _Cfg(n_L, N, k, bool(align), cache, dist, bool(align) or bool(embed_arrivals), bool(weighted))


def landmark_mds(max_landmarks: int = 100, *, n_components: int = 2, buffer_size: Optional[int] = None,
                 metric: Metric = None, distances=None, align: bool = False,
                 cache_distances: Optional[bool] = None, eps0: float = 0.0, embed_arrivals: bool = False,
                 min_support: int = 0, density_shift: float = 0.0, weighted: bool = False) -> StreamLearner:
    """Online landmark replacement with landmark MDS, as a `StreamLearner`.

    Args:
      max_landmarks: n_L, the most landmarks kept (static).
      n_components: k, the embedding dimension (static; < max_landmarks).
      buffer_size: N, how many points form the geometric graph (static,
        >= max_landmarks + 1; default `default_buffer_size`, i.e.
        max(1024, 10·max_landmarks)). When full, the oldest non-landmark point
        is evicted (`Info.evicted`): the graph is then a window of recent
        points plus the landmarks. Each uncovered arrival with a full
        landmark set costs O(n_L·N) (rarely O(N²)) distance work.
      metric: None/"euclidean", a jax-traceable symmetric ``metric(a, b)``,
        or "precomputed" (items are indices, see `index_stream`).
      distances: the (n, n) matrix for ``metric="precomputed"`` (stored in
        the default params).
      align: keep the embedding in the state, recomputed and aligned to the
        previous one (orthogonal Procrustes on shared landmarks, with
        translation) whenever the landmarks change. Costs one eigendecomposition
        of an n_L x n_L matrix per change; without it `predict` computes the
        embedding afresh (unaligned) at every call. On CPU, jaxlib's eigh
        calls OpenBLAS: set ``OPENBLAS_NUM_THREADS=1`` on a busy machine (its
        spinning threads made a 100 x 100 eigh ~100x slower in our runs).
      cache_distances: keep the (N, N) distances of buffered points in the
        state (N metric evaluations per arrival instead of N² per case-3
        arrival; the state is then O(N²)). Default: on for a callable metric,
        off otherwise.
      eps0: initial ε (numeric param).
      embed_arrivals: keep the (unaligned) embedding in the state, refreshed
        whenever the landmarks change, and report each arrival's
        coordinates under the landmarks after its update in ``Info.y`` (also
        on with ``align=True``, where they are aligned). Costs what
        ``align`` costs without the Procrustes step.
      min_support: noise-robust replacement (numeric param; 0 = the paper's
        rule): see `Params.min_support`.
      density_shift: noise-robust admission (numeric param; 0 = the
        paper's rule): see `Params.density_shift`.
      weighted: a weighted landmark MDS (static; an option beyond the
        paper): each landmark weighs the buffered points it stands for
        (`landmark_weights`, see `lmds_fit`) in `predict`, in the tracked
        embedding (``align`` / ``embed_arrivals``) and so in ``Info.y``. The
        tracked embedding is refreshed when the landmark set changes, with
        the weights of that moment (they are not updated between changes);
        each refresh adds O(n_L·N) distance work (uncached) for the weights.

    Returns:
      ``StreamLearner(init, update, predict, loss, params, config)``; ``predict``
      returns embeddings (k,) or (m, k), ``loss`` the squared distance to the
      nearest landmark.
    """
    cfg = _make_cfg(max_landmarks, buffer_size, n_components, align, metric, cache_distances, embed_arrivals,
                    weighted)
    if cfg.n_components >= cfg.max_landmarks:
        raise ValueError(f"n_components={cfg.n_components} must be smaller than max_landmarks="
                         f"{cfg.max_landmarks} (n landmarks give at most n - 1 MDS dimensions)")
    if cfg.dist.precomputed and distances is None:
        raise ValueError("metric='precomputed' needs distances=(n, n) matrix")
    if distances is not None and not cfg.dist.precomputed:
        raise ValueError("distances=... is only used with metric='precomputed'")
    defaults = default_params(eps0, distances, min_support, density_shift)

    def _init(key, x_init, params=None):
        return init(key, x_init, defaults if params is None else params, cfg=cfg)

    update, predict_, loss_ = _kernels(cfg)
    config = dict(learner="landmark_mds", max_landmarks=cfg.max_landmarks, n_components=cfg.n_components,
                  buffer_size=cfg.buffer_size, metric=metric_kind(metric), align=cfg.align,
                  cache_distances=cfg.cache, embed_arrivals=bool(embed_arrivals), weighted=cfg.weighted)
    return StreamLearner(_init, update, predict_, loss_, defaults, config)


@functools.lru_cache(maxsize=64)
def _kernels(cfg: _Cfg):
    """update / predict / loss of a configuration, built once so that learners
    with equal configurations share jit caches."""
    return (build_update(cfg), lambda s, x: predict(s, x, cfg=cfg), lambda s, x: loss(s, x, cfg=cfg))
