"""PAC-Bayesian online clustering (PACBO) with a reversible-jump MCMC kernel.

Li, Guedj & Loustau, "A quasi-Bayesian perspective to online clustering",
Electron. J. Stat. 12 (2018); the authors' R package PACBO 0.1.0.

After each observation x_t the learner keeps a Gibbs quasi-posterior over
partitions c = (c_1 … c_k), 1 ≤ k ≤ p (``max_clusters``)::

    S_t(c) = Σ_{s ≤ t} ℓ(c, x_s) + (λ_{2,s}/2)·(ℓ(c, x_s) − ℓ(ĉ_s, x_s))²
    ρ̂_{t+1}(c) ∝ exp(−λ_t·S_t(c))·π(c),         ℓ(c, x) = min_j ||x − c_j||²

where ĉ_s is the partition predicted for round s. The prior π puts no extra
weight on k and, given k, makes each centre uniform on the ball of radius
``prior_scale·R`` (1.5·R); partitions with a centre outside it have density 0.
Every round runs one short reversible-jump Metropolis–Hastings chain started
at the previous (k̂, ĉ); its last state is the next prediction.

Layout (fixed shapes, nothing retraces as k changes):

- centres live in ``max_clusters`` slots; the active ones are the prefix
  ``arange(p) < n_clusters`` (`center_mask`);
- the past is a ``history_size`` buffer of points together with the loss
  ℓ(ĉ_s, x_s) of the prediction that was made for them and their arrival
  index s (needed for the second-order term and λ_{2,s}). When the buffer is
  full, ``history_policy="reservoir"`` (default) keeps a uniform random sample
  of all points seen (Vitter's algorithm R) and multiplies the sum over the
  buffer by ``n_seen / n_stored``, an unbiased estimate of S_t;
  ``"window"`` keeps the last ``history_size`` points and uses them as if
  the stream had started there (λ and τ use the window's size), so the
  clustering tracks drift and forgets the old past.

Cost and vectorisation: a round fixes its target and its proposal family
(`round_target`: λ, τ, the table of k-means proposal means); the chain is one
`lax.scan` whose move/accept uniforms and Student-t noise (for the first
block of 8 centre slots) are drawn up front. Each step evaluates S at the
proposal over the H stored points and the centre slots in blocks of 8, up to
the block of the last active slot, i.e. O(H·k·d) per step rather than
O(H·p·d). Many streams run with `jaxstream.run_streams`, which vmaps the
whole update (one chain per stream); per-stream numeric parameters (R, λ
scales, …) live in ``state.params``. Several chains per stream are not
offered.

Functional API (BlackJAX / optax shape): `Params`, `State`, `Info`,
`default_params`, `init`, `update`, `predict`, `loss`, the factory `pacbo`
returning a `jaxstream.StreamLearner`, and the MCMC pieces `ChainState`,
`ChainInfo`, `init_chain`, `kernel` / `build_kernel`, `sample_chain`,
`round_target`, `proposal_means`, `kmeans`. `PACBO` is a stateful NumPy
wrapper. At the top level, ``jaxstream.pacbo`` is the factory,
``jaxstream.PACBO`` the wrapper and ``jaxstream.clustering`` this module.
"""
from __future__ import annotations

import math
from functools import lru_cache, partial
from typing import Callable, NamedTuple, Optional

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.special import gammaln, log_ndtr, ndtr

from ._checks import check_capacity, check_point, check_points, is_concrete
from ._core import StreamLearner, run_stream

Array = jax.Array
HISTORY_POLICIES = ("reservoir", "window")

__all__ = [
    "Params", "State", "Info", "ChainState", "ChainInfo", "default_params", "init", "update",
    "predict", "loss", "soft_loss", "pacbo", "PACBO", "init_chain", "build_kernel", "kernel",
    "sample_chain", "proposal_means", "kmeans", "add_farthest_center", "remove_cheapest_center",
    "sq_distances", "center_mask", "nearest_center", "log_prior", "log_proposal_density",
    "log_move_prob", "quasi_posterior_energy", "lambda_schedule", "lambda2_schedule",
    "tau_schedule", "check_radius", "RoundTarget", "round_target", "effective_count",
]


# ----------------------------------------------------------------------------
# Parameters, state, info
# ----------------------------------------------------------------------------

class Params(NamedTuple):
    """Numeric hyper-parameters (scalars; vmappable and differentiable).

    With n the number of points in the quasi-posterior, d the dimension and
    p = ``max_clusters``:

    - λ_n = ``lambda_scale``·(d+2) / (R·max(n−1, 1)^``lambda_power``) multiplies
      S in the Gibbs quasi-posterior. Default 2 = coeff (the R package's
      default coeff) and 0.5: the theory's λ ∝ (d+2)/(√n·R) with the R
      package's constant for its default (batch) mode. The R package's online
      mode uses 2.5·coeff = 5 (and λ = 1 at n = 1); pass ``lambda_scale=5``
      for it. On the four-group stream of the slides 5 makes the
      quasi-posterior itself favour k = 5–7 (its k-means losses drop by more
      than the prior's per-centre cost), which matches the R package's
      k̂ = 5 there; 2 puts most of the mass on k = 4 (see
      ``benchmarks/bench_pacbo.py``).
    - λ_{2,s} = ``lambda2_scale``·(d+2) / (√s·(``prior_scale``·R)^4) weighs the
      second-order term of point s (R package: 1).
    - The prior ball has radius ``prior_scale``·R (R package: 1.5).
    - The Student-t proposal has scale matrix τ·I with
      τ = ``tau_scale`` / √(p·(n+1)·d) (R package: 1).

    Attributes:
      radius: R, a bound on ||x_t||. NaN means "resolve at `init` as the
        largest norm among the initial points".
      lambda_scale, lambda_power, lambda2_scale, prior_scale, tau_scale: see
        above.
    """

    radius: Array
    lambda_scale: Array
    lambda_power: Array
    lambda2_scale: Array
    prior_scale: Array
    tau_scale: Array


def default_params(radius: Optional[float] = None, *, lambda_scale: float = 2.0,
                   lambda_power: float = 0.5, lambda2_scale: float = 1.0,
                   prior_scale: float = 1.5, tau_scale: float = 1.0) -> Params:
    """Default numeric hyper-parameters (see `Params` for each one and its source).

    Args:
      radius: R, a bound on the norm of the stream's points. None (NaN) lets
        `init` take the largest norm among ``x_init``, as the R package
        recommends for a whole data set; later points outside it are then
        handled by the out-of-radius policy (see `update`).
      lambda_scale, lambda_power, lambda2_scale, prior_scale, tau_scale: see
        `Params`.

    Returns:
      A `Params` of scalar arrays (default float dtype).
    """
    r = float("nan") if radius is None else radius
    return Params(*(jnp.asarray(v, dtype=jnp.zeros(()).dtype) for v in
                    (r, lambda_scale, lambda_power, lambda2_scale, prior_scale, tau_scale)))


