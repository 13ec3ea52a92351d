"""Online landmark replacement with landmark MDS: the learner.

The learner keeps at most ``max_landmarks`` (n_L) landmarks, chosen online
so that they stay a dominating set of the geometric graph G_ε of the
buffered points, whose threshold ε only grows (C. Thongprayoon and
N. Masuda, Proc. R. Soc. A 2024), and embeds any point in R^k by landmark
MDS (V. de Silva and J. B. Tenenbaum, 2004). The algorithm, its costs and
the measurements behind its defaults: ``docs/internals/landmarks.md``.

One arrival x (`step`) is a pipeline of small stages:

1. `_observe`: x's distances to the buffer, its prequential loss (squared
   distance to the nearest landmark) and whether a landmark covers it.
2. `_write`: x takes a free buffer slot, or the oldest non-landmark's; the
   case is decided: covered, added (fewer than n_L landmarks) or case 3.
3. Case 3 (`jaxstream.embedding.replacement.replace_landmark`): the degree
   rule admits x or a neighbour, ε grows until some landmark is redundant
   and that one is removed; `_apply_swap` writes the result.
4. `_track` (``align`` or ``embed_arrivals``): the embedding is refreshed
   (and aligned) when the landmark set changed, and x is embedded.

Memory is bounded by the static ``max_landmarks`` and ``buffer_size``;
landmarks are never evicted. The rare branches go through
`jaxstream._batching.rare`, which under `vmap` runs them only for the
streams that take them. Distances: Euclidean, a jax-traceable
``metric(a, b)``, or ``"precomputed"`` (items are indices into
``Params.distances``, see `index_stream`).
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from .._caches import cached
from .._batching import rare
from .._loops import static_trip_counts_enabled
from .._checks import check_point, check_points, is_concrete
from .._core import StreamLearner, cached_learner
from .._ops import first_argmin
from ..geometry import safe_sqrt
from .coords import embed_points, empty_embedding, fresh_embedding, landmark_weights as _landmark_weights, procrustes
from .distances import Metric, _make_dist
from .replacement import Case3, replace_landmark
from .types import (CASE_ADDED, CASE_COVERED, CASE_REPLACED, Config, Embedding, Info, Params, State,
                    default_params, make_config)

Array = jax.Array

_IMAX = np.iinfo(np.int32).max

__all__ = ["init", "update", "build_update", "step", "embedding", "landmark_weights", "predict", "loss",
           "landmarks", "landmark_mds", "current_embedding", "first_state", "check_items"]


# ---------------------------------------------------------------------------
# The round


def _observe(state: State, x, config: Config):
    """``(dx, loss, covered)``: x's (N,) distances to the buffer (inf for empty slots), its squared
    distance to the nearest landmark, and whether a landmark is within ε."""
    lm = state.is_landmark
    if config.dist.precomputed or config.dist.callable_metric:
        dx = config.dist.dist(state.params, x[None], state.points)[0]
        sq = dx * dx
    else:  # squared distances first, so that the loss is differentiable at 0
        sq = config.dist.sqdist(state.params, x[None], state.points)[0]
        dx = safe_sqrt(sq)  # derivative 0 at 0 (x on a buffered point, an empty slot at 0)
    dx = jnp.where(state.valid, dx, jnp.inf)
    loss = jnp.min(jnp.where(lm & state.valid, sq, jnp.inf))
    covered = jnp.any(lm & (dx <= state.eps))
    return dx, loss, covered


def _write(state: State, x, dx, covered, config: Config):
    """x into the buffer: ``(state, slot, dx, evicted, case)``.

    x takes the first free slot, or the oldest non-landmark's (whose arrival
    index is `evicted`, else -1); in case 2 it becomes a landmark at the
    next free position. `dx` is returned with 0 at x's slot. Every array is
    written in place (a slot, and a row and a column of the cache).
    """
    n_L = config.max_landmarks
    lm = state.is_landmark
    n_lm = jnp.sum(lm)
    free = ~state.valid
    has_free = jnp.any(free)
    oldest = first_argmin(jnp.where(state.valid & ~lm, state.arrival, _IMAX))
    slot = jnp.where(has_free, first_argmin(~free), oldest)
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
        dist=state.dist.at[slot].set(dx).at[:, slot].set(dx) if config.cache else state.dist,
    )
    return s, slot, dx, evicted, case


def _apply_swap(s: State, r: Case3, accept, config: Config):
    """Apply case 3's result with index tricks (out-of-range indices are dropped), not a select of whole
    arrays: ``(state, rm)`` with rm the removed landmark's slot."""
    N, n_L = config.buffer_size, config.max_landmarks
    slots1 = jnp.concatenate([s.landmark_slots, r.new[None]])
    rm = slots1[jnp.minimum(r.rm_row, n_L)]
    lm1 = s.is_landmark.at[jnp.where(accept, r.new, N)].set(True, mode="drop")
    lm1 = lm1.at[jnp.where(accept, rm, N)].set(False, mode="drop")
    # the new landmark takes the removed one's position (nothing moves if it is itself removed)
    ls1 = s.landmark_slots.at[jnp.where(accept, r.rm_row, n_L)].set(r.new, mode="drop")
    return s._replace(is_landmark=lm1, landmark_slots=ls1, eps=jnp.where(accept, r.eps, s.eps)), rm


