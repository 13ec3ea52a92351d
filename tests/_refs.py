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



def np_projection(points, verts):
    """Each point's nearest segment (the first on ties) and clamped position on it, by a loop."""
    points = np.asarray(points, np.float64)
    verts = np.asarray(verts, np.float64)
    best, seg, pos = np.full(len(points), np.inf), np.zeros(len(points), int), np.zeros(len(points))
    for k, (a, b) in enumerate(zip(verts[:-1], verts[1:])):
        ab = b - a
        den = ab @ ab
        t = np.zeros(len(points)) if den == 0 else np.clip((points - a) @ ab / den, 0.0, 1.0)
        d2 = (((a + t[:, None] * ab) - points) ** 2).sum(1)
        better = d2 < best
        best, seg, pos = np.where(better, d2, best), np.where(better, k, seg), np.where(better, t, pos)
    return seg, pos


def np_knot_median(values, weight, candidates, knots=16):
    """The weighted median read off sorted candidates at knots, by a loop: the weight of the values
    at or below `knots` finite candidates evenly spaced in rank (rank round(j·(n − 1)/(knots − 1)),
    n the finite candidates), interpolated linearly between the two consecutive knots that
    straddle half the total weight (the first knot when it already reaches it); inf when no knot
    reaches half or every weight is 0."""
    values, weight = np.asarray(values, np.float64), np.asarray(weight, np.float64)
    c = np.sort(np.asarray(candidates, np.float64))
    n = int(np.isfinite(c).sum())
    J = min(knots, len(c))
    knot_vals = [c[int(np.round(j * max(n - 1, 0) / max(J - 1, 1)))] for j in range(J)]
    half = 0.5 * weight.sum()
    prev_v, prev_m = None, 0.0
    for j, v in enumerate(knot_vals):
        m = weight[values <= v].sum()
        if m >= half * (1 - 1e-6) and half > 0:
            if not np.isfinite(v):
                return float("inf")
            if j == 0:
                return float(v)
            frac = min(max((half - prev_m) / (m - prev_m), 0.0), 1.0) if m > prev_m else 0.0
            return float(prev_v + frac * (v - prev_v))
        prev_v, prev_m = v, m
    return float("inf")


def np_arc_weighted_median(values, points, w, verts, candidates=None):
    """The median of `values` with each point weighted by its share of the line's length
    (w·ℓ_k / Σ w over the points inside segment k; 0 past the line's ends), read off the sorted
    `candidates` (default: the values) as `np_knot_median` does (NumPy loop)."""
    seg, pos = np_projection(points, verts)
    K = len(verts) - 1
    lengths = np.linalg.norm(np.diff(np.asarray(verts, np.float64), axis=0), axis=1)
    past = ((seg == 0) & (pos <= 0)) | ((seg == K - 1) & (pos >= 1))
    along = np.where(past, 0.0, w)
    total = np.zeros(K)
    for k, a in zip(seg, along):
        total[k] += a
    weight = np.array([a * lengths[k] / total[k] if total[k] > 0 else 0.0 for k, a in zip(seg, along)])
    return np_knot_median(values, weight, values if candidates is None else candidates)


def backend_compiles(fn):
    """The number of XLA programs compiled while ``fn()`` runs (its result blocked on), counted
    with `jax.monitoring`'s backend-compile events."""
    import jax
    count = [0]

    def listener(name, _duration, **_kw):
        if name == "/jax/core/compile/backend_compile_duration":
            count[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        jax.block_until_ready(fn())
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    return count[0]