class State(NamedTuple):
    """PACBO learner state (p = ``max_clusters``, H = ``history_size``).

    Attributes:
      centers: (p, d) centre slots; only the first `n_clusters` are active
        (inactive slots hold zeros).
      n_clusters: () int32, k̂ in 1..p.
      history: (H, d) stored points (the first `n_stored` slots are valid).
      history_loss: (H,) ℓ(ĉ_s, x_s), the loss of the partition predicted for
        each stored point before it was seen.
      history_index: (H,) int32 arrival index s ≥ 1 of each stored point.
      n_stored: () int32, valid history slots (min(n_seen, H)).
      n_seen: () int32, points learned so far.
      params: the `Params` (``radius`` resolved).
    """

    centers: Array
    n_clusters: Array
    history: Array
    history_loss: Array
    history_index: Array
    n_stored: Array
    n_seen: Array
    params: Params


class Info(NamedTuple):
    """What `update` reports about one round.

    Attributes:
      loss: prequential loss ℓ(ĉ_t, x_t) of the partition *before* learning x_t.
      n_clusters: k̂ *after* the round (the partition that predicts x_{t+1}).
      acceptance_rate: fraction of the round's MH proposals accepted.
      outside_radius: True when ||x_t|| > R (see the policy in `update`).
    """

    loss: Array
    n_clusters: Array
    acceptance_rate: Array
    outside_radius: Array


class ChainState(NamedTuple):
    """State of the reversible-jump chain within one round.

    Attributes:
      centers: (p, d) centres (first `n_clusters` active).
      n_clusters: () int32.
      logdensity: log of the unnormalised target at this state,
        −λ·S(c) + log π(c).
      log_proposal: log ρ_k(c | m_k), the density of the independence
        proposal at this state under the round's proposal means (the reverse
        move's density in the MH ratio).
    """

    centers: Array
    n_clusters: Array
    logdensity: Array
    log_proposal: Array


class ChainInfo(NamedTuple):
    """What one kernel step reports (BlackJAX style).

    Attributes:
      proposed_k: () int32, k' proposed on {k−1, k, k+1} ∩ [1, p].
      acceptance_prob: min(1, A), the MH acceptance probability.
      is_accepted: () bool.
      proposal: the proposed `ChainState`.
    """

    proposed_k: Array
    acceptance_prob: Array
    is_accepted: Array
    proposal: ChainState


# ----------------------------------------------------------------------------
# Geometry, masked k-means, proposal means
# ----------------------------------------------------------------------------

def _sq_dist_pn(points: Array, centers: Array) -> Array:
    """(n, d) × (p, d) -> (p, n) squared distances, computed coordinate-major.

    Differences are taken explicitly (not ||x||² − 2x·c + ||c||²), so the
    result is exact to rounding and never negative; the (d, p, n) layout
    makes the reduction over d a sum of d contiguous planes, which XLA on CPU
    runs ~10× faster than a reduction over a short minor axis.
    """
    diff = centers.T[:, :, None] - points.T[:, None, :]
    return jnp.sum(diff * diff, axis=0)


def _min_argmin0(a: Array) -> tuple[Array, Array]:
    """Min and argmin over axis 0 (ties -> lowest index), as int32.

    Via min + equality because XLA's variadic argmin reduction is ~5× slower
    on CPU; NaN columns give index a.shape[0] - 1.
    """
    m = jnp.min(a, axis=0)
    idx = jnp.arange(a.shape[0], dtype=jnp.int32).reshape((-1,) + (1,) * (a.ndim - 1))
    i = jnp.min(jnp.where(a == m[None], idx, a.shape[0] - 1), axis=0)
    return m, i


def sq_distances(points: Array, centers: Array) -> Array:
    """Squared Euclidean distances, (n, d) × (p, d) -> (n, p)."""
    return _sq_dist_pn(points, centers).T


def center_mask(n_clusters, capacity: int) -> Array:
    """(capacity,) bool, True for the active prefix of `n_clusters` slots."""
    return jnp.arange(capacity) < n_clusters


def nearest_center(points: Array, centers: Array, mask: Array) -> tuple[Array, Array]:
    """Squared distance to, and index of, the nearest active centre.

    Args:
      points: (n, d).
      centers: (p, d).
      mask: (p,) bool; inactive slots never win (ties go to the lowest index).

    Returns:
      ``(sq_dist (n,), index (n,) int32)``.
    """
    return _min_argmin0(jnp.where(mask[:, None], _sq_dist_pn(points, centers), jnp.inf))


def kmeans(points: Array, centers: Array, *, point_mask: Optional[Array] = None,
           center_mask: Optional[Array] = None, n_iters: int = 10) -> Array:
    """Masked Lloyd iterations from given initial centres.

    Each iteration assigns every valid point to its nearest active centre and
    moves every active centre to the mean of its points. Inactive slots and
    centres with no point keep their position. The number of iterations is
    fixed (static) so the cost is the same for every call.

    Args:
      points: (n, d) points, e.g. the fixed-capacity history.
      centers: (p, d) initial centres (warm start).
      point_mask: (n,) bool, valid points (default: all).
      center_mask: (p,) bool, active slots (default: all).
      n_iters: number of Lloyd iterations (static).

    Returns:
      (p, d) centres.
    """
    n, _ = points.shape
    p = centers.shape[0]
    pm = jnp.ones((n,), bool) if point_mask is None else point_mask
    cm = jnp.ones((p,), bool) if center_mask is None else center_mask

    def body(_, c):
        _, a = nearest_center(points, c, cm)
        # One-hot sums rather than segment_sum: a scatter is slow under vmap on CPU.
        w = ((a[None, :] == jnp.arange(p)[:, None]) & pm[None, :]).astype(points.dtype)
        counts = jnp.sum(w, axis=1)
        sums = jnp.einsum("pn,nd->pd", w, points, precision=lax.Precision.HIGHEST)
        move = cm & (counts > 0)
        return jnp.where(move[:, None], sums / jnp.maximum(counts, 1.0)[:, None], c)

    return lax.fori_loop(0, n_iters, body, centers)


