"""Curves sampled i.i.d. along them: the slpc paper's cubic (and its Table 2 curve in R^6), a helix,
and the squared distance of points to a curve."""
from __future__ import annotations

import numpy as np

from ._random import _rng

__all__ = ["cubic_curve", "make_cubic_stream", "true_curve_sqdist", "curve_sqdist", "table2_curve",
           "make_table2_stream", "helix_curve", "make_helix_stream"]


def cubic_curve(x) -> np.ndarray:
    """The slpc paper's generating curve y = 0.05·(x − 5)³."""
    return 0.05 * (np.asarray(x) - 5.0) ** 3


def make_cubic_stream(n: int = 500, noise: float = 0.094, seed=0, *, return_truth: bool = False):
    """The slpc paper's synthetic stream.

    x ~ U[0, 10] in arrival order, y = 0.05·(x − 5)³ + N(0, noise²). With the
    default noise the squared distance of 500 points to the true curve sums
    to about 2.48, the paper's ground-truth loss.

    Args:
      n: number of points.
      noise: standard deviation of the Gaussian noise on y.
      seed: int or `numpy.random.Generator`.
      return_truth: also return the squared distance of each point to the
        true curve (computed on a fine polyline of the curve).

    Returns:
      (n, 2) float64 array, or ``(points, truth_sqdist)``.
    """
    rng = _rng(seed)
    x = rng.uniform(0.0, 10.0, n)
    y = cubic_curve(x) + noise * rng.standard_normal(n)
    pts = np.stack([x, y], axis=1)
    if not return_truth:
        return pts
    return pts, true_curve_sqdist(pts)


def true_curve_sqdist(points: np.ndarray, n_grid: int = 20001) -> np.ndarray:
    """Squared distance of points to the cubic curve on [0, 10] (fine polyline)."""
    gx = np.linspace(0.0, 10.0, n_grid)
    curve = np.stack([gx, cubic_curve(gx)], axis=1)
    a, b = curve[:-1], curve[1:]
    out = np.empty(len(points))
    ab = b - a
    denom = (ab * ab).sum(1)
    for i, p in enumerate(points):
        # Only segments near p in x matter; restrict for speed.
        lo = max(int((p[0] - 2.0) / 10.0 * (n_grid - 1)), 0)
        hi = min(int((p[0] + 2.0) / 10.0 * (n_grid - 1)) + 1, n_grid - 1)
        aa, bb, dd = a[lo:hi], ab[lo:hi], denom[lo:hi]
        t = np.clip(((p - aa) * bb).sum(1) / dd, 0.0, 1.0)
        out[i] = (((aa + t[:, None] * bb) - p) ** 2).sum(1).min()
    return out


def curve_sqdist(points: np.ndarray, curve: np.ndarray, chunk: int = 64) -> np.ndarray:
    """Squared distance of points (n, d) to a finely sampled curve (m, d) seen as a polyline."""
    points = np.asarray(points, np.float64)
    a, b = curve[:-1], curve[1:]
    ab = b - a
    denom = np.maximum((ab * ab).sum(1), 1e-300)
    out = np.empty(len(points))
    for i in range(0, len(points), chunk):
        p = points[i:i + chunk, None, :]
        t = np.clip(((p - a) * ab).sum(-1) / denom, 0.0, 1.0)
        out[i:i + chunk] = (((a + t[..., None] * ab) - p) ** 2).sum(-1).min(1)
    return out


def table2_curve(t) -> np.ndarray:
    """The slpc paper's Table 2 curve in R^6: (0.5t·cos t, 0.5t·sin t, 0.5t, −t, t, 2·ln(t+1))."""
    t = np.asarray(t, np.float64)
    return np.stack([0.5 * t * np.cos(t), 0.5 * t * np.sin(t), 0.5 * t, -t, t, 2 * np.log(t + 1)], -1)


def make_table2_stream(n: int = 200, noise: float = 0.0575, seed=0, *, return_truth: bool = False):
    """The slpc paper's second synthetic stream (Table 2), 6-D.

    n/2 equidistant values of t in [0, 2π], each used twice (the paper: 100
    values for 200 points), in random arrival order, Gaussian noise of sd
    `noise` on every coordinate (the default makes the ground truth, the
    squared distance of 200 points to the true curve, about 3.29).

    Returns:
      (n, 6) float64 array, or ``(points, truth_sqdist)``.
    """
    rng = _rng(seed)
    t = np.repeat(np.linspace(0.0, 2 * np.pi, (n + 1) // 2), 2)[:n]
    t = t[rng.permutation(n)]
    pts = table2_curve(t) + noise * rng.standard_normal((n, 6))
    if not return_truth:
        return pts
    return pts, curve_sqdist(pts, table2_curve(np.linspace(0.0, 2 * np.pi, 20001)))


def helix_curve(t, radius: float = 1.0, rise: float = 0.3) -> np.ndarray:
    """Helix (radius·cos t, radius·sin t, rise·t) in R^3."""
    t = np.asarray(t, np.float64)
    return np.stack([radius * np.cos(t), radius * np.sin(t), rise * t], -1)


def make_helix_stream(n: int = 400, turns: float = 1.5, noise: float = 0.05, seed=0, *,
                      return_truth: bool = False):
    """A noisy 3-D helix: t ~ U[0, 2π·turns] in arrival order, radius 1, rise
    0.3 per radian, Gaussian noise of sd `noise` on every coordinate.

    Returns:
      (n, 3) float64 array, or ``(points, truth_sqdist)``.
    """
    rng = _rng(seed)
    t = rng.uniform(0.0, 2 * np.pi * turns, n)
    pts = helix_curve(t) + noise * rng.standard_normal((n, 3))
    if not return_truth:
        return pts
    return pts, curve_sqdist(pts, helix_curve(np.linspace(0.0, 2 * np.pi * turns, 20001)))