def _track(s: State, x, changed, config: Config):
    """Refresh the tracked embedding when the landmark set `changed` (aligned to the previous one with
    ``align``) and embed x: ``(state, y (k,))``."""
    def refresh(ls, st):
        emb = fresh_embedding(st._replace(landmark_slots=ls), config)
        return procrustes(emb, st.embedding) if config.align else emb

    emb = rare(changed, refresh, s.embedding, s.landmark_slots, s)
    s = s._replace(embedding=emb)
    return s, embed_points(s, emb, x.astype(s.points.dtype), config)


def step(state: State, x, config: Config) -> tuple[State, Info]:
    """One arrival x (p,): ``(new_state, info)``.

    Every array the step writes is written in place; the rare branches read
    the state without carrying it, so no step copies or selects an O(N²)
    leaf.
    """
    dx, loss_, covered = _observe(state, x, config)
    t = state.n_seen
    s, slot, dx, evicted, case = _write(state, x, dx, covered, config)
    added_now = case == CASE_ADDED
    is3 = case == CASE_REPLACED
    no3 = Case3(slot.astype(jnp.int32), jnp.int32(config.max_landmarks), s.eps, jnp.array(False))
    r = rare(is3, lambda op, st: replace_landmark(op, st, config), no3, (slot, dx), s)
    s, rm = _apply_swap(s, r, is3, config)
    added = jnp.where(is3, s.arrival[r.new], jnp.where(added_now, t, -1)).astype(jnp.int32)
    removed = jnp.where(is3, s.arrival[rm], -1).astype(jnp.int32)
    replaced = is3 & (removed != added)
    y = None
    if config.track:
        s, y = _track(s, x, added_now | replaced, config)
    info = Info(loss=loss_, case=case.astype(jnp.int32), replaced=replaced, eps=s.eps, added=added,
                removed=removed, evicted=evicted.astype(jnp.int32),
                n_landmarks=jnp.sum(s.is_landmark).astype(jnp.int32), full_degrees=is3 & r.full, y=y)
    return s, info


# ---------------------------------------------------------------------------
# init / update


def check_items(x, config: Config, params: Params, name: str) -> None:
    """Host-side check that precomputed stream items are valid indices (a no-op otherwise).

    Raises:
      ValueError: no distance matrix, items not of shape (..., 1), or not
        integer indices in [0, n).
    """
    if not config.dist.precomputed or not is_concrete(x) or not is_concrete(params.distances):
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


