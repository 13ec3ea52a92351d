"""Slow, obviously correct NumPy references shared by several test files."""
import numpy as np


def np_polyline_sqdist(points, verts):
    """Squared distance from each point to a polyline: an explicit loop over
    segments, each clamped projection written out (NumPy, float64)."""
    points = np.asarray(points, np.float64)
    verts = np.asarray(verts, np.float64)
    best = np.full(len(points), np.inf)
    for a, b in zip(verts[:-1], verts[1:]):
        ab = b - a
        den = ab @ ab
        t = np.zeros(len(points)) if den == 0 else np.clip((points - a) @ ab / den, 0.0, 1.0)
        best = np.minimum(best, (((a + t[:, None] * ab) - points) ** 2).sum(1))
    return best


def np_segment_table(points, verts):
    """(n, K) squared distance of every point to every segment, by a loop."""
    return np.stack([np_polyline_sqdist(points, verts[k:k + 2]) for k in range(len(verts) - 1)], 1)

