"""k-means baselines for online clustering.

- `online_kmeans(n_clusters)`: sequential (MacQueen) k-means with a fixed k,
  a `jaxstream.StreamLearner` usable with `run_stream` / `run_streams`.
- `gap_statistic(key, points, k_max)`: a batch choice of k by the Gap
  statistic (Tibshirani, Walther & Hastie 2001), with the uniform reference
  distribution on the bounding box of the data and B reference sets;
  k-means++ seeding with restarts plus masked Lloyd iterations
  (`jaxstream.clustering.lloyd.kmeans`), all vmapped.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax import lax

from .._checks import check_capacity, check_point, check_points
from .._core import StreamLearner
from .lloyd import center_mask, kmeans, nearest_center

Array = jax.Array

__all__ = ["Params", "State", "Info", "default_params", "init", "update", "predict", "loss",
           "online_kmeans", "kmeans_plus_plus", "within_ss", "fit_kmeans", "GapResult",
           "gap_statistic", "gap_select"]


# ----------------------------------------------------------------------------
# Sequential (MacQueen) k-means
# ----------------------------------------------------------------------------

class Params(NamedTuple):
    """Numeric hyper-parameters of online k-means.

    Attributes:
      step_exponent: the centre nearest to x moves by n_j^(−step_exponent)·(x − c_j),
        n_j its count after x. 1 (default, MacQueen) keeps every centre at the
        running mean of its points; values in (0.5, 1) forget the old past.
    """

    step_exponent: Array


def default_params(step_exponent: float = 1.0) -> Params:
    """Default params (MacQueen's running means)."""
    return Params(jnp.asarray(step_exponent, jnp.zeros(()).dtype))


class State(NamedTuple):
    """Online k-means state.

    Attributes:
      centers: (k, d) centres; a slot with count 0 is not seeded yet.
      counts: (k,) int32 number of points each centre has absorbed.
      params: `Params`.
    """

    centers: Array
    counts: Array
    params: Params


class Info(NamedTuple):
    """Per-round info.

    Attributes:
      loss: prequential loss min_j ||x − c_j||² over seeded centres before the
        update (||x||², the distance to the origin, while none is seeded).
      label: index of the centre that absorbed x.
    """

    loss: Array
    label: Array


def update(key, state: State, x: Array) -> tuple[State, Info]:
    """Learn one point: seed the first empty slot, else move the nearest centre.

    The key is unused (the method is deterministic); it is kept for the
    learner signature.
    """
    del key
    k, d = state.centers.shape
    check_point(x, d)
    x = jnp.asarray(x, state.centers.dtype)
    active = state.counts > 0
    d2, near = nearest_center(x[None], state.centers, active)
    seeded = jnp.any(active)
    pre_loss = jnp.where(seeded, d2[0], jnp.sum(x * x))
    j = jnp.where(jnp.all(active), near[0], jnp.argmin(active).astype(jnp.int32))
    cnt = state.counts[j] + 1
    step = cnt.astype(x.dtype) ** (-state.params.step_exponent)
    centers = state.centers.at[j].add(step * (x - state.centers[j]))
    return state._replace(centers=centers, counts=state.counts.at[j].set(cnt)), Info(pre_loss, j)


def init(key, x_init, params: Optional[Params] = None, *, n_clusters: int) -> State:
    """Empty centres, then the rows of ``x_init`` (n0 ≥ 0) learned in order.

    MacQueen's seeding: the first k points become the k centres.
    """
    k = check_capacity(n_clusters, "n_clusters")
    x_init = check_points(x_init, "x_init")
    n0, d = x_init.shape
    dtype = x_init.dtype
    params = default_params() if params is None else params
    params = Params(*(jnp.asarray(v, dtype) for v in params))
    state = State(jnp.zeros((k, d), dtype), jnp.zeros((k,), jnp.int32), params)
    if n0 == 0:
        return state
    state, _ = lax.scan(lambda s, x: (update(key, s, x)[0], None), state, x_init)
    return state


def predict(state: State, x: Array) -> Array:
    """Index of the nearest seeded centre for x of shape (..., d) (0 if none is seeded)."""
    x = jnp.asarray(x, state.centers.dtype)
    flat = x.reshape(-1, x.shape[-1])
    _, a = nearest_center(flat, state.centers, state.counts > 0)
    return a.reshape(x.shape[:-1])


def loss(state: State, x: Array) -> Array:
    """Squared distance of x (..., d) to the nearest seeded centre (inf if none)."""
    x = jnp.asarray(x, state.centers.dtype)
    flat = x.reshape(-1, x.shape[-1])
    l, _ = nearest_center(flat, state.centers, state.counts > 0)
    return l.reshape(x.shape[:-1])


def online_kmeans(n_clusters: int, *, step_exponent: float = 1.0) -> StreamLearner:
    """Sequential (MacQueen) k-means with a fixed number of centres.

    Args:
      n_clusters: k (static).
      step_exponent: see `Params`.

    Returns:
      A `jaxstream.StreamLearner`.
    """
    k = check_capacity(n_clusters, "n_clusters")
    defaults = default_params(step_exponent)

    def _init(key, x_init, params=None):
        return init(key, x_init, defaults if params is None else params, n_clusters=k)

    return StreamLearner(_init, update, predict, loss, defaults,
                         dict(learner="online_kmeans", n_clusters=k))


# ----------------------------------------------------------------------------
# Batch k-means and the Gap statistic
# ----------------------------------------------------------------------------

def kmeans_plus_plus(key, points: Array, point_mask: Array, n_clusters, capacity: int) -> Array:
    """k-means++ seeding (D² sampling) of the first `n_clusters` of `capacity` slots.

    Args:
      key: PRNG key.
      points: (n, d); point_mask: (n,) bool valid points (at least one).
      n_clusters: () number of centres to seed (traced is fine).
      capacity: static number of slots.

    Returns:
      (capacity, d) centres; slots ≥ n_clusters are zeros.
    """
    n, d = points.shape
    keys = jax.random.split(key, capacity)
    uniform_logits = jnp.where(point_mask, 0.0, -jnp.inf)
    i0 = jax.random.categorical(keys[0], uniform_logits)
    centers = jnp.zeros((capacity, d), points.dtype).at[0].set(points[i0])
    dmin = jnp.where(point_mask, jnp.sum((points - points[i0]) ** 2, axis=1), 0.0)

    def body(j, carry):
        centers, dmin = carry
        logits = jnp.where(dmin > 0, jnp.log(jnp.where(dmin > 0, dmin, 1.0)), -jnp.inf)
        # Every valid point already coincides with a centre: pick uniformly.
        logits = jnp.where(jnp.any(dmin > 0), logits, uniform_logits)
        new = points[jax.random.categorical(keys[j], logits)]
        use = j < n_clusters
        centers = jnp.where(use, centers.at[j].set(new), centers)
        dmin = jnp.where(use & point_mask, jnp.minimum(dmin, jnp.sum((points - new) ** 2, axis=1)),
                         dmin)
        return centers, dmin

    centers, _ = lax.fori_loop(1, capacity, body, (centers, dmin))
    return centers


def within_ss(points: Array, centers: Array, point_mask: Array, center_mask_: Array) -> Array:
    """Within-cluster sum of squares Σ_valid min_active ||x − c||² (the Gap paper's W_k
    when the centres are the cluster means)."""
    l, _ = nearest_center(points, centers, center_mask_)
    return jnp.sum(jnp.where(point_mask, l, 0.0))


def fit_kmeans(key, points: Array, n_clusters, capacity: int, *, point_mask: Optional[Array] = None,
               n_init: int = 3, n_iters: int = 20) -> tuple[Array, Array]:
    """Batch k-means: best of `n_init` k-means++ seedings refined by Lloyd.

    Returns:
      ``(centers (capacity, d), wss ())`` of the restart with the smallest
      within-cluster sum of squares.
    """
    pm = jnp.ones(points.shape[:1], bool) if point_mask is None else point_mask
    cm = center_mask(n_clusters, capacity)

    def one(k):
        c0 = kmeans_plus_plus(k, points, pm, n_clusters, capacity)
        c = kmeans(points, c0, point_mask=pm, center_mask=cm, n_iters=n_iters)
        return c, within_ss(points, c, pm, cm)

    cs, w = jax.vmap(one)(jax.random.split(key, n_init))
    best = jnp.argmin(w)
    return cs[best], w[best]


class GapResult(NamedTuple):
    """Result of `gap_statistic` (arrays indexed by k − 1, k = 1..k_max).

    Attributes:
      k: () chosen number of clusters.
      gap: (k_max,) Gap(k) = mean_b log W*_kb − log W_k.
      s: (k_max,) sd_k·√(1 + 1/B).
      log_w: (k_max,) log W_k of the data.
      log_w_ref: (k_max,) mean over the references of log W*_kb.
    """

    k: Array
    gap: Array
    s: Array
    log_w: Array
    log_w_ref: Array


def gap_select(gap: Array, s: Array, k_valid: Optional[Array] = None) -> Array:
    """Smallest k with Gap(k) ≥ Gap(k+1) − s_{k+1} (Tibshirani et al.'s rule).

    Args:
      gap, s: (K,) indexed by k − 1.
      k_valid: optional () largest admissible k (e.g. the number of points);
        k = k_valid is chosen when no smaller k satisfies the rule.

    Returns:
      () int32 k in 1..K.
    """
    K = gap.shape[0]
    kv = K if k_valid is None else jnp.clip(k_valid, 1, K)
    ks = jnp.arange(1, K + 1)
    nxt_gap = jnp.concatenate([gap[1:], jnp.full((1,), -jnp.inf, gap.dtype)])
    nxt_s = jnp.concatenate([s[1:], jnp.zeros((1,), s.dtype)])
    ok = ((gap >= nxt_gap - nxt_s) & (ks < kv)) | (ks == kv)
    return jnp.min(jnp.where(ok & (ks <= kv), ks, K)).astype(jnp.int32)


def gap_statistic(key, points, k_max: int, *, n_refs: int = 10, n_init: int = 3, n_iters: int = 20,
                  mask: Optional[Array] = None) -> GapResult:
    """Choose k by the Gap statistic (uniform reference on the bounding box).

    For each k = 1..k_max, W_k is the within-cluster sum of squares of the
    best of `n_init` k-means runs on the data, and W*_kb the same on B =
    `n_refs` data sets drawn uniformly on the data's bounding box (same
    number of points). k̂ = smallest k with Gap(k) ≥ Gap(k+1) − s_{k+1}; k is
    capped at the number of valid points.

    Args:
      key: PRNG key.
      points: (n, d) data (rows with ``mask`` False are ignored, so the same
        compiled function serves growing prefixes of a stream).
      k_max: largest k (static).
      n_refs, n_init, n_iters: static.
      mask: optional (n,) bool.

    Returns:
      `GapResult`.
    """
    K = check_capacity(k_max, "k_max")
    B = check_capacity(n_refs, "n_refs")
    points = check_points(points, "points", min_rows=1)
    n, d = points.shape
    pm = jnp.ones((n,), bool) if mask is None else jnp.asarray(mask, bool)
    lo = jnp.min(jnp.where(pm[:, None], points, jnp.inf), axis=0)
    hi = jnp.max(jnp.where(pm[:, None], points, -jnp.inf), axis=0)
    k_ref, k_fit = jax.random.split(key)
    refs = lo + (hi - lo) * jax.random.uniform(k_ref, (B, n, d), points.dtype)
    data = jnp.concatenate([points[None], refs])  # (B+1, n, d)
    ks = jnp.arange(1, K + 1)
    fit_keys = jax.random.split(k_fit, (B + 1, K))

    def w_of(x, key, k):
        return fit_kmeans(key, x, k, K, point_mask=pm, n_init=n_init, n_iters=n_iters)[1]

    w = jax.vmap(lambda x, kk: jax.vmap(lambda key, k: w_of(x, key, k))(kk, ks))(data, fit_keys)
    tiny = jnp.finfo(points.dtype).tiny
    logw = jnp.log(jnp.maximum(w, tiny))  # (B+1, K)
    log_w, log_ref = logw[0], logw[1:]
    ref_mean = jnp.mean(log_ref, axis=0)
    gap = ref_mean - log_w
    s = jnp.std(log_ref, axis=0) * jnp.sqrt(1.0 + 1.0 / B)
    k_hat = gap_select(gap, s, jnp.sum(pm))
    return GapResult(k_hat, gap, s, log_w, ref_mean)
