"""Differentiable refinement of a polygonal line (research extension)."""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .. import geometry

Array = jax.Array


class RefineResult(NamedTuple):
    """Output of `refine`.

    Attributes:
      vertices: (V, d) refined vertices (off the lattice).
      objective: (steps,) smoothed objective before each step.
    """

    vertices: Array
    objective: Array


def refine(points, vertices, n_vertices, *, optimizer=None, steps: int = 200, temperature=1e-3,
           length_weight=0.0, mask=None) -> RefineResult:
    """Move the vertices of a line by gradient descent on a smooth loss.

    Minimises ``mean_x softmin_j Δ_j(x) + length_weight·ℓ(f)`` over the active
    vertices (the soft-min of `geometry.soft_polyline_sq_dist`, within
    τ·log(#segments) of the exact loss) with any optax optimiser; the number
    of vertices is kept. Typical use: polish a curve learned by `slpc`, or
    differentiate a curve-dependent objective. Everything is jit-able and
    vmappable.

    Args:
      points: (n, d) points.
      vertices: (V, d) initial vertices, e.g. ``state.vertices``.
      n_vertices: number of active vertices.
      optimizer: an ``optax.GradientTransformation`` (default Adam, 1e-2).
      steps: number of optimisation steps (static).
      temperature: soft-min temperature τ.
      length_weight: weight of the length penalty.
      mask: optional (n,) bool of valid points.

    Returns:
      `RefineResult`.
    """
    import optax

    opt = optax.adam(1e-2) if optimizer is None else optimizer
    points = jnp.asarray(points)
    vertices = jnp.asarray(vertices, points.dtype)
    w = jnp.ones(points.shape[0], points.dtype) if mask is None else jnp.asarray(mask, points.dtype)

    def objective(v):
        soft = geometry.soft_polyline_sq_dist(points, v, n_vertices, temperature)
        return jnp.sum(w * soft) / jnp.maximum(jnp.sum(w), 1.0) + length_weight * geometry.polyline_length(v, n_vertices)

    active = (jnp.arange(vertices.shape[0]) < n_vertices)[:, None]

    def step(carry, _):
        v, opt_state = carry
        val, g = jax.value_and_grad(objective)(v)
        updates, opt_state = opt.update(jnp.where(active, g, 0.0), opt_state, v)
        return (optax.apply_updates(v, updates), opt_state), val

    (v, _), vals = lax.scan(step, (vertices, opt.init(vertices)), None, length=steps)
    return RefineResult(v, vals)
