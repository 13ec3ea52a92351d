"""Distances for the embedding family: Euclidean, a user metric, or a precomputed matrix.

A metric is None / ``"euclidean"``, any jax-traceable symmetric
``metric(a, b) -> scalar`` on points of shape (p,), or ``"precomputed"``:
stream items are indices (shape (1,), see `index_stream`) into a distance
matrix that travels in the learner's params.
"""
from __future__ import annotations

import functools
from typing import Callable, NamedTuple, Union

import numpy as np
import jax
import jax.numpy as jnp

from .. import _ops
from ..geometry import safe_sqrt

Array = jax.Array
#: A metric: None or ``"euclidean"``, ``"precomputed"`` (points are row indices into a distance
#: matrix), or a function ``metric(a, b)`` of two (d,) points returning their distance.
Metric = Union[None, str, Callable[[Array, Array], Array]]

__all__ = ["Metric", "pairwise_distances", "index_stream", "metric_kind"]


class _Dist(NamedTuple):
    """Internal: ``dist(params, A, B)`` and ``sqdist(params, A, B)``, (m, p) x (n, p) -> (m, n)."""

    dist: Callable
    sqdist: Callable
    precomputed: bool
    callable_metric: bool


# Euclidean distances go through `_ops.sq_dist`, which on a CPU writes the coordinates out up to
# `_ops.UNROLL_PAIRS` (64): this family's data is often wider than the others' (tie-decay spectra have one
# coordinate per node). Why: docs/internals/landmarks.md, "Distances".
def _euclid_sq(A, B):
    """Pairwise squared Euclidean distances (m, p) x (n, p) -> (m, n) (`_ops.sq_dist`: on CPU written out,
    summed left to right, so an entry has the same value wherever it is computed: consistent ties at ε)."""
    return _ops.sq_dist(A, B)


def _make_dist(metric: Metric) -> _Dist:
    # One _Dist per metric, so that equal configurations compare equal and share
    # compiled code (see _kernels).
    if metric is None or (isinstance(metric, str) and metric == "euclidean"):
        return _dist_for("euclidean")
    if isinstance(metric, str) and metric == "precomputed":
        return _dist_for("precomputed")
    if callable(metric):
        return _dist_for(metric)
    raise ValueError(f"metric must be None, 'euclidean', 'precomputed' or a callable metric(a, b); got {metric!r}")


@functools.lru_cache(maxsize=128)
def _dist_for(metric) -> _Dist:
    if isinstance(metric, str) and metric == "euclidean":
        return _Dist(lambda p, A, B: safe_sqrt(_euclid_sq(A, B)), lambda p, A, B: _euclid_sq(A, B), False, False)
    if isinstance(metric, str) and metric == "precomputed":
        def dist(p, A, B):
            i = A[:, 0].astype(jnp.int32)
            j = B[:, 0].astype(jnp.int32)
            return p.distances[i[:, None], j[None, :]]
        return _Dist(dist, lambda p, A, B: dist(p, A, B) ** 2, True, False)
    if callable(metric):
        f = jax.vmap(jax.vmap(metric, in_axes=(None, 0)), in_axes=(0, None))
        return _Dist(lambda p, A, B: f(A, B), lambda p, A, B: f(A, B) ** 2, False, True)
    raise AssertionError(metric)


def pairwise_distances(A, B=None, metric: Metric = None) -> Array:
    """Distances between two sets of points.

    Args:
      A: (m, p) points.
      B: (n, p) points; None for ``B = A``.
      metric: None / ``"euclidean"`` or a jax-traceable ``metric(a, b) -> scalar``.

    Returns:
      (m, n) distance matrix.
    """
    if isinstance(metric, str) and metric == "precomputed":
        raise ValueError("pairwise_distances needs points; with precomputed distances index the matrix directly")
    A = jnp.asarray(A)
    B = A if B is None else jnp.asarray(B)
    return _pairwise_jit(A, B, _make_dist(metric))


@functools.partial(jax.jit, static_argnums=2)
def _pairwise_jit(A, B, dist):
    return dist.dist(None, A, B)


def index_stream(n: int, start: int = 0) -> np.ndarray:
    """Stream items for ``metric="precomputed"``: indices start..start+n-1 as an (n, 1) float array."""
    return np.arange(start, start + n, dtype=np.float64)[:, None]


def metric_kind(metric: Metric) -> str:
    """A plain-string name of a metric for configurations: "euclidean", "precomputed" or the
    callable's qualified name (``module.qualname``)."""
    if metric is None or (isinstance(metric, str) and metric == "euclidean"):
        return "euclidean"
    if isinstance(metric, str):
        return metric
    mod = getattr(metric, "__module__", None) or ""
    name = getattr(metric, "__qualname__", None) or type(metric).__qualname__
    return f"{mod}.{name}" if mod else name
