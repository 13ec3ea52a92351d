"""PACBO's Gibbs quasi-posterior: energy, prior, temperature schedules, price of a centre.

After t points the quasi-posterior over partitions c = (c_1 … c_k) is::

    ρ̂(c) ∝ exp(−λ_t·S_t(c)) · q(k) · Π_{j≤k} U(c_j; ball(o, prior_scale·R))
    S_t(c) = Σ_s ℓ(c, x_s) + (λ_{2,s}/2)·(ℓ(c, x_s) − ℓ(ĉ_s, x_s))²,   ℓ(c, x) = min_j ||x − c_j||²

with U the uniform density on the prior ball and log q(k) = −η_t·k. Adding a
centre can only lower S, so a centre must pay for itself. This module
provides what a round fixes before its chain runs, as functions of the
history and the current partition (so each round's target is fixed and its
chain exactly reversible):

* the temperatures λ_t and λ_{2,s} (`lambda_schedule`, `lambda2_schedule`)
  in units of the noise scale σ̂ (`noise_variance`, `noise_dof`), pooled with
  a guess σ₀ if one is given (`pooled_noise_variance`): λ·S does not depend
  on the data's units;
* the price of a centre (`centre_price`, its floor `singleton_bound`) and
  the prior rate η_t (`prior_rate`);
* the split guard (`noise_split_limit`, `guarded_noise_variance`): the price
  and λ's cap use the k̂ row's noise level while the k̂ + 1 row's extra
  centre may be splitting noise;
* the energy and the log target, batched over proposals and evaluable one
  block of centre slots at a time (`quasi_posterior_energy`, `energies`,
  `log_prior`, `log_ball_volume`, `LogTarget`, `log_target_fn`).

How it works, in detail (the formulas, the cap on λ, the split guard, the
variants measured and not kept): the documentation's "How PACBO works" page
(docs/internals/pacbo.md), section "The quasi-posterior"; the "module
docstring" and "Split guard" that docstrings here cite are that section.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import gammaln

from .._loops import fori_upto
from .._stats import chi2_upper
from .kernel import BlockwiseLogDensity
from .lloyd import center_mask, nearest_center

Array = jax.Array

# 95 % quantiles of σ̂²_1/σ̂²_2 for n points of one standard Gaussian in d dimensions, σ̂²_1 about
# their mean and σ̂²_2 about their best 2-means split, each with its centres' degrees of freedom
# removed (`benchmarks/noise_split_table.py --draws 2000 --seed 0`; rows d, columns n).
NOISE_SPLIT_SIZES = (3, 4, 5, 6, 8, 10, 15, 20, 30, 40, 80, 160)
NOISE_SPLIT_RATIO = {
    1: (1.02e+03, 50.7, 17.8, 12.4, 7.76, 6.5, 5.23, 4.61, 3.95, 3.76, 3.38, 3.16),
    2: (28.2, 7.29, 5.09, 4.01, 3.1, 2.78, 2.33, 2.14, 1.96, 1.85, 1.72, 1.64),
    3: (10.2, 4.5, 3.21, 2.71, 2.29, 2.08, 1.81, 1.68, 1.58, 1.54, 1.44, 1.39),
    5: (4.91, 2.72, 2.26, 1.94, 1.74, 1.62, 1.48, 1.41, 1.35, 1.31, 1.25, 1.22),
    10: (2.56, 1.89, 1.63, 1.53, 1.41, 1.33, 1.27, 1.22, 1.19, 1.17, 1.14, 1.11),
    30: (1.6, 1.36, 1.28, 1.23, 1.18, 1.15, 1.12, 1.1, 1.08, 1.07, 1.06, 1.04),
    100: (1.26, 1.17, 1.13, 1.11, 1.09, 1.07, 1.06, 1.05, 1.04, 1.03, 1.02, 1.02),
}
ENERGY_BLOCK = 4  # centre slots per step of the energies' loop (unrolled)

__all__ = ["lambda_schedule", "noise_variance", "noise_dof", "pooled_noise_variance", "noise_split_limit",
           "guarded_noise_variance", "lambda2_schedule",
           "log_ball_volume", "log_prior", "singleton_bound", "centre_price", "prior_rate", "quasi_posterior_energy",
           "energies", "LogTarget", "log_target_fn"]


def lambda_schedule(lambda_scale, lambda_power, radius, n, d: int, noise_sd=1.0) -> Array:
    """λ_n = lambda_scale·(d+2) / (R·σ·max(n−1, 1)^lambda_power) (σ = 1: the spec's λ)."""
    n = jnp.maximum(jnp.asarray(n, jnp.result_type(radius)) - 1, 1.0)
    return lambda_scale * (d + 2) / (radius * noise_sd * n ** lambda_power)


def noise_variance(within_ss_next, k_next, within_ss, k, n, d: int) -> Array:
    """σ̂², the within-cluster variance per coordinate, with the centres' degrees of freedom removed.

    From the k̂ + 1 row, W_{k̂+1}/(d·(n − k̂ − 1)), while n > k̂ + 1; else from
    the k̂ row, W_{k̂}/(d·(n − k̂)), while n > k̂; else NaN (one point: no spread).
    """
    dof_next, dof = n - k_next, n - k
    v_next = within_ss_next / (d * jnp.maximum(dof_next, 1.0))
    v = within_ss / (d * jnp.maximum(dof, 1.0))
    return jnp.where(dof_next >= 1, v_next, jnp.where(dof >= 1, v, jnp.nan))


def noise_dof(n, k_next, k) -> Array:
    """The residual points behind `noise_variance` (its degrees of freedom over d): n − k̂ − 1, else n − k̂, else 0."""
    dof_next, dof = n - k_next, n - k
    return jnp.where(dof_next >= 1, dof_next, jnp.where(dof >= 1, dof, 0.0))


def pooled_noise_variance(variance, dof, guess, prior_points) -> Array:
    """σ² from the data's σ̂² and a guess σ₀, weighted by points: (ν₀·σ₀² + ν·σ̂²)/(ν₀ + ν).

    The guess is a scaled-inverse-χ² prior on σ² worth ν₀ = `prior_points`
    points' residuals; the data bring ν = `dof` (`noise_dof`; 0 where σ̂² is
    NaN, so that the guess alone is used). ν₀ = inf gives σ₀² exactly, ν₀ = 0
    the data's σ̂² wherever they have a spread. A NaN guess (none) returns
    `variance` unchanged.

    Args:
      variance: () σ̂² (`noise_variance`; NaN: no spread yet).
      dof: () ν ≥ 0, the residual points behind σ̂².
      guess: () σ₀ > 0, or NaN for none.
      prior_points: () ν₀ in [0, inf].

    Returns:
      () σ² (NaN only when there is neither a guess nor a spread).
    """
    has_data = ~jnp.isnan(variance) & (dof > 0)
    nu = jnp.where(has_data, dof, 0.0)
    v = jnp.where(has_data, variance, 0.0)
    g2 = jnp.where(jnp.isnan(guess), 0.0, guess) ** 2
    # ν₀ = inf (σ₀ exactly) and ν₀ = ν = 0 would make 0·inf or 0/0 in the untaken branch, whose
    # NaN reaches the gradient through jnp.where: both branches get safe weights.
    exact = jnp.isinf(prior_points) | (prior_points + nu <= 0)
    nu0 = jnp.where(exact, 1.0, prior_points)
    pooled = (nu0 * g2 + nu * v) / (nu0 + nu)
    with_guess = jnp.where(jnp.isinf(prior_points) | ~has_data, g2, pooled)
    return jnp.where(jnp.isnan(guess), variance, with_guess)


def noise_split_limit(n, d: int) -> Array:
    """The 95 % quantile of σ̂²_k̂/σ̂²_{k̂+1} when the extra centre splits one Gaussian group of n points.

    `NOISE_SPLIT_RATIO` interpolated in log n (clamped to its sizes, 3–160)
    and, for a dimension between its rows, in log d (clamped to 1–100; d is
    static).

    Args:
      n: the number of points (any shape).
      d: dimension (static).

    Returns:
      the limit, shaped like n (≥ 1).
    """
    dims = np.array(sorted(NOISE_SPLIT_RATIO), float)
    table = np.log(np.array([NOISE_SPLIT_RATIO[k] for k in sorted(NOISE_SPLIT_RATIO)]))
    ld = np.log(np.clip(d, dims[0], dims[-1]))
    row = np.array([np.interp(ld, np.log(dims), table[:, j]) for j in range(table.shape[1])])
    n = jnp.asarray(n)
    dtype = jnp.result_type(n, jnp.float32)
    sizes = np.array(NOISE_SPLIT_SIZES, float)
    ln = jnp.log(jnp.clip(n.astype(dtype), sizes[0], sizes[-1]))
    return jnp.exp(jnp.interp(ln, jnp.asarray(np.log(sizes), dtype), jnp.asarray(row, dtype)))


def guarded_noise_variance(variance, variance_k, n, d: int) -> Array:
    """The noise level of the centre price and λ's cap: max(σ̂²_{k̂+1}, σ̂²_k̂) while the k̂ + 1 row's
    extra centre may split noise (σ̂²_k̂ ≤ ``noise_split_limit(n, d)``·σ̂²_{k̂+1}), else σ̂²_{k̂+1}.

    Args:
      variance: () σ̂²_{k̂+1}, the round's noise level (σ², after pooling and flooring).
      variance_k: () σ̂²_k̂, the k̂ row's (NaN: no spread; then `variance`).
      n: () the number of points; d: dimension (static).

    Returns:
      () σ² for the price and the cap.
    """
    noise = variance_k <= noise_split_limit(n, d) * variance
    return jnp.where(noise, jnp.maximum(variance, jnp.where(noise, variance_k, variance)), variance)


def lambda2_schedule(lambda2_scale, prior_scale, radius, index, d: int, noise_sd=1.0) -> Array:
    """λ_{2,s} = lambda2_scale·(d+2)·σ² / (√s·(prior_scale·R)^4) for arrival index s ≥ 1 (σ = 1: the spec's)."""
    s = jnp.maximum(jnp.asarray(index, jnp.result_type(radius)), 1.0)
    return lambda2_scale * (d + 2) * noise_sd ** 2 / (jnp.sqrt(s) * (prior_scale * radius) ** 4)


def log_ball_volume(ball_radius, d: int) -> Array:
    """log of the volume of a d-ball: (d/2)·log π − log Γ(d/2+1) + d·log r."""
    return (d / 2) * math.log(math.pi) - gammaln(d / 2 + 1) + d * jnp.log(ball_radius)


def log_prior(centers: Array, n_clusters, ball_center: Array, ball_radius, eta) -> Array:
    """log π(c) up to a constant: −η·k − k·log vol(ball), −inf if a centre is outside the ball.

    Args:
      centers: (..., p, d); n_clusters: (...) k.
      ball_center: (d,); ball_radius: ().
      eta: () rate of the prior on k (log q(k) = −η·k + const).
    """
    p, d = centers.shape[-2:]
    k = jnp.asarray(n_clusters)
    mask = jnp.arange(p) < k[..., None]
    r2 = jnp.sum((centers - ball_center) ** 2, axis=-1)
    inside = jnp.all(jnp.where(mask, r2 <= ball_radius ** 2, True), axis=-1)
    return jnp.where(inside, -k * (eta + log_ball_volume(ball_radius, d)), -jnp.inf)


def singleton_bound(n, d: int) -> Array:
    """b_d(n) = min(d·log n, q_d(1/n)): what one noise point's own centre can save, in units of σ̂².

    q_d(1/n) is the χ²_d quantile at tail probability 1/n (the largest squared
    distance of n noise points to their centre, in noise variances); it equals
    BIC's d·log n for d = 2 and exceeds it for d = 1, so the BIC form is kept for
    d ≤ 2 (static d).

    Args:
      n: the number of points (any shape; floored at 1, and at 2 for the quantile).
      d: dimension (static).
    """
    n = jnp.maximum(n, 1.0)
    bic = d * jnp.log(n)
    if d <= 2:
        return bic
    return jnp.minimum(bic, chi2_upper(d, 1.0 / jnp.maximum(n, 2.0)))


def centre_price(variance, max_within, n, d: int, price_scale) -> Array:
    """P = max(price_scale·(2/(π·d))·W_max, σ̂²·b_d(n)), in the units of S (module docstring).

    Args:
      variance: σ̂², the within-cluster variance per coordinate (`noise_variance`).
      max_within: W_max, the largest within-cluster sum of squares of a cluster of the round's
        k̂ + 1 row (weighted like S): what splitting that cluster saves if it is pure noise is
        (2/(π·d))·W_max.
      n: the number of points S stands for; d: dimension; price_scale: multiplier (0: no
        price, the floor included: with ``log_n_weight=0`` the prior on k is flat, as in
        the R package).
    """
    p = jnp.maximum(price_scale * (2.0 / (math.pi * d)) * max_within, variance * singleton_bound(n, d))
    return jnp.where(price_scale > 0, p, 0.0)


def prior_rate(lam, price, n, log_n_weight=1.0) -> Array:
    """η = λ·P + log_n_weight·log n: the rate of the prior on k (log q(k) = −η·k), in nats per centre."""
    return jnp.maximum(lam * price, 0.0) + log_n_weight * jnp.log(jnp.maximum(n, 1.0))


def quasi_posterior_energy(centers: Array, n_clusters, points: Array, point_mask: Array,
                           predicted_loss: Array, lambda2: Array, weight) -> Array:
    """S(c) = weight · Σ_valid ℓ(c, x_s) + (λ_{2,s}/2)·(ℓ(c, x_s) − ℓ(ĉ_s, x_s))² (dense, differentiable).

    Args:
      centers: (p, d); n_clusters: () active prefix.
      points: (H, d); point_mask: (H,) bool.
      predicted_loss: (H,) ℓ(ĉ_s, x_s).
      lambda2: (H,) λ_{2,s}.
      weight: scalar multiplying the sum (n_remembered / n_stored for a reservoir).
    """
    lc, _ = nearest_center(points, centers, center_mask(n_clusters, centers.shape[0]))
    terms = lc + 0.5 * lambda2 * (lc - predicted_loss) ** 2
    return weight * jnp.sum(jnp.where(point_mask, terms, 0.0))


@jax.custom_jvp
def _min_dist_block(acc: Array, cb: Array, points_t: Array) -> Array:
    """min(acc, ||x_h − c_j||²) over the slots j of cb (M, b, d) (+inf: inactive), acc (M, H).

    Its derivative (custom JVP, `_min_dist_block_jvp`) treats the +inf slots
    as absent, so it is finite (the plain rule gives inf·0 = NaN there); the
    value is computed by the fast path unchanged.
    """
    # Slot- and coordinate-unrolled running minimum: one fused elementwise pass over the
    # (M, H) plane per block (a (blk, M, H) table then a min over it was 2.7x slower at B=256).
    for j in range(cb.shape[1]):
        d2 = None
        for t in range(cb.shape[2]):
            diff = cb[:, j, t, None] - points_t[t][None, :]
            d2 = diff * diff if d2 is None else d2 + diff * diff
        acc = jnp.minimum(acc, d2)
    return acc


@_min_dist_block.defjvp
def _min_dist_block_jvp(primals, tangents):
    acc, cb, points_t = primals
    t_acc, t_cb, t_pts = tangents
    out = _min_dist_block(acc, cb, points_t)
    t_out = t_acc
    run = acc
    for j in range(cb.shape[1]):
        live = jnp.isfinite(cb[:, j, 0])[:, None]                      # (M, 1)
        d2 = dd2 = None
        for t in range(cb.shape[2]):
            c = jnp.where(live, cb[:, j, t, None], 0.0)
            dc = jnp.where(live, t_cb[:, j, t, None], 0.0)
            diff = c - points_t[t][None, :]
            ddiff = dc - t_pts[t][None, :]
            d2 = diff * diff if d2 is None else d2 + diff * diff
            dd2 = 2 * diff * ddiff if dd2 is None else dd2 + 2 * diff * ddiff
        better = live & (d2 < run)
        run = jnp.where(better, d2, run)
        t_out = jnp.where(better, dd2, t_out)
    return out, t_out


def energies(centers: Array, n_clusters: Array, points_t: Array, point_mask: Array,
             predicted_loss: Array, lambda2: Array, weight) -> Array:
    """S for a batch of M partitions at once (the chain's proposals), one call.

    Distances are computed for blocks of `ENERGY_BLOCK` slots, up to the
    block of the largest k in the batch (a loop with a dynamic trip count), so
    the cost is O(M·H·max k·d), not O(M·H·p·d).

    Args:
      centers: (M, p, d); n_clusters: (M,) int32.
      points_t: (d, H) stored points, transposed; point_mask: (H,) bool.
      predicted_loss, lambda2: (H,); weight: ().

    Returns:
      (M,) energies.
    """
    M, p, d = centers.shape
    blk = min(ENERGY_BLOCK, p)
    nb = -(-p // blk)
    # Inactive slots at +inf (their distances are +inf and never win): no mask in the loop.
    live = jnp.arange(p)[None, :] < n_clusters[:, None]
    cs = jnp.where(live[:, :, None], centers, jnp.inf)
    cs = jnp.concatenate([cs, jnp.full((M, nb * blk - p, d), jnp.inf, centers.dtype)], axis=1)

    def block(b, acc):
        return _min_dist_block(acc, lax.dynamic_slice_in_dim(cs, b * blk, blk, axis=1), points_t)

    n_blocks = (jnp.clip(jnp.max(n_clusters), 1, p) + blk - 1) // blk
    lc = fori_upto(n_blocks, nb, block, jnp.full((M, points_t.shape[1]), jnp.inf, centers.dtype))
    terms = lc + 0.5 * lambda2[None] * (lc - predicted_loss[None]) ** 2
    return weight * jnp.sum(jnp.where(point_mask[None], terms, 0.0), axis=1)


class LogTarget(BlockwiseLogDensity):
    """The round's log target ``(centers (M, p, d), k (M,)) -> −λ·S(c) + log π(c)`` (batched), callable.

    A `jaxstream.clustering.kernel.BlockwiseLogDensity`: besides the call it
    exposes the target block by block over centre slots, which
    `jaxstream.clustering.kernel.sample_chain` uses to score proposals whose
    centres are generated one block of slots at a time, never as an
    (M, p, d) tensor.
    """

    # Wide signature: the target's arrays and constants, the fields of a pytree.
    def __init__(self, points, point_mask, predicted_loss, lambda2, weight, lam, ball_center, ball_radius,
                 eta, count_labellings: bool = False):
        self.points_t = points.T
        self.point_mask, self.predicted_loss, self.lambda2 = point_mask, predicted_loss, lambda2
        self.weight, self.lam, self.eta = weight, lam, eta
        self.ball_center, self.ball_radius = ball_center, ball_radius
        self.count_labellings = count_labellings

    def __call__(self, centers: Array, k: Array) -> Array:
        e = energies(centers, k, self.points_t, self.point_mask, self.predicted_loss, self.lambda2, self.weight)
        lt = -self.lam * e + log_prior(centers, k, self.ball_center, self.ball_radius, self.eta)
        return lt + gammaln(k + 1.0) if self.count_labellings else lt

    def init_distances(self, m: int) -> Array:
        """(m, H) running minimum of squared distances, all +inf."""
        return jnp.full((m, self.points_t.shape[1]), jnp.inf, self.points_t.dtype)

    def add_centres(self, acc: Array, cb: Array) -> Array:
        """acc (m, H) lowered by the centres cb (m, b, d) (inactive slots at +inf)."""
        return _min_dist_block(acc, cb, self.points_t)

    def in_ball(self, cb: Array, active: Array) -> Array:
        """(m,) whether every active centre of cb (m, b, d) (active (m, b)) lies in the prior's ball."""
        r2 = jnp.sum((cb - self.ball_center) ** 2, axis=-1)
        return jnp.all(jnp.where(active, r2 <= self.ball_radius ** 2, True), axis=-1)

    def from_distances(self, acc: Array, inside: Array, k: Array) -> Array:
        """(m,) log target from the nearest-centre distances acc (m, H), the ball check and k."""
        terms = acc + 0.5 * self.lambda2[None] * (acc - self.predicted_loss[None]) ** 2
        e = self.weight * jnp.sum(jnp.where(self.point_mask[None], terms, 0.0), axis=1)
        d = self.points_t.shape[0]
        lp = jnp.where(inside, -k * (self.eta + log_ball_volume(self.ball_radius, d)), -jnp.inf)
        lt = -self.lam * e + lp
        return lt + gammaln(k + 1.0) if self.count_labellings else lt


# Wide signature: the target's arrays and constants, as `QuasiPosterior` holds them.
def log_target_fn(points: Array, point_mask: Array, predicted_loss: Array, lambda2: Array, weight,
                  lam, ball_center: Array, ball_radius, eta,
                  count_labellings: bool = False) -> LogTarget:
    """The round's log target ``(centers (M, p, d), k (M,)) -> −λ·S(c) + log π(c)`` (batched).

    Args: as `energies` (with points (H, d), not transposed) and `log_prior`;
      lam: λ of the round.

    Returns:
      A `LogTarget` (callable; also evaluable one block of centre slots at a time).
    """
    return LogTarget(points, point_mask, predicted_loss, lambda2, weight, lam, ball_center, ball_radius, eta,
                     count_labellings)
