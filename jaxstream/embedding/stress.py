"""Quality of an embedding: normalised stress over all pairs or landmark pairs."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .distances import _euclid_sq

Array = jax.Array

__all__ = ["normalized_stress", "landmark_stress"]


@jax.jit
def normalized_stress(dist, Y) -> Array:
    """Normalised stress σ = sqrt(Σ_{i<j} (d_ij − ||y_i − y_j||)² / Σ_{i<j} d_ij²).

    Args:
      dist: (n, n) symmetric original distances.
      Y: (n, k) embedding.

    Returns:
      scalar σ.
    """
    dist = jnp.asarray(dist)
    dy = jnp.sqrt(jnp.maximum(_euclid_sq(Y, Y), 0.0))
    iu = jnp.triu(jnp.ones(dist.shape, bool), 1)
    num = jnp.sum(jnp.where(iu, (dist - dy) ** 2, 0.0))
    den = jnp.sum(jnp.where(iu, dist ** 2, 0.0))
    return jnp.sqrt(num / den)


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