def add_farthest_center(points: Array, point_mask: Array, centers: Array, n_clusters) -> Array:
    """Put a new centre in slot `n_clusters` at the valid point farthest from the active ones.

    This is the deterministic (farthest-point) variant of k-means++ seeding.
    Returns `centers` unchanged when all slots are used.
    """
    p = centers.shape[0]
    dmin, _ = nearest_center(points, centers, center_mask(n_clusters, p))
    _, i = _min_argmin0(-jnp.where(point_mask, dmin, -jnp.inf))
    new = centers.at[jnp.minimum(n_clusters, p - 1)].set(points[i])
    return jnp.where(n_clusters < p, new, centers)


def _removal_cost(points: Array, point_mask: Array, centers: Array, alive: Array) -> Array:
    """(p,) increase of the k-means loss if each alive centre were removed (inf if dead)."""
    p = centers.shape[0]
    d2 = jnp.where(alive[:, None], _sq_dist_pn(points, centers), jnp.inf)
    first, a = _min_argmin0(d2)
    onehot = jnp.arange(p)[:, None] == a[None, :]
    second = jnp.min(jnp.where(onehot, jnp.inf, d2), axis=0)
    gain = jnp.where(point_mask, second - first, 0.0)
    cost = jnp.sum(jnp.where(onehot, gain[None, :], 0.0), axis=1)
    return jnp.where(alive, cost, jnp.inf)


def remove_cheapest_center(points: Array, point_mask: Array, centers: Array, n_clusters) -> Array:
    """Drop the active centre whose removal increases the k-means loss least.

    The cost of removing centre j is the sum, over the valid points whose
    nearest centre is j, of (distance² to the second nearest − distance² to
    the nearest). Ties go to the lowest index. The remaining centres are
    compacted to the first ``n_clusters − 1`` slots (order kept), the freed
    slot is zeroed. Returns `centers` unchanged when ``n_clusters <= 1``.
    """
    p = centers.shape[0]
    _, j = _min_argmin0(_removal_cost(points, point_mask, centers, center_mask(n_clusters, p)))
    idx = jnp.arange(p)
    new = centers[jnp.where(idx >= j, jnp.minimum(idx + 1, p - 1), idx)]
    new = jnp.where(center_mask(n_clusters - 1, p)[:, None], new, 0.0)
    return jnp.where(n_clusters > 1, new, centers)


def proposal_means(points: Array, point_mask: Array, centers: Array, n_clusters,
                   n_iters: int = 10) -> Array:
    """The round's table of proposal means m_k for every k = 1..p.

    Starting from the current centres ĉ (k̂ of them), rows k > k̂ add, one at
    a time, the valid point farthest from the centres so far (deterministic
    k-means++), and rows k < k̂ drop, one at a time, the centre whose removal
    costs least (`remove_cheapest_center`). Rows k̂−1, k̂ and k̂+1 are then
    refined by masked Lloyd k-means (`kmeans`), i.e. they are k-means
    warm-started from ĉ. The chain moves k by ±1 per step, so the other rows
    are rarely used within a round and are left as greedy seeds.

    The table is a deterministic function of the history and of ĉ, both
    fixed during the round, so the proposal family is fixed for the whole
    chain and every MH step is exactly reversible with respect to the round's
    quasi-posterior. (The R package reruns a randomly started k-means at every
    proposal with k' ≠ k, which makes the proposal itself random and costs
    most of its run time.)

    Args:
      points: (H, d) stored points.
      point_mask: (H,) bool, valid points (at least one).
      centers: (p, d) current centres.
      n_clusters: () current k̂.
      n_iters: Lloyd iterations (static).

    Returns:
      (p, p, d) table; row k−1 holds m_k in its first k slots, zeros after.
    """
    p, d = centers.shape
    k = jnp.asarray(n_clusters, jnp.int32)
    cmask = center_mask(k, p)
    c = jnp.where(cmask[:, None], centers, 0.0)
    slots = jnp.arange(p, dtype=jnp.int32)

    # Rows above k are prefixes of one sequence: ĉ followed by the greedy
    # farthest points. The distance of every point to its nearest centre is
    # updated incrementally (O(H·d) a row); the loops carry no (p, p, d) table,
    # which matters under vmap where a loop selects its whole carry each step.
    dmin, _ = nearest_center(points, c, cmask)

    def up(j, carry):
        seq, dmin = carry
        _, i = _min_argmin0(-dmin)
        dnew = jnp.sum((points - points[i]) ** 2, axis=1)
        return seq.at[j].set(points[i]), jnp.minimum(dmin, dnew)

    seq, _ = lax.fori_loop(k, p, up, (c, jnp.where(point_mask, dmin, -jnp.inf)))

    # Rows below k: the order in which the cheapest centres are removed.
    def down(i, carry):
        alive, order = carry
        _, j = _min_argmin0(_removal_cost(points, point_mask, c, alive))
        return alive.at[j].set(False), order.at[i].set(j)

    _, order = lax.fori_loop(0, k - 1, down, (cmask, jnp.zeros((p,), jnp.int32)))
    removed_at = jnp.full((p,), p, jnp.int32).at[jnp.where(slots < k - 1, order, p)].set(
        slots, mode="drop")
    # Row r (k_r = r + 1 < k) keeps the centres not among the first k − k_r removed,
    # compacted in their order.
    alive = cmask[None, :] & (removed_at[None, :] >= (k - 1 - slots)[:, None])
    dest = jnp.where(alive, jnp.cumsum(alive, axis=1) - 1, p)
    down_rows = jnp.zeros((p, p, d), c.dtype).at[slots[:, None], dest].set(
        jnp.broadcast_to(c, (p, p, d)), mode="drop")
    up_rows = jnp.where((slots[None, :] <= slots[:, None])[:, :, None], seq[None], 0.0)
    rk = (slots + 1)[:, None, None]
    table = jnp.where(rk > k, up_rows, jnp.where(rk < k, down_rows, c[None]))

    # Lloyd on rows k-1, k, k+1 (clamped to [1, p]; row k is written last so
    # that a clamped duplicate cannot overwrite it).
    ks = jnp.stack([jnp.maximum(k - 1, 1), jnp.minimum(k + 1, p), k])
    masks = slots[None, :] < ks[:, None]
    refined = jax.vmap(lambda c0, m: kmeans(points, c0, point_mask=point_mask, center_mask=m,
                                            n_iters=n_iters))(table[ks - 1], masks)
    refined = jnp.where(masks[:, :, None], refined, 0.0)
    return table.at[ks[0] - 1].set(refined[0]).at[ks[1] - 1].set(refined[1]).at[k - 1].set(refined[2])


