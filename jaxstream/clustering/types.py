"""PACBO's static configuration and its pytrees: `Config`, `Params`, `State`, `Info`."""
from __future__ import annotations

import abc
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

Array = jax.Array

#: The values of ``history_policy``: a uniform reservoir of the past, or the last points.
HISTORY_POLICIES = ("reservoir", "window")
ESTIMATES = ("mean", "last")

__all__ = ["Config", "Params", "default_params", "State", "Info", "HISTORY_POLICIES", "ESTIMATES"]


class Config(NamedTuple):
    """Static configuration of PACBO (capacities and variant choices; hashable).

    Attributes:
      max_clusters: p, the largest number of centres (R package ``K_max`` = 50).
      history_size: H, capacity of the history.
      n_steps: N, MH steps per chain and round (R package 500).
      n_chains: chains per round (vmapped).
      kmeans_iters: Lloyd iterations of each k-means row.
      history_policy: ``"reservoir"`` or ``"window"`` (see `jaxstream.clustering.pacbo`).
      df: degrees of freedom of the Student-t proposal.
      estimate: ``"mean"`` or ``"last"`` (see `jaxstream.pacbo`).
      recent_size: m, the newest points of a cluster that the drift test
        compares with its older ones (`jaxstream.clustering.forgetting`).
      provisional_size: A, the last points kept to predict with while the
        partition cannot explain them (provisional centres,
        `jaxstream.clustering.pacbo` "Provisional centres"; 0: none).
      split_guard: price a centre and cap λ with the k̂ row's noise level while
        the k̂ + 1 row's extra centre may split noise
        (`jaxstream.clustering.quasi_posterior`, "Split guard").
      tracking: a moving cluster's remembered points follow it (a velocity
        per point, `jaxstream.clustering.forgetting.track_moved`; the
        default, as in `jaxstream.pacbo`); False: it keeps only its m newest
        (`forget_moved`).

    The defaults are `jaxstream.pacbo`'s, so the module's `init`/`update`
    called with ``Config()`` run the same algorithm as ``pacbo()``.
    """

    max_clusters: int = 50
    history_size: int = 256
    n_steps: int = 500
    n_chains: int = 1
    kmeans_iters: int = 5
    history_policy: str = "reservoir"
    df: int = 3
    estimate: str = "mean"
    recent_size: int = 6
    provisional_size: int = 8
    split_guard: bool = True
    tracking: bool = True

    name = "pacbo"