def _empty_state(config: Config, p: int, dtype, params: Params) -> State:
    N = config.buffer_size
    dist = jnp.zeros((N, N) if config.cache else (0, 0), dtype)
    return State(points=jnp.zeros((N, p), dtype), valid=jnp.zeros((N,), bool),
                 arrival=jnp.full((N,), -1, jnp.int32), is_landmark=jnp.zeros((N,), bool),
                 landmark_slots=jnp.full((config.max_landmarks,), -1, jnp.int32),
                 eps=jnp.asarray(params.eps0, dtype), n_seen=jnp.zeros((), jnp.int32), dist=dist,
                 embedding=empty_embedding(config.max_landmarks, config.n_components, dtype), params=params)


def first_state(config: Config, x, dtype, params: Params) -> State:
    """The state after the first point x (p,): what `step` gives on an empty state, built directly."""
    s = _empty_state(config, x.shape[0], dtype, params)
    s = s._replace(points=s.points.at[0].set(x.astype(dtype)), valid=s.valid.at[0].set(True),
                   arrival=s.arrival.at[0].set(0), is_landmark=s.is_landmark.at[0].set(True),
                   landmark_slots=s.landmark_slots.at[0].set(0),
                   n_seen=jnp.ones((), jnp.int32))
    if config.track:  # one landmark: the MDS is the origin, with no positive eigenvalue
        e = s.embedding
        s = s._replace(embedding=e._replace(ids=e.ids.at[0].set(0), mask=e.mask.at[0].set(True)))
    return s


@cached(2)
def _init_scan(config: Config, static_loops: bool):
    # `static_loops` (`jaxstream._loops`) is part of the key: jit would otherwise hand a trace made
    # with the dynamic loops to `jax.grad` (or the static one to `run_stream`).
    del static_loops
    return jax.jit(lambda s, xs: lax.scan(lambda s_, x: step(s_, x, config), s, xs)[0])


def init(key, x_init, params: Params, config: Config = Config()) -> State:
    """Build the state from the first points (they arrive one by one as in `update`).

    With ε = eps0 = 0 the first ``max_landmarks`` distinct points become the
    landmarks, as in the paper. `key` is accepted for the common learner
    shape; the algorithm is deterministic.

    Args:
      key: unused.
      x_init: (n0, p) first points, n0 >= 1 (indices (n0, 1) for precomputed).
      params: `Params`.
      config: static `Config`.

    Returns:
      `State` after the n0 points.
    """
    del key
    x_init = check_points(x_init, "x_init", min_rows=1)
    if config.dist.precomputed:
        if x_init.shape[1] != 1:
            raise ValueError("with metric='precomputed' x_init holds indices, shape (n0, 1); "
                             f"got {tuple(x_init.shape)}")
        check_items(x_init, config, params, "x_init")
    dtype = x_init.dtype if not config.dist.precomputed else jnp.asarray(params.distances).dtype
    x_init = x_init.astype(dtype)
    state = first_state(config, x_init[0], dtype, params)
    if x_init.shape[0] > 1:
        state = _init_scan(config, static_trip_counts_enabled())(state, x_init[1:])
    return state


def update(key, state: State, x, config: Config = Config()) -> tuple[State, Info]:
    """Learn one point x (p,): ``(new_state, info)`` (`key` unused: the algorithm is deterministic).

    x is cast to the state's dtype (fixed by `init`), as every learner does:
    a float64 stream after a float32 `init` is learned in float32."""
    del key
    check_point(x, state.points.shape[1])
    return step(state, jnp.asarray(x).astype(state.points.dtype), config)


def build_update(config: Config):
    """The kernel ``update(key, state, x[p]) -> (state, info)`` of a configuration (cached: equal
    configurations get the same function, hence share compiled programs)."""
    return _kernels(config)[0]


# ---------------------------------------------------------------------------
# Read-only functions


def current_embedding(state: State, config: Config) -> Embedding:
    """The state's tracked embedding when the learner keeps one, else a fresh landmark MDS."""
    return state.embedding if config.track else fresh_embedding(state, config)


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
    config = make_config(int(state.embedding.mask.shape[0]), state.points.shape[0], n_components, False, metric,
                         state.dist.shape[0] > 0, weighted=weighted)
    return fresh_embedding(state, config)


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


