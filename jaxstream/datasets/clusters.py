"""Gaussian groups: the PACBO slides' four groups, the same groups drifting, the ten-group ramp, and
ten groups that appear one by one among the older ones.

The streams with ``return_truth=True`` give ``(points, labels, means_t)``, means_t (n, k, d) every
group's mean at each round.
"""
from __future__ import annotations

import numpy as np

from ._random import _rng

__all__ = ["PACBO_MEANS", "make_four_groups_stream", "make_drifting_clusters_stream", "make_ramp_clusters_stream",
           "make_growing_groups_stream"]

PACBO_MEANS = np.array([[0.0, 0.0], [-4.0, -1.0], [0.0, 7.0], [5.0, 2.0]])
"""The PACBO slides' four group means (0,0), (−4,−1), (0,7), (5,2)."""


def _cluster_stream(rng, labels, means_t, sd, return_truth):
    n = len(labels)
    pts = means_t[np.arange(n), labels] + sd * rng.standard_normal((n, means_t.shape[-1]))
    return (pts, labels, means_t) if return_truth else pts


def _balanced_labels(rng, n: int, k: int) -> np.ndarray:
    """Labels 0..k−1, ⌈n/k⌉ or ⌊n/k⌋ of each (the first n mod k groups get one more), in random order."""
    return (np.arange(n) % k)[rng.permutation(n)]


def make_four_groups_stream(n: int = 200, seed=0, *, balanced: bool = True, return_truth: bool = False):
    """The PACBO slides' first stream: four unit-variance Gaussian groups in 2-D.

    Means (0,0), (−4,−1), (0,7), (5,2) (`PACBO_MEANS`), identity covariance.
    With ``balanced=True`` exactly n/4 points come from each group (when 4
    divides n; otherwise the first n mod 4 groups get one more) in a random
    order; with ``balanced=False`` each label is drawn i.i.d. uniformly (the
    command line's default cluster data, same draws).

    Args:
      n: number of points.
      seed: int or `numpy.random.Generator`.
      balanced: equal group sizes instead of i.i.d. labels.
      return_truth: also return the labels and the means.

    Returns:
      (n, 2) float64 array, or ``(points, labels, means_t)`` with labels
      (n,) int and means_t (n, 4, 2) the group means at each round (constant
      here; the same layout as the drifting streams').
    """
    rng = _rng(seed)
    labels = _balanced_labels(rng, n, 4) if balanced else rng.integers(0, 4, n)
    means_t = np.broadcast_to(PACBO_MEANS, (n, 4, 2))
    return _cluster_stream(rng, labels, means_t, 1.0, return_truth)


def make_drifting_clusters_stream(n: int = 400, means=None, shift=(20.0, 0.0), seed=0, *, sd: float = 1.0,
                                  return_truth: bool = False):
    """Gaussian groups whose means all move linearly while the stream is observed.

    At round t (0-based, τ = t/(n − 1)) group j has mean means[j] + τ·shift;
    the labels are balanced (n/k per group) in random order, and the point of
    round t is drawn from its group's mean of round t with covariance sd²·I.
    With the defaults the four PACBO groups (9 wide in x) travel 20 to the
    right, so a summary that weighs all past points equally smears each
    group along its path.

    Args:
      n: number of points.
      means: (k, d) initial means; None for `PACBO_MEANS`.
      shift: (d,) total displacement of every mean over the stream (a number:
        the same along every axis), or (k, d) one per group (zero rows: groups
        that stand still).
      seed: int or `numpy.random.Generator`.
      sd: per-coordinate standard deviation within a group.
      return_truth: also return the labels and the moving means.

    Returns:
      (n, d) float64 array, or ``(points, labels, means_t)`` with labels
      (n,) int and means_t (n, k, d) every group's mean at round t
      (``means_t[np.arange(n), labels]`` is each point's generating centre).
    """
    rng = _rng(seed)
    means = PACBO_MEANS if means is None else np.asarray(means, np.float64)
    shift = np.asarray(shift, np.float64)
    if shift.ndim == 0:  # one number: the same displacement along every axis
        shift = np.full(means.shape[1:], float(shift))
    if shift.ndim > 2 or shift.shape[-1:] != means.shape[1:] or (shift.ndim == 2 and len(shift) != len(means)):
        raise ValueError(f"shift must have shape (d,) or (k, d) = {means.shape}; got {shift.shape}")
    tau = np.arange(n) / max(n - 1, 1)
    means_t = means[None] + tau[:, None, None] * np.broadcast_to(shift, means.shape)[None]
    labels = _balanced_labels(rng, n, len(means))
    return _cluster_stream(rng, labels, means_t, sd, return_truth)


