"""How well a polygonal line summarises a curve: fidelity, coverage, length ratio.

A principal curve is judged by its shape as much as by its loss: a line
that folds through a dense band, spikes to outliers or detours to lone
points can predict the next point well and still misdraw the data. Against
a reference curve C (a true curve, or one a person would accept):

* **fidelity** of a line V: the RMS distance to C of points spread evenly by
  arc length along V (folds, spikes and detours raise it);
* **coverage**: the RMS distance to V of points spread evenly along C (a
  part of C that V misses raises it);
* **length ratio**: length(V) / length(C).

Distances are exact point-to-polyline distances; the points sit at the
midpoints of ``n_points`` equal pieces of arc length (the midpoint rule for
the RMS integral). Every function is pure JAX on masked polylines
(`jaxstream.geometry`), so it jits and vmaps over a batch of learned lines.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import geometry

Array = jax.Array

__all__ = ["ShapeMeasures", "arclength_points", "fidelity", "coverage", "shape_measures", "far_length"]


class ShapeMeasures(NamedTuple):
    """Shape of a line V against a reference curve C (see the module docstring).

    Attributes:
      fidelity: RMS distance from V (spread by arc length) to C.
      coverage: RMS distance from C (spread by arc length) to V.
      length_ratio: length(V) / length(C).
      length: length(V).
      n_segments: V's number of segments.
    """

    fidelity: Array
    coverage: Array
    length_ratio: Array
    length: Array
    n_segments: Array


def _count(vertices, n_vertices):
    return jnp.asarray(vertices.shape[-2] if n_vertices is None else n_vertices, jnp.int32)


def arclength_points(vertices: Array, n_vertices=None, n_points: int = 512) -> Array:
    """Points spread evenly by arc length along a masked polyline.

    Args:
      vertices: (V, d) vertices; rows >= n_vertices are ignored.
      n_vertices: active vertices (>= 1; None: all V).
      n_points: static number of points.

    Returns:
      (n_points, d): the points at arc lengths (i + ½)·ℓ/n_points, i < n_points
      (all at vertex 0 for a line of length 0).
    """
    nv = _count(vertices, n_vertices)
    V = vertices.shape[0]
    seg_len = geometry.safe_norm(vertices[1:] - vertices[:-1], axis=-1)
    seg_len = jnp.where(jnp.arange(V - 1) < nv - 1, seg_len, 0.0)
    cum = jnp.cumsum(seg_len)
    total = cum[-1] if V > 1 else jnp.zeros((), vertices.dtype)
    s = (jnp.arange(n_points, dtype=vertices.dtype) + 0.5) / n_points * total
    if V == 1:
        return jnp.broadcast_to(vertices[0], (n_points, vertices.shape[1]))
    # the segment holding s: the first whose cumulative end reaches it (active segments only)
    seg = jnp.clip(jnp.searchsorted(cum, s, side="left"), 0, jnp.maximum(nv - 2, 0))
    start = cum[seg] - seg_len[seg]
    frac = jnp.where(seg_len[seg] > 0, (s - start) / jnp.where(seg_len[seg] > 0, seg_len[seg], 1.0), 0.0)
    frac = jnp.clip(frac, 0.0, 1.0)
    a, b = vertices[seg], vertices[jnp.minimum(seg + 1, V - 1)]
    return a + frac[:, None] * (b - a)


def _rms_to(points, vertices, n_vertices):
    nv = _count(vertices, n_vertices)
    if vertices.shape[0] == 1:
        d2 = jnp.sum((points - vertices[0]) ** 2, -1)
    else:
        d2 = geometry.polyline_sq_dist(points, vertices, jnp.maximum(nv, 2))
    return jnp.sqrt(jnp.mean(d2))


def fidelity(curve: Array, n_curve, reference: Array, n_reference=None, *, n_points: int = 512) -> Array:
    """RMS distance to the reference of points spread evenly along the curve.

    Args:
      curve: (V, d) the line judged; n_curve its active vertices (None: all).
      reference: (M, d) the reference polyline (a smooth curve: densely
        sampled); n_reference its active vertices (None: all).
      n_points: static number of points along the curve.

    Returns:
      () the fidelity, in the data's units.
    """
    return _rms_to(arclength_points(curve, n_curve, n_points), reference, n_reference)


def coverage(curve: Array, n_curve, reference: Array, n_reference=None, *, n_points: int = 512) -> Array:
    """RMS distance to the curve of points spread evenly along the reference (arguments as `fidelity`)."""
    return _rms_to(arclength_points(reference, n_reference, n_points), curve, n_curve)


def shape_measures(curve: Array, n_curve, reference: Array, n_reference=None, *,
                   n_points: int = 512) -> ShapeMeasures:
    """`fidelity`, `coverage` and the length ratio of a line against a reference.

    Args:
      curve: (V, d) the line judged; n_curve its active vertices (None: all).
      reference: (M, d) the reference polyline; n_reference its active
        vertices (None: all).
      n_points: static number of points spread along each.

    Returns:
      `ShapeMeasures`.
    """
    nc = _count(curve, n_curve)
    length = geometry.polyline_length(curve, nc)
    ref_len = geometry.polyline_length(reference, _count(reference, n_reference))
    return ShapeMeasures(fidelity(curve, n_curve, reference, n_reference, n_points=n_points),
                         coverage(curve, n_curve, reference, n_reference, n_points=n_points),
                         length / ref_len, length, nc - 1)


def far_length(curve: Array, n_curve, points: Array, radius, *, n_points: int = 2048, mask=None) -> Array:
    """Length of the curve farther than ``radius`` from every point: detours to lone points.

    The curve is cut into ``n_points`` equal pieces of arc length; a piece
    counts when its midpoint is farther than ``radius`` from every (unmasked)
    point.

    Args:
      curve: (V, d) the line; n_curve its active vertices (None: all).
      points: (n, d) the data.
      radius: distance beyond which curve is "far" (data units).
      n_points: static number of pieces.
      mask: optional (n,) bool, the points to use.

    Returns:
      () the far length, in the data's units.
    """
    nc = _count(curve, n_curve)
    length = geometry.polyline_length(curve, nc)
    mid = arclength_points(curve, n_curve, n_points)
    d2 = jnp.sum((mid[:, None] - points[None]) ** 2, -1)
    if mask is not None:
        d2 = jnp.where(mask[None], d2, jnp.inf)
    far = jnp.min(d2, 1) > radius ** 2
    return jnp.sum(far) * length / n_points