def predict(state: State, x, config: Config = Config()) -> Array:
    """Embedding of x (p,) or (m, p) under the current landmarks -> (k,) or (m, k).

    When the learner tracks its embedding (``align`` or ``embed_arrivals``)
    the tracked one is used (with ``align``, aligned by orthogonal
    Procrustes to the previous one each time the landmarks changed, so
    consecutive predictions do not flip); otherwise it is computed afresh.
    With ``weighted=True`` the embedding is the weighted landmark MDS.
    Dimensions beyond ``embedding.n_positive`` are zero.
    """
    return embed_points(state, current_embedding(state, config), jnp.asarray(x), config)


def loss(state: State, x, config: Config = Config()) -> Array:
    """Squared distance from x (p,) to its nearest landmark (inf with no landmark); differentiable in x."""
    sq = config.dist.sqdist(state.params, jnp.asarray(x)[None], state.points)[0]
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


# ---------------------------------------------------------------------------
# The factory


@cached()
def _kernels(config: Config):
    """update / predict / loss of a configuration, built once so that learners with equal
    configurations share jit caches."""
    def update_(key, state, x):
        return update(key, state, x, config)

    def predict_(state, x):
        return predict(state, x, config)

    def loss_(state, x):
        return loss(state, x, config)

    return update_, predict_, loss_


def _build(config: Config, defaults: Params) -> StreamLearner:
    def init_(key, x_init, params=None):
        return init(key, x_init, defaults if params is None else params, config)

    update_, predict_, loss_ = _kernels(config)
    return StreamLearner(init_, update_, predict_, loss_, defaults, config)


# Wide signature: the factory's static options, each documented; numeric ones go to **param_kwargs.
def landmark_mds(max_landmarks: int = 100, *, n_components: int = 2, buffer_size: Optional[int] = None,
                 metric: Metric = None, distances=None, align: bool = False,
                 cache_distances: Optional[bool] = None, eps0: float = 0.0, embed_arrivals: bool = False,
                 min_support: int = 0, density_shift: float = 0.0, weighted: bool = False) -> StreamLearner:
    """Online landmark replacement with landmark MDS, as a `StreamLearner`.

    Two calls with equal arguments return the same learner (its compiled
    programs are reused); with a distance matrix (an array) a new learner is
    built, whose `update` is still the configuration's cached kernel.

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
        calls OpenBLAS, whose spinning threads can slow it down many times
        on a busy machine: set ``OPENBLAS_NUM_THREADS=1`` there.
      cache_distances: keep the (N, N) distances of buffered points in the
        state: N metric evaluations per arrival, and none more for case 3 or
        the embedding (otherwise n_L·N, rarely N², per case-3 arrival); the
        state is then O(N²). Default: on for a callable metric, off otherwise.
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
      ``StreamLearner(init, update, predict, loss, params, config)`` with
      ``config`` a `Config`; ``predict`` returns embeddings (k,) or (m, k),
      ``loss`` the squared distance to the nearest landmark.

    Raises:
      TypeError, ValueError: bad capacities, metric or distance matrix, or a
        numeric parameter out of its range (checked when concrete, here and
        by ``init(..., params)``): eps0 ≥ 0 and finite, min_support a whole
        number ≥ 0, density_shift in [0, 1].
    """
    config = make_config(max_landmarks, buffer_size, n_components, align, metric, cache_distances,
                         embed_arrivals, weighted)
    if config.n_components >= config.max_landmarks:
        raise ValueError(f"n_components={config.n_components} must be smaller than max_landmarks="
                         f"{config.max_landmarks} (n landmarks give at most n - 1 MDS dimensions)")
    if config.dist.precomputed and distances is None:
        raise ValueError("metric='precomputed' needs distances=(n, n) matrix")
    if distances is not None and not config.dist.precomputed:
        raise ValueError("distances=... is only used with metric='precomputed'")
    return cached_learner(_build, config, default_params,
                          dict(eps0=eps0, distances=distances, min_support=min_support, density_shift=density_shift))
