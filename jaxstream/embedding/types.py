"""The landmark learner's static configuration and its pytrees.

`Config` (static, hashable: capacities and variant choices), `Params`
(numeric, vmappable), `State`, `Embedding` (the landmark MDS of the current
landmarks in compact form) and `Info` (what one arrival did). Shapes use
n_L = ``max_landmarks``, N = ``buffer_size``, k = ``n_components`` and p the
size of a stream item (the data's dimension, or 1 for precomputed indices).
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np
import jax
import jax.numpy as jnp

from .._checks import check_capacity, is_concrete
from .distances import Metric, _Dist, _make_dist, metric_kind

Array = jax.Array

__all__ = ["Config", "Params", "default_params", "Embedding", "State", "Info", "CASE_COVERED", "CASE_ADDED",
           "CASE_REPLACED", "default_buffer_size", "make_config", "check_distance_matrix", "MAX_BUFFER"]

#: The codes of ``Info.case``: x was covered (1); added while there were fewer than n_L
#: landmarks (2); uncovered with n_L landmarks, so the degree rule and ε growth ran (3).
CASE_COVERED, CASE_ADDED, CASE_REPLACED = 1, 2, 3

#: The largest buffer (points): the graph pass is O(N²) and its degree sums are uint32
#: (`jaxstream.embedding.replacement.x_passes_degree_rule`).
MAX_BUFFER = 40000


class Config(NamedTuple):
    """Static configuration of the landmark learner (hashable; equal configurations share compiled code).

    Attributes:
      max_landmarks: n_L, the most landmarks kept.
      buffer_size: N, how many points form the geometric graph (>= n_L + 1;
        `landmark_mds` resolves None to `default_buffer_size`).
      n_components: k, the embedding dimension.
      align: keep the embedding in the state, aligned to the previous one.
      cache_distances: keep the (N, N) distances of buffered points in the
        state; None: on for a callable metric, off otherwise (`cache` is the
        effective flag; `landmark_mds` stores it resolved).
      metric: ``"euclidean"`` (or None), ``"precomputed"`` or a jax-traceable
        ``metric(a, b)`` (hashed by identity).
      embed_arrivals: keep the (unaligned) embedding in the state and report
        each arrival's coordinates in ``Info.y``.
      weighted: weighted landmark MDS (each landmark weighs the points it
        stands for).
    """

    max_landmarks: int = 100
    buffer_size: int = 1024
    n_components: int = 2
    align: bool = False
    cache_distances: Optional[bool] = None
    metric: Metric = "euclidean"
    embed_arrivals: bool = False
    weighted: bool = False

    name = "landmark_mds"

    @property
    def dist(self) -> _Dist:
        """The metric's distance functions (one object per metric, cached)."""
        return _make_dist(self.metric)

    @property
    def track(self) -> bool:
        """Whether the state keeps its embedding up to date (``align`` or ``embed_arrivals``)."""
        return bool(self.align) or bool(self.embed_arrivals)

    @property
    def cache(self) -> bool:
        """The effective ``cache_distances``: never for precomputed distances (a lookup is as cheap)."""
        dist = self.dist
        if dist.precomputed:
            return False
        return dist.callable_metric if self.cache_distances is None else bool(self.cache_distances)

    def record(self) -> dict:
        """The configuration as plain values, as checkpoints store it (`jaxstream.config_record`)."""
        return dict(learner=self.name, max_landmarks=self.max_landmarks, n_components=self.n_components,
                    buffer_size=self.buffer_size, metric=metric_kind(self.metric), align=bool(self.align),
                    cache_distances=self.cache, embed_arrivals=bool(self.embed_arrivals),
                    weighted=bool(self.weighted))


