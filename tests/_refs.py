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


def sk_clone(est):
    """scikit-learn's ``clone`` contract without scikit-learn: a new, unfitted
    estimator of the same class built from ``get_params()`` (values deep-copied),
    whose constructor must store every parameter unchanged."""
    import copy
    params = est.get_params()
    new = type(est)(**{k: copy.deepcopy(v) for k, v in params.items()})
    for k, v in new.get_params().items():
        assert k in params, f"get_params of the clone returned an unknown parameter {k!r}"
        same = v is params[k] or (isinstance(v, np.ndarray) and np.array_equal(v, params[k])) or v == params[k] \
            or (isinstance(v, float) and np.isnan(v) and np.isnan(params[k]))
        assert same, f"the constructor changed parameter {k!r}: {params[k]!r} -> {v!r}"
    return new