class Params(NamedTuple):
    """Numeric hyper-parameters (scalars; vmappable).

    Attributes:
      radius: R, a bound on ||x_t|| (ball centred at the origin); NaN: learned
        from the stream (module docstring).
      lambda_scale: λ_n = lambda_scale·(d+2)/(R·σ·max(n−1,1)^lambda_power); 10
        (the R package's online mode is 5 = 2.5·coeff: ``preset="paper"``; chosen
        on tuning streams, see `jaxstream.clustering.pacbo` "Defaults").
      lambda_power: 0.5 (theory: λ ∝ 1/√T).
      lambda2_scale: λ_{2,s} = lambda2_scale·(d+2)/(√s·(prior_scale·R)^4) (R package: 1).
      prior_scale: the prior ball's radius is prior_scale·R (R package: 1.5).
      price_scale: a centre costs price_scale × the saving expected from
        splitting the widest cluster of the k̂ + 1 row if it were pure noise
        (`quasi_posterior`; 2; 0: no price at all).
      log_n_weight: the prior rate adds log_n_weight·log n nats per centre
        (the odds of an extra empty centre are at most n^−log_n_weight; 1/2).
      noise_scale: σ₀, a guess of the groups' noise standard deviation per
        coordinate, in the data's units; NaN (default): none, σ̂ is the
        within-cluster standard deviation estimated each round from the data
        alone, which makes the learner equivariant under scale and shift. σ
        (the unit of length of λ ∝ 1/(R·σ), of the price and of the tests)
        is then ``noise_prior_points``-weighted between σ₀ and the data
        (`quasi_posterior.pooled_noise_variance`). In the first rounds the
        data cannot tell one group's spread from two groups, and a guess
        settles it (`benchmarks/README.md`). On held-out streams a guess half
        the true sd never raised the loss; twice the true sd raised it on four
        families of five, by 3–21 %: when unsure, guess low.
      noise_prior_points: ν₀ ≥ 0, how many points' worth of residuals the
        guess σ₀ counts as against the data's (10); inf: σ = σ₀ exactly (the
        spec's λ in the data's units with σ₀ = 1, the paper's preset); 0: σ₀
        only where the data have no spread yet. Unused without `noise_scale`.
      proposal_scale: initial multiplier of the per-centre proposal scales (1).
      scale_spread: each round proposes at the scales exp(log_scale)·spread^{∓1} (1.5).
      adapt_rate: step of the adaptation of log_scale between rounds, in units
        of log(scale_spread) (1; 0 = off).
      stay_prob: probability that a proposal comes from the k̂ row (the k̂ ± 1
        rows share the rest; 1/2).
      lambda_cap: λ_t is at most lambda_cap/(2σ²) (σ: `noise_scale` or σ̂), the
        temperature at which exp(−λ·S) is the Gaussian likelihood of noise σ;
        inf: no cap (the spec and the R package). See `quasi_posterior`.
      drift_level: level of the per-cluster drift test (reservoir history
        only): a cluster whose newest points moved away from its older ones
        at this level forgets the older ones (`jaxstream.clustering.forgetting`);
        0: never (the plain reservoir).
      provisional_level: tail probability of χ²_d below which one of the last
        ``provisional_size`` points, unexplained by the partition (its squared
        distance to every centre above the χ²_d quantile times σ̂²), predicts
        as a provisional centre (`jaxstream.clustering.pacbo`; 1e-3; 0: never).
    """

    radius: Array
    lambda_scale: Array
    lambda_power: Array
    lambda2_scale: Array
    prior_scale: Array
    price_scale: Array
    log_n_weight: Array
    noise_scale: Array
    noise_prior_points: Array
    proposal_scale: Array
    scale_spread: Array
    adapt_rate: Array
    stay_prob: Array
    lambda_cap: Array
    drift_level: Array
    provisional_level: Array


# Wide signature: one keyword per hyper-parameter of `Params`.
def default_params(radius: Optional[float] = None, *, lambda_scale: float = 10.0,
                   lambda_power: float = 0.5, lambda2_scale: float = 1.0, prior_scale: float = 1.5,
                   price_scale: float = 2.0, log_n_weight: float = 0.5,
                   noise_scale: Optional[float] = None, noise_prior_points: float = 10.0,
                   proposal_scale: float = 1.0,
                   scale_spread: float = 1.5, adapt_rate: float = 1.0,
                   stay_prob: float = 0.5, lambda_cap: float = 1.0,
                   drift_level: float = 3e-3, provisional_level: float = 1e-3) -> Params:
    """Default numeric hyper-parameters (see `Params`); ``radius=None`` learns R from the stream,
    ``noise_scale=None`` the noise scale σ̂."""
    r = float("nan") if radius is None else radius
    sig = float("nan") if noise_scale is None else noise_scale
    vals = (r, lambda_scale, lambda_power, lambda2_scale, prior_scale, price_scale, log_n_weight, sig,
            noise_prior_points, proposal_scale,
            scale_spread, adapt_rate, stay_prob, lambda_cap, drift_level, provisional_level)
    return Params(*(jnp.asarray(v, dtype=jnp.zeros(()).dtype) for v in vals))