# ----------------------------------------------------------------------------
# Densities of the quasi-posterior and of the proposal
# ----------------------------------------------------------------------------

def log_prior(centers: Array, n_clusters, ball_radius) -> Array:
    """log π(c): k uniform centres on the ball of radius `ball_radius`, no weight on k.

    Each k has prior mass 1 (product of normalised uniform densities), so
    under π alone the marginal of k is uniform on {1 … p}. Returns −inf when
    an active centre lies outside the ball.
    """
    _, d = centers.shape
    mask = center_mask(n_clusters, centers.shape[0])
    inside = jnp.all(jnp.where(mask, jnp.sum(centers ** 2, axis=-1) <= ball_radius ** 2, True))
    log_unif = gammaln(d / 2 + 1) - (d / 2) * math.log(math.pi) - d * jnp.log(ball_radius)
    return jnp.where(inside, n_clusters * log_unif, -jnp.inf)


def log_proposal_density(centers: Array, means: Array, n_clusters, tau, df: float = 3.0) -> Array:
    """log ρ_k(c | m) = Σ_{j<k} log t_df(c_j; location m_j, scale matrix τ·I).

    The multivariate Student-t log density in d dimensions::

        lgamma((ν+d)/2) − lgamma(ν/2) − (d/2)·log(νπ) − (d/2)·log τ
          − ((ν+d)/2)·log(1 + ||c_j − m_j||² / (ν τ))

    Args:
      centers, means: (p, d).
      n_clusters: () k, the active prefix.
      tau: scale (the shape matrix is τ·I, i.e. a standard deviation √τ per
        coordinate before the t mixing).
      df: degrees of freedom ν.
    """
    p, d = centers.shape
    q = jnp.sum((centers - means) ** 2, axis=-1) / tau
    lp = (gammaln((df + d) / 2) - gammaln(df / 2) - (d / 2) * jnp.log(df * math.pi)
          - (d / 2) * jnp.log(tau) - ((df + d) / 2) * jnp.log1p(q / df))
    return jnp.sum(jnp.where(center_mask(n_clusters, p), lp, 0.0))


def _n_moves(k, p: int):
    return jnp.minimum(k + 1, p) - jnp.maximum(k - 1, 1) + 1


def log_move_prob(k, k_new, p: int) -> Array:
    """log q(k, k'): uniform on {k−1, k, k+1} ∩ [1, p] (1/3 each, 1/2 at the ends)."""
    ok = (jnp.abs(k_new - k) <= 1) & (k_new >= 1) & (k_new <= p)
    return jnp.where(ok, -jnp.log(_n_moves(k, p).astype(jnp.zeros(()).dtype)), -jnp.inf)


def quasi_posterior_energy(centers: Array, n_clusters, points: Array, point_mask: Array,
                           predicted_loss: Array, lambda2: Array, weight) -> Array:
    """S(c) = weight · Σ_valid ℓ(c, x_s) + (λ_{2,s}/2)·(ℓ(c, x_s) − ℓ(ĉ_s, x_s))².

    Vectorised over (points × centre slots) with both masks.

    Args:
      centers: (p, d); n_clusters: () active prefix.
      points: (H, d); point_mask: (H,) bool.
      predicted_loss: (H,) ℓ(ĉ_s, x_s).
      lambda2: (H,) λ_{2,s}.
      weight: scalar multiplying the sum (n_seen / n_stored for a reservoir).
    """
    lc, _ = nearest_center(points, centers, center_mask(n_clusters, centers.shape[0]))
    terms = lc + 0.5 * lambda2 * (lc - predicted_loss) ** 2
    return weight * jnp.sum(jnp.where(point_mask, terms, 0.0))


_CENTER_BLOCK = 8


