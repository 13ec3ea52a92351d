"""A PACBO round's target: the Gibbs quasi-posterior and the proposal family its chain runs on.

Re-exported by `jaxstream.clustering.pacbo`.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from . import kernel as K
from ._readout import effective_count
from .lloyd import proposal_rows
from .quasi_posterior import (centre_price, guarded_noise_variance, lambda2_schedule, lambda_schedule,
                              log_target_fn, noise_dof, noise_variance, pooled_noise_variance, prior_rate)
from .types import Config, State

Array = jax.Array


class RoundTarget(NamedTuple):
    """A round's target and proposal family, fixed for its whole chain.

    Attributes:
      logdensity_fn: ``(centers (M, p, d), k (M,)) -> (M,)`` log target −λ·S + log π.
      family: `jaxstream.clustering.kernel.ProposalFamily` (rows k̂−1, k̂, k̂+1).
      row_ids: (3, p) int32 labels of each row's slots.
      lam: λ of the round; eta: prior rate η; price: P (units of S).
      noise_sd: σ used in λ (σ̂, pooled with the guess `Params.noise_scale` if any).
      price_noise_sd: σ of the price and λ's cap: ``noise_sd``, or the k̂ row's
        noise level under the split guard (`quasi_posterior.guarded_noise_variance`).
    """

    logdensity_fn: K.LogDensityFn
    family: K.ProposalFamily
    row_ids: Array
    lam: Array
    eta: Array
    price: Array
    noise_sd: Array
    price_noise_sd: Array


def round_target(state: State, config: Config = Config()) -> RoundTarget:
    """The round's quasi-posterior and proposal family (call after the new point is stored)."""
    history_policy, kmeans_iters = config.history_policy, config.kmeans_iters
    p, d = state.centers.shape
    params = state.params
    pm = state.history_mask
    n_eff, weight = effective_count(state, history_policy)
    dtype = state.centers.dtype
    n_f = n_eff.astype(dtype)
    R = jnp.where(state.radius > 0, state.radius, 1.0)
    rows = proposal_rows(state.history, pm, state.centers, state.n_clusters, state.ids, state.next_id,
                         kmeans_iters)
    k_rows = rows.n_clusters.astype(dtype)
    var = noise_variance(weight * rows.within_ss[2], k_rows[2], weight * rows.within_ss[1], k_rows[1], n_f, d)
    # With a guess σ₀ (`Params.noise_scale`), σ² pools it with σ̂² (ν₀ = inf: σ₀ exactly).
    var = pooled_noise_variance(var, noise_dof(n_f, k_rows[2], k_rows[1]), params.noise_scale,
                                params.noise_prior_points)
    # σ̂ = 0 (repeated points) or undefined (one point; `update` then skips the chain): floors in R's units.
    sigma = jnp.sqrt(jnp.where(jnp.isnan(var), R ** 2, jnp.maximum(var, (1e-6 * R) ** 2)))
    sigma = jnp.where(jnp.isnan(params.noise_scale) | ~jnp.isinf(params.noise_prior_points), sigma,
                      params.noise_scale)
    lam = lambda_schedule(params.lambda_scale, params.lambda_power, R, n_eff, d, sigma)
    # The price and the cap read the k̂ row's noise level while the k̂ + 1 row may split noise
    # (quasi_posterior's "Split guard"); λ itself, λ_2 and the proposals keep σ.
    sig2_price = sigma ** 2
    if config.split_guard:
        w_k = weight * rows.within_ss[1]
        var_k = noise_variance(w_k, k_rows[1], w_k, k_rows[1], n_f, d)  # the k̂ row's, NaN without spread
        pooled_k = pooled_noise_variance(var_k, noise_dof(n_f, k_rows[1], k_rows[1]), params.noise_scale,
                                         params.noise_prior_points)
        var_k = jnp.where(jnp.isnan(var_k), jnp.nan, pooled_k)
        sig2_price = guarded_noise_variance(sig2_price, var_k, n_f, d)
    # No cap (lambda_cap = inf) must not reach the derivative: inf / σ² has an infinite tangent,
    # and min's rule multiplies the unselected tangent by 0 (NaN).
    capped = jnp.isfinite(params.lambda_cap)
    lam = jnp.where(capped, jnp.minimum(lam, jnp.where(capped, params.lambda_cap, 1.0) / (2.0 * sig2_price)), lam)
    lam2 = lambda2_schedule(params.lambda2_scale, params.prior_scale, R, state.history_index, d, sigma)
    ball = params.prior_scale * R
    w_max = weight * jnp.where(rows.valid[2], rows.max_within[2], rows.max_within[1])
    price = centre_price(sig2_price, w_max, n_f, d, params.price_scale)
    eta = prior_rate(lam, price, n_f, params.log_n_weight)
    # At most as many centres as points: the k̂ + 1 row only while k̂ + 1 ≤ n. (Allowing k̂ + 1 = n,
    # a centre on each point, lets k̂ reach k one round earlier on a short stream: four groups,
    # T = 200, 10 seeds: rounds 2-10 cost 152 instead of 160, k̂_T and the ramp's |k̂ − k| unchanged.)
    # Under "window" n stays at H once the window is full, so k̂ = n would leave σ̂² no degrees of
    # freedom in every later round (it would fall back to R): there, fewer centres than points.
    room = n_f if history_policy == "reservoir" else n_f - 1
    valid = rows.valid & ((jnp.arange(3) < 2) | (k_rows[2] <= room))
    n_moves = jnp.sum(valid) - 1
    w_move = (1.0 - params.stay_prob) / jnp.maximum(n_moves, 1).astype(lam.dtype)
    w = jnp.where(jnp.arange(3) == 1, jnp.where(n_moves > 0, params.stay_prob, 1.0), w_move)
    log_w = jnp.where(valid, jnp.log(w), -jnp.inf)
    scales = jnp.exp(state.log_scale) / jnp.sqrt(2.0 * lam * jnp.maximum(weight * rows.counts, 1.0))
    delta = jnp.log(params.scale_spread)
    family = K.ProposalFamily(rows.n_clusters, log_w, rows.centers, scales,
                              jnp.exp(jnp.stack([-delta, delta])))
    fn = log_target_fn(state.history, pm, state.history_loss, lam2, weight, lam, state.origin, ball, eta,
                       count_labellings=True)
    return RoundTarget(fn, family, rows.ids, lam, eta, price, sigma, jnp.sqrt(sig2_price))