class State(NamedTuple):
    """PACBO learner state (p = ``max_clusters``, H = ``history_size``).

    Attributes:
      centers: (p, d) centre slots; the first `n_clusters` are active (zeros after).
      n_clusters: () int32 k̂ in 1..p.
      ids: (p,) int32 stable label of each active slot (−1 for inactive slots).
      next_id: () int32 the next unused label.
      history: (H, d) stored points (rows where `history_mask` is set).
      history_loss: (H,) ℓ(ĉ_s, x_s) of the partition predicted for each point.
      history_index: (H,) int32 arrival index s ≥ 1.
      history_velocity: (H, d) how far each stored point moves per round (the
        velocity of the cluster it belongs to; zeros unless ``Config.tracking``
        found its cluster moving).
      history_mask: (H,) bool, rows holding remembered points.
      n_stored: () int32 rows set in `history_mask`; n_seen: () int32 points seen.
      n_remembered: () int32 points of the stream the history stands for
        (n_seen until a cluster forgets, `jaxstream.clustering.forgetting`).
      origin: (d,) centre of the prior ball.
      radius: () R in use (fixed, or learned: max ||x_s − origin||).
      log_scale: () log multiplier of the proposal scales (adapted between rounds).
      k_probs: (p,) P(k = j+1) estimated by the last round's chains.
      recent: (A, d) the last A = ``provisional_size`` points (a ring; row s mod A holds x_s).
      recent_index: (A,) int32 arrival index of each row (0: empty).
      provisional: (A,) bool, rows the partition does not explain: they
        predict as provisional centres (`loss`, `predict`).
      params: `Params`.
    """

    centers: Array
    n_clusters: Array
    ids: Array
    next_id: Array
    history: Array
    history_loss: Array
    history_index: Array
    history_velocity: Array
    history_mask: Array
    n_stored: Array
    n_seen: Array
    n_remembered: Array
    origin: Array
    radius: Array
    log_scale: Array
    k_probs: Array
    recent: Array
    recent_index: Array
    provisional: Array
    params: Params


class Info(NamedTuple):
    """What `update` reports about one round.

    Attributes:
      loss: prequential loss of the prediction before learning x_t: ℓ(ĉ_t, x_t),
        the distance to the partition's centres and its provisional ones (`pacbo.loss`).
      n_clusters: k̂ after the round (the partition that predicts x_{t+1}).
      acceptance_rate: share of the round's MH proposals accepted (all chains).
      k_probs: (p,) P(k) over the round's chains and steps.
      proposal_scale: the multiplier exp(log_scale) the round used.
      prior_rate: η_t, log q(k) = −η_t·k.
      radius: R_t used by the round.
      outside_radius: ||x_t − origin|| > R (fixed radius only; see module docstring).
      n_forgotten: () int32 stored points forgotten after the round (drift test).
      n_provisional: () int32 provisional centres after the round.
    """

    loss: Array
    n_clusters: Array
    acceptance_rate: Array
    k_probs: Array
    proposal_scale: Array
    prior_rate: Array
    radius: Array
    outside_radius: Array
    n_forgotten: Array
    n_provisional: Array


class BlockwiseLogDensity(abc.ABC):
    """A log target over (k, centres) that can also be scored one block of centre slots at a time.

    `sample_chain` scores a subclass's proposals block by block (never an
    (M, p, d) tensor): it starts from `init_distances`, folds each block of
    centres in with `add_centres` and `in_ball`, and ends with
    `from_distances`. The result must equal ``self(centers, k)``.
    `jaxstream.clustering.quasi_posterior.LogTarget` is PACBO's.
    """

    @abc.abstractmethod
    def __call__(self, centers: Array, k: Array) -> Array:
        """(M,) log target of centers (M, p, d) with k (M,) active slots."""

    @abc.abstractmethod
    def init_distances(self, m: int) -> Array:
        """The running summary of m proposals before any centre (e.g. (m, H) of +inf)."""

    @abc.abstractmethod
    def add_centres(self, acc: Array, cb: Array) -> Array:
        """acc updated with a block of centres cb (m, b, d) (inactive slots at +inf)."""

    @abc.abstractmethod
    def in_ball(self, cb: Array, active: Array) -> Array:
        """(m,) whether every active centre of cb (m, b, d) (active (m, b)) is in the prior's support."""

    @abc.abstractmethod
    def from_distances(self, acc: Array, inside: Array, k: Array) -> Array:
        """(m,) log target from the running summary acc, the support check and k (m,)."""