def _energy_blocked(centers: Array, n_clusters, points_t: Array, point_mask: Array,
                    predicted_loss: Array, lambda2: Array, weight) -> Array:
    """`quasi_posterior_energy` for the chain's inner loop (not reverse-differentiable).

    Distances are computed for blocks of `_CENTER_BLOCK` centre slots, only
    up to the block holding the last active slot (a loop with a dynamic trip
    count), so a step costs O(H·k·d) instead of O(H·p·d); under `vmap` the
    loop runs to the largest k of the batch. ``points_t`` is the (d, H)
    transposed history.
    """
    p, d = centers.shape
    blk = _CENTER_BLOCK
    nb = -(-p // blk)
    cp = jnp.zeros((nb * blk, d), centers.dtype).at[:p].set(centers)

    def body(b, acc):
        cb = lax.dynamic_slice_in_dim(cp, b * blk, blk)
        diff = cb.T[:, :, None] - points_t[:, None, :]
        d2 = jnp.sum(diff * diff, axis=0)
        d2 = jnp.where((b * blk + jnp.arange(blk) < n_clusters)[:, None], d2, jnp.inf)
        return jnp.minimum(acc, jnp.min(d2, axis=0))

    n_blocks = (jnp.clip(n_clusters, 1, p) + blk - 1) // blk
    lc = lax.fori_loop(0, n_blocks, body, jnp.full(points_t.shape[1:], jnp.inf, centers.dtype))
    terms = lc + 0.5 * lambda2 * (lc - predicted_loss) ** 2
    return weight * jnp.sum(jnp.where(point_mask, terms, 0.0))


def lambda_schedule(params: Params, n, d: int) -> Array:
    """λ_n = lambda_scale·(d+2) / (R·max(n−1, 1)^lambda_power)."""
    n = jnp.maximum(jnp.asarray(n, params.radius.dtype) - 1, 1.0)
    return params.lambda_scale * (d + 2) / (params.radius * n ** params.lambda_power)


def lambda2_schedule(params: Params, index, d: int) -> Array:
    """λ_{2,s} = lambda2_scale·(d+2) / (√s·(prior_scale·R)^4) for arrival index s ≥ 1."""
    s = jnp.maximum(jnp.asarray(index, params.radius.dtype), 1.0)
    return params.lambda2_scale * (d + 2) / (jnp.sqrt(s) * (params.prior_scale * params.radius) ** 4)


def tau_schedule(params: Params, n, d: int, p: int) -> Array:
    """τ = tau_scale / √(p·(n+1)·d): the proposal's scale when n points are in S."""
    n = jnp.asarray(n, params.radius.dtype)
    return params.tau_scale / jnp.sqrt(p * (n + 1) * d)


# ----------------------------------------------------------------------------
# Reversible-jump MCMC kernel
# ----------------------------------------------------------------------------

LogDensityFn = Callable[[Array, Array], Array]


class _Draws(NamedTuple):
    u_move: Array     # uniform, picks k'
    log_u: Array      # log uniform, MH test
    noise: Array      # (blk, d) standard multivariate t_df (shape matrix I) for the first slots
    key: Array        # key of the noise of further slot blocks, drawn only when k' needs them


def _t_noise(w: Array, d: int, df: int) -> Array:
    """Standard multivariate t_df from (..., d + df) normals: z / √(χ²_df / df)."""
    chi2 = jnp.sum(w[..., d:] ** 2, axis=-1)
    return w[..., :d] * jnp.sqrt(df / chi2)[..., None]


def _draws(key, n: int, p: int, d: int, df: int, dtype) -> _Draws:
    """The random numbers of `n` kernel steps, drawn up front (leading axis n).

    One `jax.random.normal` call gives the two uniforms (Φ(z), with log Φ
    computed directly for the MH test) and the Student-t noise of the first
    `_CENTER_BLOCK` centre slots; χ²_df is a sum of df squared normals (exact
    for the integer df used here). Slots beyond the first block are only
    needed when k' exceeds it, so their noise is drawn inside the step, block
    by block, from a per-step key: drawing all p slots up front would cost
    p·(d+df) normals a step, most of them unused, and dominated the run time.
    """
    blk = min(_CENTER_BLOCK, p)
    k0, k1 = jax.random.split(key)
    z = jax.random.normal(k0, (n, 2 + blk * (d + df)), dtype)
    noise = _t_noise(z[:, 2:].reshape(n, blk, d + df), d, df)
    return _Draws(ndtr(z[:, 0]), log_ndtr(z[:, 1]), noise, jax.random.split(k1, n))


def _proposal_noise(draws: _Draws, n_clusters, p: int, df: int) -> Array:
    """(p, d) t-noise of one step for the first `n_clusters` slots (zeros after the last block)."""
    blk, d = draws.noise.shape
    nb = -(-p // blk)
    if nb == 1:
        return draws.noise[:p]
    full = jnp.zeros((nb * blk, d), draws.noise.dtype).at[:blk].set(draws.noise)

    def body(b, acc):
        w = jax.random.normal(jax.random.fold_in(draws.key, b), (blk, d + df), acc.dtype)
        return lax.dynamic_update_slice_in_dim(acc, _t_noise(w, d, df), b * blk, axis=0)

    full = lax.fori_loop(1, (n_clusters + blk - 1) // blk, body, full)
    return full[:p]


def init_chain(centers: Array, n_clusters, logdensity_fn: LogDensityFn, means: Array, tau,
               df: int = 3) -> ChainState:
    """Chain state at (centres, k) for a round's target and proposal means.

    Args:
      centers: (p, d); n_clusters: () k.
      logdensity_fn: ``(centers, n_clusters) -> −λ·S(c) + log π(c)``.
      means: (p, p, d) proposal means table (`proposal_means`).
      tau: proposal scale; df: degrees of freedom of the t proposal.
    """
    k = jnp.asarray(n_clusters, jnp.int32)
    return ChainState(centers, k, logdensity_fn(centers, k),
                      log_proposal_density(centers, means[k - 1], k, tau, df))


def _step(draws: _Draws, state: ChainState, logdensity_fn: LogDensityFn, means: Array, tau,
          df: int) -> tuple[ChainState, ChainInfo]:
    p, _ = state.centers.shape
    k = state.n_clusters
    lo = jnp.maximum(k - 1, 1)
    n_moves = _n_moves(k, p)
    k_new = lo + jnp.minimum(jnp.floor(draws.u_move * n_moves).astype(jnp.int32), n_moves - 1)
    m_new = means[k_new - 1]
    active = center_mask(k_new, p)[:, None]
    noise = _proposal_noise(draws, k_new, p, df)
    c_new = jnp.where(active, m_new + jnp.sqrt(tau) * noise, 0.0)
    lq_fwd = log_proposal_density(c_new, m_new, k_new, tau, df)
    ld_new = logdensity_fn(c_new, k_new)
    log_ratio = (ld_new - state.logdensity + state.log_proposal - lq_fwd
                 + log_move_prob(k_new, k, p) - log_move_prob(k, k_new, p))
    # −inf − (−inf) (both outside the prior's support) must reject, not NaN.
    log_ratio = jnp.where(jnp.isnan(log_ratio), -jnp.inf, log_ratio)
    accept = draws.log_u < log_ratio
    proposal = ChainState(c_new, k_new, ld_new, lq_fwd)
    new_state = jax.tree_util.tree_map(lambda a, b: jnp.where(accept, a, b), proposal, state)
    info = ChainInfo(k_new, jnp.exp(jnp.minimum(log_ratio, 0.0)), accept, proposal)
    return new_state, info


def kernel(key, state: ChainState, logdensity_fn: LogDensityFn, means: Array, tau,
           df: int = 3) -> tuple[ChainState, ChainInfo]:
    """One reversible-jump MH step (pure; BlackJAX signature).

    1. k' ~ q(k, ·), uniform on {k−1, k, k+1} ∩ [1, p].
    2. c'_j = m_{k',j} + √τ·t_j, t_j a standard multivariate Student t with
       `df` degrees of freedom, for j < k' (an independence proposal around
       the round's k'-means means).
    3. Accept with probability min(1, A)::

         log A = logdensity(c') − logdensity(c)
                 + log ρ_k(c | m_k) − log ρ_{k'}(c' | m_{k'})
                 + log q(k', k) − log q(k, k')

       with logdensity = −λ·S + log π (−inf outside the prior ball).

    Args:
      key: PRNG key.
      state: current `ChainState` (from `init_chain`).
      logdensity_fn: ``(centers (p, d), n_clusters ()) -> scalar``.
      means: (p, p, d) proposal means (row k−1 = m_k), fixed for the chain.
      tau: proposal scale.
      df: degrees of freedom (static int).

    Returns:
      ``(new_state, ChainInfo)``.
    """
    p, d = state.centers.shape
    draws = jax.tree_util.tree_map(lambda a: a[0], _draws(key, 1, p, d, df, state.centers.dtype))
    return _step(draws, state, logdensity_fn, means, tau, df)


def build_kernel(df: int = 3) -> Callable:
    """`kernel` with the static degrees of freedom closed over (BlackJAX's ``build_kernel``)."""
    df = check_capacity(df, "df")
    return lambda key, state, logdensity_fn, means, tau: kernel(key, state, logdensity_fn, means,
                                                                 tau, df)


def sample_chain(key, state: ChainState, logdensity_fn: LogDensityFn, means: Array, tau,
                 n_steps: int, df: int = 3) -> tuple[ChainState, ChainInfo]:
    """Run `n_steps` kernel steps as one `lax.scan`, random draws made up front.

    The random numbers of all steps (except the noise of centre slots beyond
    the first block, see `_draws`) come from one draw keyed by `key`; the
    chain has the same law as a Python loop of `kernel` (not the same bits).

    Returns:
      ``(final_state, infos)`` where ``infos`` is a `ChainInfo` with leading
      axis n_steps and ``proposal=None`` (not kept, to save memory).
    """
    p, d = state.centers.shape
    draws = _draws(key, n_steps, p, d, df, state.centers.dtype)

    def body(s, dr):
        s, info = _step(dr, s, logdensity_fn, means, tau, df)
        return s, info._replace(proposal=None)

    return lax.scan(body, state, draws)


# ----------------------------------------------------------------------------
# The online learner
# ----------------------------------------------------------------------------

def _cast_params(params: Params, dtype) -> Params:
    return Params(*(jnp.asarray(v, dtype) for v in params))


def _insert(key, state: State, x: Array, pred_loss: Array, policy: str) -> State:
    """Add one point to the history (see the module docstring for the policies)."""
    H = state.history.shape[0]
    n = state.n_seen + 1
    if policy == "reservoir":
        j = jax.random.randint(key, (), 0, jnp.maximum(n, 1), dtype=jnp.int32)
        slot = jnp.where(n <= H, n - 1, j)
        store = (n <= H) | (j < H)
    else:
        slot = (n - 1) % H
        store = jnp.asarray(True)
    slot = jnp.clip(slot, 0, H - 1)
    put = lambda buf, v: jnp.where(store, buf.at[slot].set(v), buf)
    return state._replace(history=put(state.history, x),
                          history_loss=put(state.history_loss, pred_loss),
                          history_index=put(state.history_index, n),
                          n_stored=jnp.minimum(n, H).astype(jnp.int32),
                          n_seen=n.astype(jnp.int32))


def check_radius(xs, radius, name: str = "xs") -> None:
    """Raise ValueError if a row of `xs` (n, d) has norm > radius (host-side check)."""
    norms = np.linalg.norm(np.asarray(xs, np.float64).reshape(-1, np.shape(xs)[-1]), axis=1)
    bad = np.flatnonzero(norms > float(radius) * (1 + 1e-6))
    if bad.size:
        raise ValueError(
            f"{name} has {bad.size} point(s) outside the radius R={float(radius):.6g} the learner "
            f"was built for (first at index {bad[0]}, norm {norms[bad[0]]:.6g}); PACBO assumes "
            "||x|| <= R: build the learner with a larger radius")


def init(key, x_init, params: Optional[Params] = None, *, max_clusters: int = 50,
         history_size: int = 256, history_policy: str = "reservoir") -> State:
    """Initial state: one centre, the initial points in the history.

    The initial partition has k = 1 centre at the mean of ``x_init`` (at the
    origin when ``x_init`` has no rows). The points of ``x_init`` enter the
    history with the loss of that partition as their predicted loss; no chain
    is run before the first `update`.

    Args:
      key: PRNG key (used by the reservoir when ``x_init`` exceeds the history).
      x_init: (n0, d) initial points, n0 ≥ 0 (d is taken from its shape).
      params: `Params` (default: `default_params()`, R resolved from x_init).
      max_clusters, history_size, history_policy: static (see `pacbo`).

    Returns:
      A `State` whose params are cast to the dtype of ``x_init``.

    Raises:
      ValueError (concrete inputs only): bad shape or non-finite ``x_init``;
      radius not set and ``x_init`` empty; radius ≤ 0; a point of ``x_init``
      outside the radius.
    """
    p = check_capacity(max_clusters, "max_clusters")
    H = check_capacity(history_size, "history_size")
    if history_policy not in HISTORY_POLICIES:
        raise ValueError(f"history_policy must be one of {HISTORY_POLICIES}; got {history_policy!r}")
    x_init = check_points(x_init, "x_init")
    n0, d = x_init.shape
    dtype = x_init.dtype
    params = _cast_params(default_params() if params is None else params, dtype)
    max_norm = jnp.max(jnp.linalg.norm(x_init, axis=1)) if n0 else jnp.zeros((), dtype)
    radius = jnp.where(jnp.isnan(params.radius), max_norm, params.radius)
    if is_concrete(params.radius) and is_concrete(x_init):
        if np.isnan(np.asarray(params.radius)) and n0 == 0:
            raise ValueError("radius is not set and x_init is empty: pass radius=R (a bound on "
                             "the norm of the stream's points) or some initial points")
        if not float(radius) > 0 or not np.isfinite(float(radius)):
            raise ValueError(f"radius must be a positive finite number; got {float(radius)}")
        check_radius(x_init, radius, "x_init")
    params = params._replace(radius=radius)
    c0 = jnp.mean(x_init, axis=0) if n0 else jnp.zeros((d,), dtype)
    state = State(centers=jnp.zeros((p, d), dtype).at[0].set(c0),
                  n_clusters=jnp.asarray(1, jnp.int32),
                  history=jnp.zeros((H, d), dtype), history_loss=jnp.zeros((H,), dtype),
                  history_index=jnp.zeros((H,), jnp.int32),
                  n_stored=jnp.asarray(0, jnp.int32), n_seen=jnp.asarray(0, jnp.int32),
                  params=params)
    if n0 == 0:
        return state
    pred = jnp.sum((x_init - c0) ** 2, axis=1)

    def body(s, inp):
        i, x, l = inp
        return _insert(jax.random.fold_in(key, i), s, x, l, history_policy), None

    state, _ = lax.scan(body, state, (jnp.arange(n0), x_init, pred))
    return state


def loss(state: State, x: Array) -> Array:
    """ℓ(ĉ, x) = min over active centres of ||x − c_j||², for x of shape (..., d)."""
    x = jnp.asarray(x, state.centers.dtype)
    flat = x.reshape(-1, x.shape[-1])
    l, _ = nearest_center(flat, state.centers, center_mask(state.n_clusters, state.centers.shape[0]))
    return l.reshape(x.shape[:-1])


def predict(state: State, x: Array) -> Array:
    """Label (index of the nearest active centre, int32) of x of shape (..., d)."""
    x = jnp.asarray(x, state.centers.dtype)
    flat = x.reshape(-1, x.shape[-1])
    _, a = nearest_center(flat, state.centers, center_mask(state.n_clusters, state.centers.shape[0]))
    return a.reshape(x.shape[:-1])


def soft_loss(state: State, x: Array, temperature) -> Array:
    """Smooth relaxation of `loss`: −T·logsumexp(−||x − c_j||²/T) over active centres.

    Tends to `loss` as T → 0 and is differentiable in the centres and in x.
    """
    x = jnp.asarray(x, state.centers.dtype)
    flat = x.reshape(-1, x.shape[-1])
    d2 = sq_distances(flat, state.centers)
    mask = center_mask(state.n_clusters, state.centers.shape[0])
    s = jax.nn.logsumexp(jnp.where(mask[None, :], -d2 / temperature, -jnp.inf), axis=1)
    return (-temperature * s).reshape(x.shape[:-1])


def effective_count(state: State, history_policy: str = "reservoir") -> tuple[Array, Array]:
    """(n, weight): the number of points S stands for, and the multiplier of the buffer's sum.

    Reservoir: n = n_seen and weight = n_seen / n_stored (the buffer is a
    uniform sample of everything seen). Window: n = n_stored and weight = 1
    (the quasi-posterior of the window alone).
    """
    dtype = state.centers.dtype
    if history_policy == "reservoir":
        return state.n_seen, state.n_seen.astype(dtype) / jnp.maximum(state.n_stored, 1).astype(dtype)
    if history_policy == "window":
        return state.n_stored, jnp.ones((), dtype)
    raise ValueError(f"history_policy must be one of {HISTORY_POLICIES}; got {history_policy!r}")


class RoundTarget(NamedTuple):
    """What one round's chain needs, fixed for the whole chain.

    Attributes:
      logdensity_fn: ``(centers, n_clusters) -> −λ·S(c) + log π(c)`` over the
        history (a closure; not a pytree leaf).
      means: (p, p, d) proposal means table (`proposal_means`).
      tau: proposal scale τ.
      lam: λ of the round.
      weight: multiplier of the sum over the history (n_seen / n_stored for
        the reservoir, 1 for the window).
    """

    logdensity_fn: LogDensityFn
    means: Array
    tau: Array
    lam: Array
    weight: Array


def round_target(state: State, *, history_policy: str = "reservoir",
                 kmeans_iters: int = 10) -> RoundTarget:
    """The quasi-posterior target and proposal family of a round.

    Uses the history as it is in `state` (call it after the new point was
    stored, as `update` does). With n = n_seen (reservoir) or n_stored
    (window): λ = `lambda_schedule` (n), τ = `tau_schedule` (n), λ_{2,s} from
    each stored point's arrival index.
    """
    p, d = state.centers.shape
    params = state.params
    pmask = jnp.arange(state.history.shape[0]) < state.n_stored
    n_eff, weight = effective_count(state, history_policy)
    lam = lambda_schedule(params, n_eff, d)
    tau = tau_schedule(params, n_eff, d, p)
    lam2 = lambda2_schedule(params, state.history_index, d)
    ball = params.prior_scale * params.radius
    points_t = state.history.T

    def logdensity_fn(c, k):
        energy = _energy_blocked(c, k, points_t, pmask, state.history_loss, lam2, weight)
        return -lam * energy + log_prior(c, k, ball)

    means = proposal_means(state.history, pmask, state.centers, state.n_clusters, kmeans_iters)
    return RoundTarget(logdensity_fn, means, tau, lam, weight)


def update(key, state: State, x: Array, *, n_steps: int = 500, kmeans_iters: int = 10,
           history_policy: str = "reservoir", df: int = 3) -> tuple[State, Info]:
    """Learn one observation: record its loss, store it, run one chain.

    1. ℓ(ĉ_t, x_t) of the current partition (the prequential loss).
    2. x_t and that loss enter the history (reservoir or window policy).
    3. The round's proposal means for all k (`proposal_means`, k-means for
       k̂−1, k̂, k̂+1 warm-started from ĉ) and the target
       −λ_n·S_n(c) + log π(c) over the history are fixed.
    4. `n_steps` reversible-jump MH steps (`sample_chain`) from (k̂, ĉ); the
       last state is the new (k̂, ĉ).

    Points outside the radius R: inside a trace nothing can raise, so such a
    point is learned as it is (the prior still confines centres to the ball
    of radius 1.5·R) and ``info.outside_radius`` is True. The wrapper `PACBO`
    and `check_radius` raise a ValueError instead.

    Args:
      key: PRNG key for this round.
      state: `State`.
      x: (d,) observation.
      n_steps, kmeans_iters, history_policy, df: static (see `pacbo`).

    Returns:
      ``(new_state, Info)``.
    """
    p, d = state.centers.shape
    check_point(x, d)
    x = jnp.asarray(x, state.centers.dtype)
    params = state.params
    pred_loss = loss(state, x)
    k_ins, k_chain = jax.random.split(key)
    st = _insert(k_ins, state, x, pred_loss, history_policy)
    target = round_target(st, history_policy=history_policy, kmeans_iters=kmeans_iters)
    logdensity_fn, means, tau = target.logdensity_fn, target.means, target.tau
    chain0 = init_chain(st.centers, st.n_clusters, logdensity_fn, means, tau, df)
    final, infos = sample_chain(k_chain, chain0, logdensity_fn, means, tau, n_steps, df)
    new_state = st._replace(centers=final.centers, n_clusters=final.n_clusters)
    info = Info(loss=pred_loss, n_clusters=final.n_clusters,
                acceptance_rate=jnp.mean(infos.is_accepted.astype(x.dtype)),
                outside_radius=jnp.sum(x * x) > params.radius ** 2)
    return new_state, info


def pacbo(max_clusters: int = 50, history_size: int = 256, n_steps: int = 500, *,
          radius: Optional[float] = None, kmeans_iters: int = 10,
          history_policy: str = "reservoir", df: int = 3, **param_overrides) -> StreamLearner:
    """PACBO online clustering as a `jaxstream.StreamLearner`.

    Args:
      max_clusters: p, the largest number of centres (static; R package
        ``K_max`` = 50).
      history_size: H, capacity of the history buffer (static). Each MCMC
        step costs O(H·p·d); with H ≥ the stream length S is exact.
      n_steps: N, MH steps per round (static; R package default 500).
      radius: R, a bound on ||x_t|| (None: resolved at init from ``x_init``,
        see `default_params`).
      kmeans_iters: Lloyd iterations for the proposal means (static).
      history_policy: ``"reservoir"`` or ``"window"`` (module docstring).
      df: degrees of freedom of the Student-t proposal (static int; 3).
      **param_overrides: other `default_params` keywords (lambda_scale, …).

    Returns:
      ``StreamLearner(init, update, predict, loss, params)``; ``info`` is an
      `Info`, ``predict`` gives labels, ``loss`` the squared distance to the
      nearest centre.
    """
    p = check_capacity(max_clusters, "max_clusters")
    H = check_capacity(history_size, "history_size")
    N = check_capacity(n_steps, "n_steps")
    iters = check_capacity(kmeans_iters, "kmeans_iters", minimum=0)
    df = check_capacity(df, "df")
    if history_policy not in HISTORY_POLICIES:
        raise ValueError(f"history_policy must be one of {HISTORY_POLICIES}; got {history_policy!r}")
    defaults = default_params(radius, **param_overrides)

    def _init(key, x_init, params=None):
        return init(key, x_init, defaults if params is None else params, max_clusters=p,
                    history_size=H, history_policy=history_policy)

    _update = partial(update, n_steps=N, kmeans_iters=iters, history_policy=history_policy, df=df)
    return StreamLearner(_init, _update, predict, loss, defaults)


# ----------------------------------------------------------------------------
# Stateful NumPy wrapper
# ----------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _wrapper_runner(n_steps: int, kmeans_iters: int, history_policy: str, df: int):
    """One jitted masked `run_stream` per static configuration, shared by all wrappers."""
    update_fn = partial(update, n_steps=n_steps, kmeans_iters=kmeans_iters,
                        history_policy=history_policy, df=df)
    learner = StreamLearner(None, update_fn, predict, loss, None)
    return jax.jit(lambda key, xs, state, mask, offset: run_stream(
        learner, key, xs, state, mask=mask, trace="info", step_offset=offset))


class PACBO:
    """Stateful NumPy-in / NumPy-out PACBO (keeps the key and the state).

    ``learn_one(x)`` and ``learn_many(X)`` learn points in order; round t uses
    ``fold_in(key, t)`` with the global t, so learning point by point gives
    the same result as learning the same points in one batch. Batches are
    padded (and masked) to the next power of two, so a stream arriving in
    batches of varying sizes compiles only a few times; wrappers with the
    same static configuration share their compiled code.

    Points outside the radius raise ValueError (nothing of the batch is
    learned). With ``radius=None`` the radius is fixed by the first batch
    (its largest norm, as the R package recommends for a whole data set).

    Args:
      radius: R (see `pacbo`).
      seed: int seed of the PRNG key.
      max_clusters, history_size, n_steps, kmeans_iters, history_policy, df,
        **params: as in `pacbo`.

    Attributes:
      state_: the `State` (None before the first point).
      n_seen_: points learned.
      cumulative_loss_: sum of prequential losses (float64 on the host).
      last_info_: `Info` (NumPy) of the last batch, one row per point.
    """

    def __init__(self, radius: Optional[float] = None, *, max_clusters: int = 50,
                 history_size: int = 256, n_steps: int = 500, kmeans_iters: int = 10,
                 history_policy: str = "reservoir", df: int = 3, seed: int = 0, **params):
        self.learner = pacbo(max_clusters, history_size, n_steps, radius=radius,
                             kmeans_iters=kmeans_iters, history_policy=history_policy, df=df,
                             **params)
        self.radius = radius
        self._init_key, self._key = jax.random.split(jax.random.PRNGKey(seed))
        self._run = _wrapper_runner(check_capacity(n_steps, "n_steps"),
                                    check_capacity(kmeans_iters, "kmeans_iters", minimum=0),
                                    history_policy, check_capacity(df, "df"))
        self.state_: Optional[State] = None
        self.n_seen_ = 0
        self.cumulative_loss_ = 0.0
        self.last_info_: Optional[Info] = None

    @property
    def dim(self) -> Optional[int]:
        return None if self.state_ is None else int(self.state_.centers.shape[1])

    def learn_many(self, X) -> "PACBO":
        """Learn the rows of X (n, d), n ≥ 1, in order. Returns self."""
        X = np.asarray(X)
        if X.ndim == 2 and X.shape[0] == 0:
            raise ValueError("X is empty (0 rows): nothing to learn")
        X = np.asarray(check_points(X, "X", dim=self.dim, min_rows=1))
        if self.state_ is None:
            radius = (float(np.linalg.norm(X.astype(np.float64), axis=1).max())
                      if self.radius is None else float(self.radius))
            if not radius > 0:
                raise ValueError(f"radius must be > 0; got {radius}")
            check_radius(X, radius, "X")
            params = self.learner.params._replace(radius=jnp.asarray(radius))
            self.state_ = self.learner.init(self._init_key, X[:0], params)
        else:
            check_radius(X, self.state_.params.radius, "X")
        n = X.shape[0]
        size = 1 << (n - 1).bit_length()
        Xp = np.concatenate([X, np.zeros((size - n, X.shape[1]), X.dtype)])
        mask = np.arange(size) < n
        self.state_, info = self._run(self._key, Xp, self.state_, mask, self.n_seen_)
        info = jax.tree_util.tree_map(lambda a: np.asarray(a)[:n], info)
        self.n_seen_ += X.shape[0]
        self.cumulative_loss_ += float(info.loss.astype(np.float64).sum())
        self.last_info_ = info
        return self

    partial_fit = learn_many

    def learn_one(self, x) -> "PACBO":
        """Learn one point x (d,). Returns self."""
        x = np.asarray(x)
        if x.ndim != 1:
            raise ValueError(f"x must have shape (d,); got {x.shape} (use learn_many for batches)")
        return self.learn_many(x[None, :])

    def _need_state(self):
        if self.state_ is None:
            raise RuntimeError("PACBO has not learned any point yet")
        return self.state_

    def _per_point(self, fn, X) -> np.ndarray:
        """Apply ``fn(state, X2)`` to X (n, d), or to one point (d,)."""
        state = self._need_state()
        X = np.asarray(X)
        one = X.ndim == 1
        X2 = np.asarray(check_points(X[None] if one else X, "X", dim=self.dim))
        out = np.asarray(fn(state, X2))
        return out[0] if one else out

    def predict(self, X) -> np.ndarray:
        """Labels (indices into `centers`) of X (n, d), or of one point (d,)."""
        return self._per_point(predict, X)

    def loss(self, X) -> np.ndarray:
        """Squared distance of X (n, d) (or of one point) to the nearest centre."""
        return self._per_point(loss, X)

    @property
    def n_clusters(self) -> int:
        """Current k̂."""
        return int(self._need_state().n_clusters)

    @property
    def centers(self) -> np.ndarray:
        """(k̂, d) current centres."""
        s = self._need_state()
        return np.asarray(s.centers[: int(s.n_clusters)])
