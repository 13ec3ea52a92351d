"""Baseline landmark choices for landmark MDS (paper §6) and a helper to embed with them.

Scenarios compared with the online learner (`jaxstream.landmark_mds`):

- initial: the first n_L points of the stream, never replaced;
- random: n_L points drawn uniformly without replacement from the whole data
  after the fact (not an online method);
- random-online: a uniform sample of the stream kept online by reservoir
  sampling (Vitter's algorithm R), O(n_L) memory;
- farthest-point: greedy max-min (farthest-point) sampling over the whole
  data, a batch method that spreads landmarks evenly.

All return integer indices into the data; `embed_with_landmarks` runs
landmark MDS with them, and `random_stress` gives the stress of many random
sets, the yardstick for any other choice.
"""
from __future__ import annotations

import functools

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from .._checks import check_capacity
from .distances import Metric, _make_dist, pairwise_distances
from .lmds import check_eigen, lmds_fit, lmds_transform
from .stress import normalized_stress

__all__ = ["initial_landmarks", "random_landmarks", "reservoir_landmarks", "farthest_point_landmarks",
           "embed_with_landmarks", "random_stress"]


def _check_n(n_points: int, n_landmarks: int) -> tuple[int, int]:
    n = check_capacity(n_points, "n_points", 1)
    m = check_capacity(n_landmarks, "n_landmarks", 1)
    if m > n:
        raise ValueError(f"n_landmarks={m} exceeds n_points={n}")
    return n, m


def initial_landmarks(n_points: int, n_landmarks: int) -> np.ndarray:
    """The first `n_landmarks` points: indices 0..n_landmarks-1."""
    _, m = _check_n(n_points, n_landmarks)
    return np.arange(m)


def random_landmarks(key, n_points: int, n_landmarks: int) -> jax.Array:
    """`n_landmarks` distinct indices drawn uniformly from range(n_points), sorted."""
    n, m = _check_n(n_points, n_landmarks)
    return jnp.sort(jax.random.choice(key, n, (m,), replace=False))


def reservoir_landmarks(key, n_points: int, n_landmarks: int) -> jax.Array:
    """Uniform sample of a stream of `n_points` items kept online (algorithm R).

    The first n_L items fill the reservoir; item t >= n_L replaces a uniformly
    chosen slot with probability n_L / (t + 1). Every n_L-subset is equally
    likely at the end. Round t uses ``fold_in(key, t)``.

    Returns:
      (n_landmarks,) int32 indices in reservoir order.
    """
    n, m = _check_n(n_points, n_landmarks)

    def step(res, t):
        j = jax.random.randint(jax.random.fold_in(key, t), (), 0, t + 1)
        return jnp.where(j < m, res.at[jnp.minimum(j, m - 1)].set(t), res), None

    res0 = jnp.arange(m, dtype=jnp.int32)
    res, _ = lax.scan(step, res0, jnp.arange(m, n, dtype=jnp.int32))
    return res


def farthest_point_landmarks(n_landmarks: int, points=None, *, distances=None, metric: Metric = None,
                             first: int = 0) -> jax.Array:
    """Greedy farthest-point (max-min) landmarks.

    Starting from `first`, repeatedly add the point farthest from the chosen
    ones (ties: the lowest index).

    Args:
      n_landmarks: how many.
      points: (n, p) points (with `metric`), or None when `distances` is given.
      distances: (n, n) distance matrix.
      metric: as in `jaxstream.embedding.pairwise_distances`.
      first: index of the first landmark.

    Returns:
      (n_landmarks,) int32 indices in the order chosen.
    """
    if (points is None) == (distances is None):
        raise ValueError("give exactly one of points or distances")
    data = jnp.asarray(distances if distances is not None else points)
    n, m = _check_n(data.shape[0], n_landmarks)
    if not 0 <= first < n:
        raise ValueError(f"first={first} is not in [0, {n})")
    dist = None if distances is not None else _make_dist(metric)
    return _farthest(data, jnp.int32(first), m, dist)


@functools.partial(jax.jit, static_argnums=(2, 3))
def _farthest(data, first, m, dist):
    if dist is None:
        row = lambda i: data[i]
    else:
        row = lambda i: dist.dist(None, data[i][None], data)[0]

    def body(k, carry):
        idx, mind = carry
        nxt = jnp.argmax(mind).astype(jnp.int32)
        return idx.at[k].set(nxt), jnp.minimum(mind, row(nxt))

    idx0 = jnp.zeros((m,), jnp.int32).at[0].set(first)
    idx, _ = lax.fori_loop(1, m, body, (idx0, row(first)))
    return idx


def embed_with_landmarks(landmark_idx, n_components: int = 2, points=None, *, distances=None,
                         metric: Metric = None) -> jax.Array:
    """Landmark MDS of all points with the given landmarks.

    Args:
      landmark_idx: (n_L,) indices of the landmarks.
      n_components: k.
      points: (n, p) points (with `metric`), or None when `distances` is given.
      distances: (n, n) distance matrix.

    Returns:
      (n, k) embedding.

    Raises:
      ValueError: if fewer than k eigenvalues are positive.
    """
    if (points is None) == (distances is None):
        raise ValueError("give exactly one of points or distances")
    idx = jnp.asarray(landmark_idx)
    if distances is not None:
        sq_x = jnp.asarray(distances)[:, idx] ** 2
    else:
        X = jnp.asarray(points)
        sq_x = pairwise_distances(X, X[idx], metric) ** 2
    model, Y = _embed(sq_x, idx, n_components)
    check_eigen(model.n_positive, n_components)
    return Y


@functools.partial(jax.jit, static_argnums=2)
def _embed(sq_x, idx, k):
    model = lmds_fit(sq_x[idx], k)
    return model, lmds_transform(model, sq_x)


def random_stress(key, distances, n_landmarks: int, n_draws: int = 50, n_components: int = 2) -> jax.Array:
    """Normalised stress of the landmark MDS of all points with random landmark sets.

    Draw ``k`` uses `random_landmarks` with ``jax.random.split(key, n_draws)[k]``;
    its percentiles say where another landmark choice stands among random ones.

    Args:
      key: PRNG key.
      distances: (n, n) distance matrix.
      n_landmarks: n_L, landmarks per set.
      n_draws: how many random sets.
      n_components: k, the embedding's dimension.

    Returns:
      (n_draws,) stress σ of each draw (NaN where fewer than k eigenvalues of
      the landmarks' MDS are positive).
    """
    D = jnp.asarray(distances)
    n, m = _check_n(D.shape[0], n_landmarks)
    draws = check_capacity(n_draws, "n_draws", 1)
    idx = jax.vmap(lambda k: random_landmarks(k, n, m))(jax.random.split(key, draws))
    return _random_stress(D, idx, check_capacity(n_components, "n_components", 1))


@functools.partial(jax.jit, static_argnums=2)
def _random_stress(D, idx, k):
    def one(i):
        model, Y = _embed(D[:, i] ** 2, i, k)
        return jnp.where(model.n_positive >= k, normalized_stress(D, Y), jnp.nan)

    return lax.map(one, idx)