def default_buffer_size(max_landmarks: int) -> int:
    """The default buffer: ``max(1024, 10 · max_landmarks)`` points.

    The buffer is a window: once it is full the oldest non-landmark point
    is evicted, so the graph (and ε, and which landmark is redundant) only
    sees the most recent points besides the landmarks. 10·n_L alone would
    be a 100-point window at the paper's n_L = 10; 1024 covers the paper's
    streams of about a thousand points whole. Pass ``buffer_size`` >= the
    stream's length for the paper's unbounded algorithm.
    """
    return max(1024, 10 * int(max_landmarks))


def make_config(max_landmarks, buffer_size=None, n_components=2, align=False, metric: Metric = None,
                cache_distances=None, embed_arrivals=False, weighted=False) -> Config:
    """A validated `Config` with its defaults resolved.

    None and ``"euclidean"`` give the same metric, and ``cache_distances``
    is stored as its effective value, so that equivalent arguments give
    equal configurations (and share compiled code).

    Raises:
      TypeError: a capacity that is not a Python int.
      ValueError: a capacity out of range, or an unknown metric.
    """
    n_L = check_capacity(max_landmarks, "max_landmarks", 1)
    N = check_capacity(default_buffer_size(n_L) if buffer_size is None else buffer_size, "buffer_size", n_L + 1)
    if N > MAX_BUFFER:
        raise ValueError(f"buffer_size={N} is too large (the graph pass is O(N^2) and degree sums are uint32)")
    k = check_capacity(n_components, "n_components", 1)
    _make_dist(metric)  # validates
    if metric is None:
        metric = "euclidean"
    cfg = Config(n_L, N, k, bool(align), cache_distances, metric, bool(embed_arrivals), bool(weighted))
    return cfg._replace(cache_distances=cfg.cache)


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
        at the edge of a region the stream is still filling are kept. It
        lowers σ on noisy manifolds but raises it on very uneven clusters (a
        small cluster looks like noise), so it is not the default
        (``benchmarks/README.md``, robust options).
      density_shift: float, c, a second option beyond the paper (0, the
        default, is off). In case 3, when the landmark just admitted (x or
        its neighbour) is kept, it is moved to the densest buffered point
        within r = c·ε of it (the point with the most buffered points within
        r; ties: the earliest arrival), unless that point is already a
        landmark. ε and the removed landmark are decided as without it.
        This pulls new landmarks from the thin edge of a noisy region toward
        its middle. The moved landmark covers what lies within ε of its new
        place, so a buffered point that only the unmoved one covered can be
        left uncovered until a later arrival covers it. Cost: at each swap that keeps the new landmark, a count
        of the buffered points within r of each candidate (the points within
        r of the new landmark), O(|candidates|·N) in chunks of 32 rows.
        A plain array like `min_support`: any value of either runs the same
        compiled `update`. Timings and quality figures:
        ``benchmarks/README.md`` (robust options).
    """

    eps0: Array
    distances: Array
    min_support: Array
    density_shift: Array


def check_distance_matrix(D: np.ndarray) -> None:
    """Host-side check of a precomputed (n, n) distance matrix.

    Raises:
      ValueError: not square and non-empty, non-finite, negative, not exactly
        symmetric, or a non-zero diagonal.
    """
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


def default_params(eps0: float = 0.0, distances=None, min_support: int = 0,
                   density_shift: float = 0.0) -> Params:
    """Default numeric parameters.

    Args:
      eps0: initial ε (0: the first points are isolated).
      distances: (n, n) matrix for ``metric="precomputed"``; None otherwise.
      min_support: see `Params` (0: the paper's admission rule).
      density_shift: see `Params` (0: off).

    Raises:
      ValueError: min_support < 0, density_shift outside [0, 1], or a bad
        distance matrix (`check_distance_matrix`).
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
            check_distance_matrix(D)
        D = jnp.asarray(D)
    return Params(jnp.asarray(eps0, D.dtype), D, jnp.asarray(min_support, jnp.int32),
                  jnp.asarray(density_shift, D.dtype))


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
      embedding: `Embedding` kept up to date by `update` when the learner
        tracks it (``align`` or ``embed_arrivals``; zeros otherwise).
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
