"""PACBO's readout of a state: the loss, labels and soft assignments of points, cluster sizes.

Re-exported by `jaxstream.clustering.pacbo`.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .lloyd import center_mask, nearest_center, sq_distances
from .types import HISTORY_POLICIES, State

Array = jax.Array


def effective_count(state: State, history_policy: str = "reservoir") -> tuple[Array, Array]:
    """(n, weight): the number of points S stands for, and the multiplier of the buffer's sum."""
    dtype = state.centers.dtype
    if history_policy == "reservoir":
        n = state.n_remembered
        return n, n.astype(dtype) / jnp.maximum(state.n_stored, 1).astype(dtype)
    if history_policy == "window":
        return state.n_stored, jnp.ones((), dtype)
    raise ValueError(f"history_policy must be one of {HISTORY_POLICIES}; got {history_policy!r}")


def _flat(state: State, x):
    x = jnp.asarray(x, state.centers.dtype)
    return x, x.reshape(-1, x.shape[-1])


def _active(state: State) -> Array:
    return center_mask(state.n_clusters, state.centers.shape[0])


def _provisional_sq_distances(state: State, flat: Array) -> Array:
    """(N, A) squared distances of the points to the provisional centres (+inf: not provisional)."""
    d2 = sq_distances(flat, state.recent)
    return jnp.where(state.provisional[None, :], d2, jnp.inf)


def _nearest(state: State, flat: Array):
    """(partition loss (N,), its nearest slot (N,), provisional loss (N,): +inf without any)."""
    l, a = nearest_center(flat, state.centers, _active(state))
    if state.recent.shape[0] == 0:
        # provisional_size=0: a constant, not a minimum over an empty axis (whose
        # forward-mode derivative is 0/0 = NaN, and 0·NaN in min(l, lp)'s derivative)
        return l, a, jnp.full(l.shape, jnp.inf, l.dtype)
    lp = jnp.min(_provisional_sq_distances(state, flat), axis=1)
    return l, a, lp


def loss(state: State, x: Array) -> Array:
    """The prediction's loss: min over active and provisional centres of ||x − c||², for x (..., d).

    Without provisional centres (``state.provisional`` all False, always with
    ``provisional_level=0``) this is ℓ(ĉ, x) = min_j ||x − c_j||² of the partition.
    """
    x, flat = _flat(state, x)
    l, _, lp = _nearest(state, flat)
    return jnp.minimum(l, lp).reshape(x.shape[:-1])


def predict(state: State, x: Array) -> Array:
    """Stable label (`State.ids` of the nearest active centre, int32) of x of shape (..., d).

    The partition's labels: provisional centres (`loss`) are not clusters and get none.
    """
    x, flat = _flat(state, x)
    _, a = nearest_center(flat, state.centers, _active(state))
    return state.ids[a].reshape(x.shape[:-1])


def soft_loss(state: State, x: Array, temperature) -> Array:
    """−T·logsumexp(−||x − c||²/T) over active and provisional centres: a smooth `loss` (→ loss as T → 0)."""
    x, flat = _flat(state, x)
    d2 = jnp.concatenate([sq_distances(flat, state.centers), sq_distances(flat, state.recent)], axis=1)
    mask = jnp.concatenate([_active(state), state.provisional])
    s = jax.nn.logsumexp(jnp.where(mask[None, :], -d2 / temperature, -jnp.inf), axis=1)
    return (-temperature * s).reshape(x.shape[:-1])


def _within_variance(state: State) -> Array:
    """Per-coordinate within-cluster variance of the stored points under ĉ."""
    pm = state.history_mask
    l, _ = nearest_center(state.history, state.centers, _active(state))
    d = state.centers.shape[1]
    return jnp.sum(jnp.where(pm, l, 0.0)) / (d * jnp.maximum(state.n_stored - state.n_clusters, 1))


def soft_assign(state: State, x: Array, temperature=None) -> Array:
    """Soft assignments: (..., p) probabilities ∝ exp(−||x − c_j||²/T) over active slots.

    Args:
      state: `State`.
      x: (..., d).
      temperature: T; None uses 2σ̂², σ̂² the within-cluster variance per
        coordinate of the stored points (Gaussian clusters' responsibilities).

    Returns:
      (..., p) rows summing to 1 (zeros on inactive slots; slot j has label ``state.ids[j]``).
    """
    x, flat = _flat(state, x)
    T = 2.0 * _within_variance(state) if temperature is None else temperature
    T = jnp.maximum(T, jnp.finfo(flat.dtype).tiny)
    d2 = sq_distances(flat, state.centers)
    pr = jax.nn.softmax(jnp.where(_active(state)[None, :], -d2 / T, -jnp.inf), axis=1)
    return pr.reshape(x.shape[:-1] + (state.centers.shape[0],))


def cluster_sizes(state: State, history_policy: str = "reservoir") -> Array:
    """(p,) estimated number of points of each active slot (stored points × n_seen/n_stored for a reservoir)."""
    pm = state.history_mask
    _, a = nearest_center(state.history, state.centers, _active(state))
    counts = jnp.sum((a[None, :] == jnp.arange(state.centers.shape[0])[:, None]) & pm[None], axis=1)
    _, weight = effective_count(state, history_policy)
    return jnp.where(_active(state), counts * weight, 0.0)
