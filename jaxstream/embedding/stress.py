"""Quality of an embedding: normalised stress over all pairs or landmark pairs."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import _ops
from ..geometry import safe_sqrt

Array = jax.Array

__all__ = ["normalized_stress", "landmark_stress"]


@jax.jit
def normalized_stress(dist, Y) -> Array:
    """Normalised stress σ = sqrt(Σ_{i<j} (d_ij − ||y_i − y_j||)² / Σ_{i<j} d_ij²).

    Differentiable in `dist` and `Y` (forward and reverse, any order where σ
    is smooth): embedded distances are taken from coordinate differences
    (exactly 0 for equal points) with a square root whose derivative at 0 is
    the subgradient 0, so the zero diagonal and coincident points give finite
    derivatives; so does σ = 0 (a perfect embedding, the minimum).

    Args:
      dist: (n, n) symmetric original distances.
      Y: (n, k) embedding.

    Returns:
      scalar σ.
    """
    dist = jnp.asarray(dist)
    Y = jnp.asarray(Y)
    dy = safe_sqrt(_ops.sq_dist(Y, Y))
    iu = jnp.triu(jnp.ones(dist.shape, bool), 1)
    num = jnp.sum(jnp.where(iu, (dist - dy) ** 2, 0.0))
    den = jnp.sum(jnp.where(iu, dist ** 2, 0.0))
    return safe_sqrt(num / den)


@jax.jit
def landmark_stress(dist, Y, landmark_idx) -> Array:
    """σ_L: the normalised stress over landmark pairs only.

    Args:
      dist: (n, n) distances between all points.
      Y: (n, k) embedding of all points.
      landmark_idx: (n_L,) integer indices of the landmarks.
    """
    idx = jnp.asarray(landmark_idx)
    return normalized_stress(jnp.asarray(dist)[idx][:, idx], jnp.asarray(Y)[idx])