def make_ramp_clusters_stream(n: int = 200, n_groups: int = 10, block: int = 20, radius: float = 10.0, seed=0, *,
                              sd: float = 1.0, return_truth: bool = False):
    """The PACBO slides' "ramp": a new group every `block` points.

    Group j (0-based) has mean radius·(cos 2πj/k, sin 2πj/k), k = `n_groups`
    (neighbours 2·radius·sin(π/k) apart: 6.2 with the defaults). Rounds
    j·block … (j+1)·block − 1 all come from group j, the newest one, so the
    number of groups seen grows by one per block until k; rounds after
    k·block draw their group uniformly among the k.

    Args:
      n: number of points.
      n_groups: k, the number of groups.
      block: points per group before the next one appears.
      radius: radius of the circle of the means.
      seed: int or `numpy.random.Generator`.
      sd: per-coordinate standard deviation within a group.
      return_truth: also return the labels and the means.

    Returns:
      (n, 2) float64 array, or ``(points, labels, means_t)`` with labels
      (n,) int (``labels[:t+1].max() + 1`` groups seen by round t) and
      means_t (n, k, 2) the means (constant; groups not yet seen included).
    """
    rng = _rng(seed)
    ang = 2 * np.pi * np.arange(n_groups) / n_groups
    means = radius * np.stack([np.cos(ang), np.sin(ang)], axis=1)
    t = np.arange(n)
    labels = np.minimum(t // block, n_groups - 1)
    late = t >= n_groups * block
    labels[late] = rng.integers(0, n_groups, int(late.sum()))
    return _cluster_stream(rng, labels, np.broadcast_to(means, (n, n_groups, 2)), sd, return_truth)


def _separated_means(rng, k: int, box: float, min_sep: float, tries: int = 100_000, restarts: int = 20) -> np.ndarray:
    """k means uniform on [−box, box]², drawn one by one, each kept if it is ≥ min_sep from those kept.

    Greedy placement can leave no room for the next mean: after `tries` rejections in a row it
    starts again (the draws continue), and after `restarts` fresh starts it gives up.
    """
    if k * np.pi * (min_sep / 2) ** 2 > (2 * box + min_sep) ** 2:  # discs of radius min_sep/2 cannot fit
        restarts = 0
    for _ in range(restarts):
        means, misses = [], 0
        while len(means) < k and misses < tries:
            m = rng.uniform(-box, box, 2)
            if all(np.linalg.norm(m - q) >= min_sep for q in means):
                means.append(m)
                misses = 0
            else:
                misses += 1
        if len(means) == k:
            return np.array(means)
    raise ValueError(f"could not place {k} means {min_sep} apart in [-{box}, {box}]²: "
                     f"lower n_groups or min_sep, or widen box")


def make_growing_groups_stream(n: int = 200, n_groups: int = 10, block: int = 20, seed=0, *, box: float = 10.0,
                               min_sep: float = 6.0, return_truth: bool = False):
    """Ten groups in 2-D, one more every `block` points, the older ones still producing points.

    Group means are uniform on [−box, box]², at least `min_sep` apart; identity covariance. In
    rounds j·block … (j+1)·block − 1 groups 0 … j exist (j < `n_groups`); a point comes from the
    newest group with probability 1/2, otherwise from one of the groups present chosen uniformly,
    so a new group gets about half of its first block and the number of groups present,
    ``min(t // block + 1, n_groups)`` at round t, climbs a staircase.

    Args:
      n: number of points.
      n_groups: the number of groups at the end.
      block: points between one group's appearance and the next.
      seed: int or `numpy.random.Generator`.
      box: half-width of the square the means are drawn in.
      min_sep: least distance between two means.
      return_truth: also return the labels and the means.

    Returns:
      (n, 2) float64 array, or ``(points, labels, means_t)`` with labels (n,) int and means_t
      (n, n_groups, 2) the means (constant; groups not yet present included).

    Raises:
      ValueError: n < 0, n_groups or block < 1, box ≤ 0 or min_sep < 0; or `n_groups` means
        `min_sep` apart could not be placed in the box.
    """
    if not (n >= 0 and n_groups >= 1 and block >= 1 and box > 0 and min_sep >= 0):
        raise ValueError(f"need n >= 0, n_groups >= 1, block >= 1, box > 0 and min_sep >= 0; got n={n}, "
                         f"n_groups={n_groups}, block={block}, box={box}, min_sep={min_sep}")
    rng = _rng(seed)
    means = _separated_means(rng, n_groups, box, min_sep)
    present = np.minimum(np.arange(n) // block + 1, n_groups)
    labels = np.where(rng.random(n) < 0.5, present - 1, (rng.random(n) * present).astype(int))
    return _cluster_stream(rng, labels, np.broadcast_to(means, (n, n_groups, 2)), 1.0, return_truth)
