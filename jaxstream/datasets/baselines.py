"""Reference predictors for the moving streams: the nearest past point, and the PACBO "last points"
oracle that knows the labels."""
from __future__ import annotations

import numpy as np

__all__ = ["nearest_past_point_loss", "last_points_oracle_loss"]


def nearest_past_point_loss(xs, t0: int = 20, *, max_block_elems: int = 2 ** 22) -> np.ndarray:
    """Per-round loss of predicting each point by its nearest past point.

    For every round t ≥ t0 (0-based), min over s < t of ‖x_t − x_s‖². This is
    what a summary that memorises the stream would pay; on a dense ordered
    trace it is small (about the squared gap between consecutive points plus
    twice the noise variance), which is why a learner's prequential loss
    should be read against it and against the noise energy.

    Rows are processed in blocks of at most `max_block_elems` distances, so
    memory stays bounded for streams of 10⁴–10⁵ points (two blocks of
    32 MiB at the default: a peak of about 62 MiB for n = 10⁴, in 0.5 s);
    the time is O(n²·d).

    Args:
      xs: (n, d) points in arrival order.
      t0: first scored round (>= 1: round 0 has no past).
      max_block_elems: largest number of pairwise distances held at once.

    Returns:
      (n − t0,) float64 array; entry i is the loss of round t0 + i.
    """
    xs = np.asarray(xs, np.float64)
    if xs.ndim != 2:
        raise ValueError(f"xs must be (n, d), got shape {xs.shape}")
    n = len(xs)
    if not 1 <= t0 <= n:
        raise ValueError(f"need 1 <= t0 <= n = {n}, got t0={t0}")
    out = np.empty(n - t0)
    a = t0
    while a < n:
        rows = max(1, min(n - a, max_block_elems // max(n, 1)))
        b = a + rows
        d2 = np.zeros((rows, b))
        for k in range(xs.shape[1]):
            d2 += (xs[a:b, k, None] - xs[None, :b, k]) ** 2
        # Only strictly earlier points count: mask s >= t.
        d2[np.arange(b)[None, :] >= np.arange(a, b)[:, None]] = np.inf
        out[a - t0:b - t0] = d2.min(axis=1)
        a = b
    return out


def last_points_oracle_loss(xs, labels, window: int = 10, t0: int = 1, *, new_group: str = "nearest") -> np.ndarray:
    """Per-round loss of the PACBO "last points" oracle that knows the labels.

    Round t (0-based) is predicted by the mean of the last `window` points of
    x_t's own group seen before t (fewer if the group has fewer), and pays the
    squared distance ‖x_t − prediction‖². A moving group is tracked with a lag
    of about window/2 points, a fixed one with the error of a window-point
    mean.

    A group's first point has no past point of its own group. With
    ``new_group="nearest"`` it is predicted by the nearest of the other
    groups' predictions at that round (what a clusterer pays before it opens
    a cell for the new group); with ``new_group="nan"`` its loss is NaN, to
    be excluded. The stream's very first point has no prediction at all and
    is NaN either way (t0 >= 1 skips it).

    Args:
      xs: (n, d) points in arrival order.
      labels: (n,) integer group labels.
      window: number of a group's latest points averaged (>= 1).
      t0: first round returned (0 <= t0 <= n).
      new_group: "nearest" or "nan", the policy for a group's first point.

    Returns:
      (n − t0,) float64 array; entry i is the loss of round t0 + i.
    """
    xs = np.asarray(xs, np.float64)
    labels = np.asarray(labels)
    n = len(xs)
    if xs.ndim != 2 or labels.shape != (n,):
        raise ValueError(f"need xs (n, d) and labels (n,), got {xs.shape} and {labels.shape}")
    if window < 1 or not 0 <= t0 <= n:
        raise ValueError(f"need window >= 1 and 0 <= t0 <= n, got window={window}, t0={t0}")
    if new_group not in ("nearest", "nan"):
        raise ValueError(f"new_group must be 'nearest' or 'nan', got {new_group!r}")
    out = np.full(n, np.nan)
    members = {}
    for g in np.unique(labels):
        idx = np.flatnonzero(labels == g)
        pts = xs[idx]
        cs = np.concatenate([np.zeros((1, xs.shape[1])), np.cumsum(pts, axis=0)])
        j = np.arange(1, len(idx))
        lo = np.maximum(j - window, 0)
        pred = (cs[j] - cs[lo]) / (j - lo)[:, None]
        out[idx[1:]] = ((pts[1:] - pred) ** 2).sum(axis=1)
        members[g] = idx
    if new_group == "nearest":
        for g, idx in members.items():
            f = idx[0]
            preds = []
            for h, jdx in members.items():
                c = int(np.searchsorted(jdx, f))
                if h != g and c > 0:
                    preds.append(xs[jdx[max(c - window, 0):c]].mean(axis=0))
            if preds:
                out[f] = ((xs[f] - np.array(preds)) ** 2).sum(axis=1).min()
    return out[t0:]
