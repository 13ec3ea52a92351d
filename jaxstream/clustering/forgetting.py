"""PACBO's forgetting: drop a cluster's old points when its points move in time, and the trail it left.

A reservoir keeps a uniform sample of the whole past, which is what the
paper's guarantee is about and what a stationary stream wants; but when
groups move, a group's old points stay where it was and the quasi-posterior
keeps centres on its trail. A window forgets every group that stops
sending. This module forgets per cluster, and only on evidence:

* `drift_statistics`: after each round, every cluster's trend test (a
  least-squares line of its points' positions on their arrival times,
  against the χ²_d quantile of `jaxstream._stats.chi2_upper`) and the trails that moving
  clusters left;
* `forget_moved`: a moving cluster keeps only its m newest points, and
  trails go (``tracking=False``);
* `track_moved`: a moving cluster keeps its points and moves them with it,
  at a velocity read from them, through turns too (the learner's default).

A group that simply stops sending is remembered; ``drift_level = 0`` never
forgets (the plain reservoir, bit for bit). Once a cluster forgets, the
paper's regret bound holds only for each remembered stretch.

How it works, in detail (the test, trails, tracking, what the guarantee
becomes): the documentation's "How PACBO works" page
(docs/internals/pacbo.md), sections "Forgetting" and "Tracking"; the
"module docstring" that docstrings here cite means those sections.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import _ops
from .._stats import chi2_upper
from .lloyd import nearest_center

Array = jax.Array

__all__ = ["drift_statistics", "forget_moved", "track_moved"]

_SETTLE = 4      # rounds left out of the trend (drift_statistics)
_LINE_CAP = 4.0  # the most a line's own uncertainty adds to a trail's tolerance, in noise variances
_HINGES = (12, 24, 48)  # tracking's hinge candidates, in a cluster's newest settled rows (_hinge)
_YOUNG = 16     # a centre born over points no older than this many rounds starts standing (track_moved)
_REACH = 16.0    # a moving cluster's line is trusted back to where its variance, σ²·dt²/S_tt, reaches 16 σ²


class _Line(NamedTuple):
    n: Array       # (p,) points
    t_bar: Array   # (p,) mean time
    y_bar: Array   # (p, d) mean position
    s_tt: Array    # (p,) Σ(t − t̄)², floored at tiny
    s_ty: Array    # (p, d) Σ(t − t̄)(y − ȳ)
    explained: Array  # (p,) ||s_ty||²/s_tt
    resid: Array   # (p,) residual variance per coordinate, d·(n − 2) degrees of freedom


def _line(seg: Array, t: Array, y: Array, p: int) -> _Line:
    """Least-squares line y ≈ ȳ + β·(t − t̄) through each cluster's points.

    seg: (H,) int32 each row's cluster in [0, p], p for rows left out; t (H,), y (H, d). Segment sums
    over H rows (not (p, H) masks): the cost does not grow with the number of centre slots.
    """
    d = y.shape[1]
    ssum = lambda v: jax.ops.segment_sum(v, seg, num_segments=p + 1)
    n = ssum(jnp.ones_like(t))
    n1 = jnp.maximum(n, 1.0)
    t_bar, y_bar = ssum(t) / n1, ssum(y) / n1[:, None]
    tc, yc = t - t_bar[seg], y - y_bar[seg]
    tiny = jnp.finfo(y.dtype).tiny
    s_tt = jnp.maximum(ssum(tc * tc), tiny)
    s_ty = ssum(tc[:, None] * yc)
    s_yy = ssum(_ops.coord_sum(yc * yc))
    explained = _ops.coord_sum(s_ty * s_ty) / s_tt
    resid = jnp.maximum(s_yy - explained, 0.0) / (d * jnp.maximum(n - 2.0, 1.0))
    return _Line(*(v[:p] for v in (n, t_bar, y_bar, s_tt, s_ty, explained, resid)))


class DriftTest(NamedTuple):
    """What `drift_statistics` measures.

    Attributes:
      stat: (p,) trend statistic z_j (0 where a cluster has fewer than 2m points or is inactive).
      trail: (p,) bool, the cluster has stopped receiving points and lies
        where a moving cluster (one whose z exceeds the threshold) was when
        the cluster's points arrived (module docstring).
      old: (H,) bool, the row is older than its cluster's m newest.
      assign: (H,) int32 each row's cluster slot.
      trail_row: (H,) bool, the row lies in another cluster where a moving
        cluster's line puts the group at the row's arrival time, and arrived
        before that cluster's m newest (module docstring).
      stale: (p,) bool, the cluster has received no point for 4 of its mean gaps.
    """

    stat: Array
    trail: Array
    old: Array
    assign: Array
    trail_row: Array
    stale: Array


def _ranked(cl: Array, index: Array, p: int):
    """Rows ordered by (cluster, arrival), one sort of H keys (a top_k or a sort per cluster row of
    (p, H) costs more than the MCMC on XLA:CPU); rows of cluster p (left out) go last.

    Returns ``(order (H,), cl_s (H,), idx_s (H,), from_newest (H,), count (p + 1,))``: the sorting
    permutation, the sorted clusters and arrival indices, each sorted row's rank from its cluster's
    newest (0: the newest), and each cluster's number of rows.
    """
    order = jnp.lexsort((index, cl))
    cl_s, idx_s = cl[order], index[order]
    count = jnp.zeros((p + 1,), jnp.int32).at[cl].add(1)
    from_newest = jnp.cumsum(count)[cl_s] - 1 - jnp.arange(cl.shape[0])
    return order, cl_s, idx_s, from_newest, count


# Wide signature: the history's arrays and the round's partition, as PACBO's state holds them.
def drift_statistics(history: Array, mask: Array, index: Array, centers: Array, n_clusters, recent: int,
                     noise_var, threshold, trail_quantile, continuity: float = 1.3) -> DriftTest:
    """Per-cluster tests of movement: a linear trend of position in arrival time, and trails.

    Args:
      history: (H, d) stored points.
      mask: (H,) bool, which rows hold remembered points.
      index: (H,) int32 arrival index of each row (larger is newer).
      centers: (p, d) centre slots, the first `n_clusters` active.
      n_clusters: () int32.
      recent: m, a firing cluster keeps its m newest points (static, ≤ H).
      noise_var: () σ̂², the round's within-cluster variance per coordinate.
      threshold: () the trend statistic above which a cluster moves.
      trail_quantile: () how far (in standard errors, squared) a stale
        cluster's mean may lie from a moving cluster's line extrapolated back
        to the stale cluster's mean arrival time.
      continuity: a cluster's trend counts only when its line's residual
        variance is at most this multiple of σ̂².

    Returns:
      A `DriftTest`.
    """
    p, d = centers.shape
    dtype = history.dtype
    active = jnp.arange(p) < n_clusters
    _, assign = nearest_center(history, centers, active)
    H = history.shape[0]
    cl = jnp.where(mask, assign, p)
    order, cl_s, idx_s, from_newest, _ = _ranked(cl, index, p)
    old_row = jnp.zeros((H,), bool).at[order].set((cl_s < p) & (from_newest >= recent))
    first_recent = jax.ops.segment_min(jnp.where(from_newest < recent, idx_s, jnp.iinfo(jnp.int32).max), cl_s,
                                       num_segments=p + 1)[:p]                       # oldest of the m newest
    # Times and positions centred on the history's (exact in float32 up to 2^24 rounds apart).
    now = jnp.max(jnp.where(mask, index, 0))
    n_all = jnp.maximum(jnp.sum(mask), 1).astype(dtype)
    t = (index - now).astype(dtype)
    t = jnp.where(mask, t - jnp.sum(jnp.where(mask, t, 0.0)) / n_all, 0.0)
    y = history - jnp.sum(jnp.where(mask[:, None], history, 0.0), axis=0) / n_all
    y = jnp.where(mask[:, None], y, 0.0)
    full = _line(cl, t, y, p)
    # The trend is measured without the last `_SETTLE` rounds' points: a new group's first points
    # land in a neighbour's cluster until the chain gives them a centre, a step in time that is
    # not a movement.
    settled = _line(jnp.where(index <= now - _SETTLE, cl, p), t, y, p)
    tiny = jnp.finfo(dtype).tiny
    # A movement is a line that leaves no more than `continuity`·σ̂² of residual variance: a group
    # whose first points landed in a neighbour's cluster makes a step in time, which leaves more.
    linear = settled.resid <= continuity * noise_var
    stat = jnp.where(active & linear & (settled.n >= 2 * recent),
                     settled.explained / jnp.maximum(settled.resid, tiny), 0.0)
    # Stale: no point for 4 of the cluster's mean gaps between stored arrivals.
    n, n1 = full.n, jnp.maximum(full.n, 1.0)
    newest = jnp.where(n > 0, jax.ops.segment_max(index, cl, num_segments=p + 1)[:p], 0)
    oldest = jnp.where(n > 0, jax.ops.segment_min(index, cl, num_segments=p + 1)[:p], 0)
    gap = (newest - oldest).astype(dtype) / jnp.maximum(n - 1.0, 1.0)
    stale = active & (n > 0) & ((now - newest).astype(dtype) > 4.0 * gap + 1.0)
    # Steady: no gap between consecutive arrivals longer than (2 + log n) mean gaps (about the
    # longest of n exponential gaps). A stale cluster that a new group's points revive is two
    # blobs in time, which one line fits exactly: not a movement.
    same = (cl_s[1:] == cl_s[:-1]) & (cl_s[1:] < p)
    steps = jnp.where(same, idx_s[1:] - idx_s[:-1], 0)
    longest = jax.ops.segment_max(steps, cl_s[1:], num_segments=p + 1)[:p]
    steady = jnp.maximum(longest, 0).astype(dtype) <= (2.0 + jnp.log(n1)) * gap + 1.0
    stat = jnp.where(steady, stat, 0.0)
    moving = active & ~stale & (stat > threshold)
    trail, beta = _trail_clusters(full, moving, stale, noise_var, trail_quantile)
    # Points a moving group left behind in another cluster (a lagging centre that still gets a tail
    # point now and then is never stale): a row that arrived before moving cluster j's m newest and
    # lies where j's line puts the group at the row's arrival time.
    dtr = t[:, None] - full.t_bar[None, :]                                             # (H, p)
    e2 = _ops.coord_sum((y[:, None, :] - full.y_bar[None] - dtr[..., None] * beta[None]) ** 2)
    v2 = noise_var * (1.0 + 1.0 / n1[None, :] + jnp.minimum(dtr ** 2 / full.s_tt[None, :], _LINE_CAP))
    behind = (moving[None, :] & (cl[:, None] != jnp.arange(p)[None, :]) & (index[:, None] < first_recent[None, :])
              & (dtr ** 2 / full.s_tt[None, :] <= _REACH))
    trail_row = mask & jnp.any(behind & (e2 <= trail_quantile * v2), axis=1)
    return DriftTest(stat, trail, old_row, assign, trail_row, stale)


def _trail_clusters(full: _Line, moving: Array, stale: Array, noise_var, trail_quantile) -> tuple[Array, Array]:
    """(p,) bool: the stale clusters on a moving cluster's path, and (p, d) the clusters' slopes.

    Where each moving cluster j was at stale cluster i's mean arrival time (its line), against
    where i is: within `trail_quantile` standard errors, i is j's trail.
    """
    n1 = jnp.maximum(full.n, 1.0)
    beta = full.s_ty / full.s_tt[:, None]                                              # (p, d)
    dt = full.t_bar[:, None] - full.t_bar[None, :]                                     # (i, j)
    back = full.y_bar[None, :, :] + dt[..., None] * beta[None, :, :]                   # (i, j, d)
    err2 = _ops.coord_sum((back - full.y_bar[:, None, :]) ** 2)
    # The line's own uncertainty at i's time counts up to _LINE_CAP noise variances: a line extrapolated
    # far back from a few points would otherwise reach every stale cluster.
    se2 = noise_var * (1.0 / n1[:, None] + 1.0 / n1[None, :] + jnp.minimum(dt ** 2 / full.s_tt[None, :], _LINE_CAP))
    # Nor is a line extrapolated to where its own variance exceeds `_REACH` σ² evidence of where the group
    # was: a few rounds of a new group's points, a chance trend, would point anywhere 100 rounds back.
    near = dt ** 2 / full.s_tt[None, :] <= _REACH
    on_path = (err2 <= trail_quantile * se2) & moving[None, :] & near
    return stale & (full.n >= 2) & jnp.any(on_path, axis=1), beta


def _run_test(history, mask, index, centers, n_clusters, level, recent, noise_var):
    """`drift_statistics` at level `level`: ``(test, fired (p,), threshold, trail_q)``."""
    d = history.shape[1]
    threshold = chi2_upper(d, level).astype(history.dtype)
    trail_q = chi2_upper(d, 1e-3).astype(history.dtype)
    test = drift_statistics(history, mask, index, centers, n_clusters, recent, noise_var, threshold, trail_q)
    return test, test.stat > threshold, threshold, trail_q


def forget_moved(history: Array, mask: Array, index: Array, centers: Array, n_clusters, level,
                 recent: int, noise_var) -> tuple[Array, Array]:
    """Forget the old points of every cluster whose points moved in time, and trails (module docstring).

    Args:
      history, mask, index, centers, n_clusters, recent, noise_var: as in `drift_statistics`.
      level: `Params.drift_level`, the test's level per cluster and round (0: never).

    Returns:
      ``(new_mask (H,) bool, fired (p,) bool)``.
    """
    test, fired, _, _ = _run_test(history, mask, index, centers, n_clusters, level, recent, noise_var)
    # A moving cluster keeps its m newest points; the trail a moving group left behind goes.
    drop = (fired[test.assign] & test.old) | test.trail[test.assign] | test.trail_row
    return mask & ~drop, fired | test.trail


class _Hinge(NamedTuple):
    slope: Array  # (p, d) position per round after the hinge
    stat: Array   # (p,) explained over residual variance per coordinate
    tau: Array    # (p,) rounds back to the hinge (inf: a straight line)
    reach: Array  # (H,) bool, the row's clipped time is within the line's reach


def _hinge(history: Array, mask: Array, index: Array, assign: Array, p: int) -> _Hinge:
    """Per cluster, the best of the lines of position on min(time, cut), cut the arrival of the cluster's
    q-th newest settled row, q in `_HINGES` (and a straight line), by explained variance.

    After a turn the error the points carry is flat for points older than the turn and grows with
    age after it (a hockey stick): a straight line reads its slope late and moves the old points by
    slope·age; the hinge reads it from the newest points (`track_moved` drops the points older than
    τ, the rounds back to the cut). A cut at q
    counts only where the cluster has 2q settled rows: on a group of 20 points the best of four
    lines is a false alarm's slope, inflated.
    """
    dtype = history.dtype
    now = jnp.max(jnp.where(mask, index, 0))
    cl = jnp.where(mask & (index <= now - _SETTLE), assign, p)
    _, cl_s, idx_s, from_newest, count = _ranked(cl, index, p)
    t = (index - now).astype(dtype)
    none = jnp.iinfo(jnp.int32).min
    best, best_e = None, None
    for q in (None,) + _HINGES:
        if q is None:
            cut = jnp.full((p,), -jnp.inf, dtype)
        else:
            at_q = jax.ops.segment_max(jnp.where(from_newest == q - 1, idx_s, none), cl_s, num_segments=p + 1)[:p]
            cut = jnp.where((at_q > none) & (count[:p] >= 2 * q), (at_q - now).astype(dtype), -jnp.inf)
        u = jnp.maximum(t, cut[assign])
        ln = _line(cl, u, history, p)
        # explained / max(resid, tiny), with a derivative that stays finite where resid is 0 (a cluster of
        # ≤ 2 rows): there the reverse pass would multiply a zero cotangent by 1/tiny² = inf.
        tiny = jnp.finfo(dtype).tiny
        fit = ln.resid > tiny
        stat = jnp.where(fit, ln.explained / jnp.where(fit, ln.resid, 1.0), ln.explained / tiny)
        hinge = _Hinge(ln.s_ty / ln.s_tt[:, None], stat, -cut, (u - ln.t_bar[assign]) ** 2 / ln.s_tt[assign] <= _REACH)
        if best is None:
            best, best_e = hinge, ln.explained
            continue
        better = ln.explained > best_e
        best_e = jnp.where(better, ln.explained, best_e)
        best = _Hinge(jnp.where(better[:, None], hinge.slope, best.slope), jnp.where(better, hinge.stat, best.stat),
                      jnp.where(better, hinge.tau, best.tau), jnp.where(better[assign], hinge.reach, best.reach))
    return best


# Wide signature: the history's arrays and the round's partition, as PACBO's state holds them.
def track_moved(history: Array, velocity: Array, mask: Array, index: Array, centers: Array, n_clusters, level,
                recent: int, noise_var, born=None) -> tuple[Array, Array, Array, Array]:
    """Move the points of every cluster whose points moved in time along with it (module docstring, "Tracking").

    Args:
      history, mask, index, centers, n_clusters, recent, noise_var: as in
        `drift_statistics` (positions as tracked so far; the newest row is
        the round's point, with zero velocity).
      velocity: (H, d) each row's velocity per round.
      level: `Params.drift_level` (0: never fires; the positions then move
        only by velocities already there, none on a stream that never fired).
      born: None, or (p,) bool, the centres this round's partition added:
        their points start standing (velocity 0). A new group's first points
        land in a neighbour's cluster and take its velocity; without this a
        false alarm's velocity passes from group to group (the ten-group
        ramp, where it made standing groups look like a moving one's trail).

    Returns:
      ``(new_mask (H,) bool, new_history (H, d), new_velocity (H, d), fired (p,) bool)``:
      positions at the next round, and the velocities that take them there.
    """
    p, d = centers.shape
    dtype = history.dtype
    test, fired, threshold, trail_q = _run_test(history, mask, index, centers, n_clusters, level, recent,
                                                noise_var)
    a = test.assign
    hinge = _hinge(history, mask, index, a, p)
    # The slope a firing measures is the remaining velocity, shrunk by (1 − threshold/z)₊: a false
    # alarm (z just above the threshold) moves a standing group by little, a real movement keeps
    # firing until its points stand still relative to each other.
    # (1 − q/z)₊ written so that its derivative is finite (0) where z ≤ q, also where z = 0.
    above = hinge.stat > threshold
    step = hinge.slope * jnp.where(above, 1.0 - threshold / jnp.where(above, hinge.stat, 1.0), 0.0)[:, None]
    now = jnp.max(jnp.where(mask, index, 0))
    age = (now - index).astype(dtype)
    moving_row = mask & fired[a]
    # After a turn (a hinged line won) the points older than the hinge go, as `forget_moved` forgets a
    # moving cluster's old points: moved by slope·τ they would stand where the new velocity, read
    # from the points after the turn, puts them, which is least certain for them (a turn's k̂ and loss:
    # benchmarks/README.md, "Tracking through turns").
    fix = moving_row & hinge.reach & (age <= hinge.tau[a])
    history = jnp.where(fix[:, None], history + step[a] * age[:, None], history)
    velocity = jnp.where(fix[:, None], velocity + step[a], velocity)
    # Beyond the line's reach a correction would be a guess; the trail a moving group left goes.
    new_mask = mask & ~((moving_row & ~fix) | test.trail[a] | test.trail_row)
    # A cluster's points share its velocity (the mean of its older rows'; the round's point brings 0):
    # a point that changes cluster changes velocity, and no cluster smears into points that move apart.
    older = new_mask & (index < now)
    cl = jnp.where(older, a, p)
    n_old = jax.ops.segment_sum(older.astype(dtype), cl, num_segments=p + 1)[:p]
    v_bar = jax.ops.segment_sum(velocity, cl, num_segments=p + 1)[:p] / jnp.maximum(n_old, 1.0)[:, None]
    kept = jnp.where(new_mask, a, p)
    newest = jax.ops.segment_max(jnp.where(new_mask, index, jnp.iinfo(jnp.int32).min), kept, num_segments=p + 1)[:p]
    oldest = jax.ops.segment_min(jnp.where(new_mask, index, jnp.iinfo(jnp.int32).max), kept, num_segments=p + 1)[:p]
    if born is not None:
        # A new centre whose points all arrived in the last `_YOUNG` rounds is a new group: the velocity
        # its first points took from the cluster they landed in is not its own. (A centre born over
        # older points is a moving group re-split, which keeps its velocity.)
        v_bar = jnp.where((born & (now - oldest <= _YOUNG))[:, None], 0.0, v_bar)
    # Lost: a cluster that stopped receiving points while its points moved (the points a group left
    # behind when it turned, moved on with the old velocity): had it kept its velocity the group would
    # now be |v|·(rounds since its last point) away, and the velocity moved its own points by |v|·(their
    # span), both beyond the trail tolerance (a false alarm's velocity on a 20-point group does not).
    v2 = _ops.coord_sum(v_bar * v_bar)
    since, span = (now - newest).astype(dtype), (newest - oldest).astype(dtype)
    lost = test.stale & (v2 * jnp.minimum(since, span) ** 2 > trail_q * noise_var)
    new_mask = new_mask & ~lost[a]
    velocity = jnp.where(new_mask[:, None], v_bar[a], 0.0)
    # One round on: a cluster that stopped receiving points stops moving (a group that stops sending
    # is not assumed to keep going).
    advance = new_mask & ~test.stale[a]
    history = jnp.where(advance[:, None], history + velocity, history)
    return new_mask, history, velocity, fired | test.trail | lost
