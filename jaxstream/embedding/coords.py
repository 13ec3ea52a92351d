"""Coordinates from a learner state: the landmark MDS of its landmarks and the out-of-sample map.

`fresh_embedding` computes the landmark MDS of the current landmarks
(weighted by `landmark_weights` when the configuration asks for it);
`procrustes` aligns a new embedding to the previous one on the landmarks
they share, so that a tracked embedding does not flip; `embed_points` maps
points through an `Embedding`. All are traceable and read the state only.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import _ops
from .._linalg import polar
from .._ops import first_argmin
from .distances import _Dist
from .lmds import lmds_fit
from .types import Config, Embedding, State

Array = jax.Array

__all__ = ["landmark_slots", "landmark_weights", "fresh_embedding", "procrustes", "embed_points",
           "empty_embedding"]


def empty_embedding(n_L: int, k: int, dtype) -> Embedding:
    """An `Embedding` of no landmark: (n_L,) slots 0, ids -1, mask False; zero arrays of (n_L, k) and (k,)."""
    return Embedding(jnp.zeros((n_L,), jnp.int32), jnp.full((n_L,), -1, jnp.int32), jnp.zeros((n_L,), bool),
                     jnp.zeros((n_L, k), dtype), jnp.zeros((n_L, k), dtype), jnp.zeros((k,), dtype),
                     jnp.zeros((k,), dtype), jnp.zeros((), jnp.int32))


def landmark_slots(state: State) -> tuple[Array, Array]:
    """``(slots, mask)``: (n_L,) landmark buffer slots by position (0 where empty) and which are used."""
    mask = state.landmark_slots >= 0
    return jnp.where(mask, state.landmark_slots, 0), mask


def landmark_weights(state: State, dist: _Dist) -> Array:
    """How many buffered points each landmark stands for: (n_L,) int32, by landmark position.

    A buffered point counts for its nearest landmark (ties: the first
    position), except that every landmark counts itself, so a landmark that
    coincides with another keeps weight >= 1; empty positions get 0. Reads
    the state's distance cache when it has one, else O(n_L·N) distances.
    """
    slots, mask = landmark_slots(state)
    if state.dist.shape[0] > 0:
        DL = state.dist[slots]
    else:
        DL = dist.dist(state.params, state.points[slots], state.points)
    n_L, N = slots.shape[0], state.points.shape[0]
    DL = jnp.where(mask[:, None] & state.valid[None, :], DL, jnp.inf)
    own = first_argmin(DL, axis=0)
    # a landmark's own slot is its own (a tie at distance 0 with a coincident landmark would give it to the
    # first position, leaving the other copy with weight 0: dropped from the weighted MDS)
    own = own.at[jnp.where(mask, slots, N)].set(jnp.arange(n_L, dtype=own.dtype), mode="drop")
    hit = (own[None, :] == jnp.arange(n_L, dtype=own.dtype)[:, None]) & state.valid[None, :]
    return jnp.where(mask, jnp.sum(hit, axis=1, dtype=jnp.int32), 0)


def fresh_embedding(state: State, config: Config) -> Embedding:
    """Landmark MDS of the current landmarks (no alignment).

    Weighted by `landmark_weights` when ``config.weighted`` (see `lmds_fit`).
    One (n_L, n_L) eigendecomposition; squared landmark distances from the
    cache when ``config.cache``.
    """
    slots, mask = landmark_slots(state)
    if config.cache:
        sq = state.dist[slots][:, slots] ** 2
    else:
        P = state.points[slots]
        sq = config.dist.sqdist(state.params, P, P)
    weights = landmark_weights(state, config.dist) if config.weighted else None
    m = lmds_fit(sq, config.n_components, mask, weights=weights)
    ids = jnp.where(mask, state.arrival[slots], -1)
    return Embedding(slots, ids, mask, m.coords, m.weights, m.offset, m.eigvals, m.n_positive)


def procrustes(new: Embedding, ref: Embedding) -> Embedding:
    """Align `new` to `ref` on the landmarks they share (rotation/reflection + translation).

    Translation is included because the landmark MDS is centred on the
    landmarks' centroid, which moves when a landmark is swapped. With fewer
    than k + 1 shared landmarks the rotation is not determined and only the
    translation is applied (none without shared landmarks). The out-of-sample
    map (`weights` (n_L, k), `offset` (k,)) is transformed with the
    coordinates.
    """
    k = new.coords.shape[1]
    match = (new.ids[:, None] == ref.ids[None, :]) & new.mask[:, None] & ref.mask[None, :]
    has = jnp.any(match, axis=1)
    P = ref.coords[first_argmin(~match, axis=1)]
    w = has.astype(new.coords.dtype)
    n = jnp.sum(w)
    safe_n = jnp.maximum(n, 1.0)
    cY = _ops.matmul(w, new.coords) / safe_n
    cP = _ops.matmul(w, P) / safe_n
    M = _ops.matmul(((new.coords - cY) * w[:, None]).T, P - cP)
    R = jnp.where(n >= k + 1, polar(M), jnp.eye(k, dtype=M.dtype))
    shift = jnp.where(n >= 1, cP - _ops.matmul(cY, R), jnp.zeros_like(cP))
    coords = jnp.where(new.mask[:, None], _ops.matmul(new.coords, R) + shift, 0.0)
    return new._replace(coords=coords, weights=_ops.matmul(new.weights, R), offset=_ops.matmul(new.offset, R) + shift)


def embed_points(state: State, emb: Embedding, x, config: Config) -> Array:
    """Coordinates of x (p,) or (m, p) under `emb`: (k,) or (m, k)."""
    single = x.ndim == 1
    X = x[None] if single else x
    sq = config.dist.sqdist(state.params, X, state.points[emb.slots])
    y = _ops.matmul(jnp.where(emb.mask, sq, 0.0), emb.weights) + emb.offset
    return y[0] if single else y
