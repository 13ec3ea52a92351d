"""PAC-Bayesian online clustering (PACBO): the online learner.

Li, Guedj & Loustau, "A quasi-Bayesian perspective to online clustering",
Electron. J. Stat. 12 (2018); the authors' R package PACBO 0.1.0.

PACBO summarises a stream by cluster centres whose number k̂ changes over
time (1 ≤ k̂ ≤ p = ``max_clusters``). After each observation the learner
holds the Gibbs quasi-posterior of `jaxstream.clustering.quasi_posterior`
over partitions and draws the next partition from it with one short
reversible-jump chain (`jaxstream.clustering.kernel`) over k̂ − 1, k̂ and
k̂ + 1 centres, proposed around warm-started k-means rows
(`jaxstream.clustering.lloyd.proposal_rows`). Lengths are measured in units
of the estimated noise scale σ̂, so with ``radius=None`` the learner is
equivariant under scale and shift of the data. Beside the partition, recent
points that no centre explains predict as provisional centres, and the
reservoir history forgets, or moves along, clusters whose points move
(`jaxstream.clustering.forgetting`).

This module provides `pacbo` (the `jaxstream.StreamLearner` factory, with
`PRESETS`: ``preset="paper"`` is the spec's and the R package's algorithm),
its functions `init`, `update` (one round), `predict` (stable cluster
labels, not slots), `loss`, `soft_loss`, `soft_assign`, `cluster_sizes`,
and `round_target` (a round's target and proposal family), `effective_count`
and `check_radius`.

How it works, in detail: the documentation's "How PACBO works" page
(docs/internals/pacbo.md). The sections that docstrings here cite ("module
docstring, steps 1–7", "Defaults", "Provisional centres", "Tracking") are
that page's; how to use the learner: docs/guides/pacbo.md.
"""
from __future__ import annotations

import functools
import math
from functools import lru_cache
from typing import Optional

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from .._caches import cached
from .. import _ops
from .._stats import chi2_upper
from .._checks import check_bytes_fit, check_capacity, check_point, check_points, is_concrete, tree_nbytes
from .._core import StreamLearner, cached_learner
from . import kernel as K
from .forgetting import forget_moved, track_moved
from ._readout import (_active, _nearest, cluster_sizes, effective_count, loss, predict, soft_assign,
                       soft_loss)
from ._target import RoundTarget, round_target
from .lloyd import nearest_center

from .types import ESTIMATES, HISTORY_POLICIES, Config, Info, Params, State, default_params

Array = jax.Array
PROVISIONAL_FREE_DOF = 2  # below this many residual points σ̂ is no scale: every recent point predicts
_LOG_SCALE_BOUNDS = (math.log(0.25), math.log(4.0))

__all__ = ["Config", "Params", "State", "Info", "default_params", "init", "update", "predict", "loss",
           "soft_loss", "soft_assign", "cluster_sizes", "round_target", "RoundTarget",
           "effective_count", "check_radius", "pacbo", "PRESETS", "HISTORY_POLICIES"]


def _cast_params(params: Params, dtype) -> Params:
    return Params(*(jnp.asarray(v, dtype) for v in params))


def _insert(key, state: State, x: Array, pred_loss: Array, policy: str) -> State:
    """Add one point to the history (reservoir or window)."""
    H = state.history.shape[0]
    n = state.n_seen + 1
    m = state.n_remembered + 1
    if policy == "reservoir":
        # Algorithm R over the remembered points; a free row (never used, or freed by
        # `forgetting`) takes the new point first. Without forgetting the free row is row n − 1
        # while n ≤ H, so this is the plain reservoir.
        free = ~state.history_mask
        j = jax.random.randint(key, (), 0, jnp.maximum(m, 1), dtype=jnp.int32)
        has_free = jnp.any(free)
        slot = jnp.where(has_free, jnp.argmax(free), j)
        store = has_free | (j < H)
    else:
        slot = (n - 1) % H
        store = jnp.asarray(True)
    slot = jnp.clip(slot, 0, H - 1)
    put = lambda buf, v: jnp.where(store, buf.at[slot].set(v), buf)
    mask = put(state.history_mask, True)
    return state._replace(history=put(state.history, x),
                          history_loss=put(state.history_loss, pred_loss),
                          history_index=put(state.history_index, n),
                          history_velocity=put(state.history_velocity, jnp.zeros_like(x)),
                          history_mask=mask,
                          n_stored=jnp.sum(mask).astype(jnp.int32),
                          n_seen=n.astype(jnp.int32), n_remembered=m.astype(jnp.int32))


def check_radius(xs, radius, name: str = "xs", origin=None) -> None:
    """Raise ValueError if a row of `xs` (n, d) lies farther than `radius` from `origin` (host side)."""
    xs = np.asarray(xs, np.float64).reshape(-1, np.shape(xs)[-1])
    o = 0.0 if origin is None else np.asarray(origin, np.float64)
    norms = np.linalg.norm(xs - o, axis=1)
    bad = np.flatnonzero(norms > float(radius) * (1 + 1e-6))
    if bad.size:
        raise ValueError(
            f"{name} has {bad.size} point(s) outside the radius R={float(radius):.6g} the learner "
            f"was built for (first at index {bad[0]}, norm {norms[bad[0]]:.6g}); PACBO assumes "
            "||x|| <= R: build the learner with a larger radius, or radius=None to learn it")


def init(key, x_init, params: Optional[Params] = None, config: Config = Config()) -> State:
    """Initial state: one centre (at the mean of ``x_init``, or the ball's centre), the points stored.

    Args:
      key: PRNG key (reservoir draws when ``x_init`` exceeds the history).
      x_init: (n0, d) initial points, n0 ≥ 0.
      params: `Params` (default `default_params()`: radius learned).
      config: static `Config`.

    Returns:
      A `State` with params cast to the dtype of ``x_init``.

    Raises:
      ValueError: with concrete inputs, a bad shape or non-finite ``x_init``;
        a fixed radius ≤ 0 or not finite; a point of ``x_init`` outside it;
        a state larger than the device's memory.
    """
    x_init = check_points(x_init, "x_init")
    params = _cast_params(default_params() if params is None else params, x_init.dtype)
    if is_concrete(params.radius) and not np.isnan(np.asarray(params.radius)):
        r = float(params.radius)
        if not (r > 0 and np.isfinite(r)):
            raise ValueError(f"radius must be a positive finite number (or None to learn it); got {r}")
        if is_concrete(x_init):
            check_radius(x_init, r, "x_init")
    check_bytes_fit(round_bytes(key, x_init, params, config),
                    f"PACBO's round (history_size={config.history_size}, max_clusters={config.max_clusters}, "
                    f"n_chains={config.n_chains}, d={x_init.shape[-1]}: its state in and out and its temporaries)",
                    "lower history_size")
    return _initial(key, x_init, params, config)._replace(params=params)  # the caller's leaves, as cast


def round_bytes(key, x_init, params: Params, config: Config) -> int:
    """Bytes one round needs: the state read and the state written (exact) and the round's
    temporaries, (64 + 2·p + 4·d + 24·n_chains) values per history row and 32·p·d·n_chains + 4096
    more (fitted to XLA:CPU's memory analysis; ``tests/test_nothing_silent.py`` checks it)."""
    state = tree_nbytes(jax.eval_shape(functools.partial(_initial, config=config), key, x_init, params))
    p, C, d = config.max_clusters, config.n_chains, x_init.shape[-1]
    temp = (64 + 2 * p + 4 * d + 24 * C) * config.history_size + 32 * p * d * C + 4096
    return 2 * state + temp * np.dtype(x_init.dtype).itemsize


# One program, not JAX's op-by-op dispatch (which compiled each operation on its first call).
@functools.partial(jax.jit, static_argnums=(3,))
def _initial(key, x_init, params: Params, config: Config) -> State:
    """`init`'s state after its checks: one centre, the points stored."""
    p, H = config.max_clusters, config.history_size
    n0, d = x_init.shape
    dtype = x_init.dtype
    learned = jnp.isnan(params.radius)
    mean = jnp.mean(x_init, axis=0) if n0 else jnp.zeros((d,), dtype)
    origin = jnp.where(learned, mean, jnp.zeros((d,), dtype))
    spread = jnp.max(jnp.linalg.norm(x_init - origin, axis=1)) if n0 else jnp.zeros((), dtype)
    radius = jnp.where(learned, spread, params.radius)
    k_probs = jnp.zeros((p,), dtype).at[0].set(1.0)
    A = config.provisional_size
    first = max(n0 - A, 0)  # the ring holds the last A initial points (row s mod A: x_s), none provisional
    rows = np.arange(first, n0) % A if A else np.zeros((0,), int)
    recent = jnp.zeros((A, d), dtype).at[rows].set(x_init[first:]) if A else jnp.zeros((0, d), dtype)
    recent_index = jnp.zeros((A,), jnp.int32).at[rows].set(jnp.arange(first + 1, n0 + 1, dtype=jnp.int32))
    state = State(centers=jnp.zeros((p, d), dtype).at[0].set(mean if n0 else origin),
                  n_clusters=jnp.asarray(1, jnp.int32),
                  ids=jnp.full((p,), -1, jnp.int32).at[0].set(0), next_id=jnp.asarray(1, jnp.int32),
                  history=jnp.zeros((H, d), dtype), history_loss=jnp.zeros((H,), dtype),
                  history_index=jnp.zeros((H,), jnp.int32), history_velocity=jnp.zeros((H, d), dtype),
                  history_mask=jnp.zeros((H,), bool),
                  n_stored=jnp.asarray(0, jnp.int32), n_seen=jnp.asarray(0, jnp.int32),
                  n_remembered=jnp.asarray(0, jnp.int32),
                  origin=origin, radius=radius, log_scale=jnp.log(params.proposal_scale),
                  k_probs=k_probs, recent=recent, recent_index=recent_index,
                  provisional=jnp.zeros((A,), bool), params=params)
    if n0 == 0:
        return state
    pred = jnp.sum((x_init - mean) ** 2, axis=1)
    return _store_initial(config.history_policy)(key, state, x_init, pred)


@lru_cache(maxsize=None)
def _store_initial(history_policy: str):
    """The initial points into the history, one jitted scan per policy (compiled once, not per call)."""
    def body(carry, inp):
        key, s = carry
        i, x, l = inp
        return (key, _insert(jax.random.fold_in(key, i), s, x, l, history_policy)), None

    @jax.jit
    def run(key, state, x_init, pred):
        return lax.scan(body, (key, state), (jnp.arange(x_init.shape[0]), x_init, pred))[0][1]

    return run


def _forget(state: State, recent: int, noise_sd, tracking: bool, born=None) -> tuple[State, Array]:
    """Apply `forgetting.track_moved` (or `forget_moved`) with ĉ_{t+1}; the forgotten rows' share of
    n_remembered goes. born: None or (p,) bool, the centres this round added (`track_moved`)."""
    history, velocity = state.history, state.history_velocity
    if tracking:
        mask, history, velocity, _ = track_moved(history, velocity, state.history_mask, state.history_index,
                                                 state.centers, state.n_clusters, state.params.drift_level,
                                                 recent, noise_sd ** 2, born)
    else:
        mask, _ = forget_moved(history, state.history_mask, state.history_index, state.centers,
                               state.n_clusters, state.params.drift_level, recent, noise_sd ** 2)
    n_forgotten = state.n_stored - jnp.sum(mask).astype(jnp.int32)
    n_stored = state.n_stored - n_forgotten
    # Each stored row stands for n_remembered / n_stored points of the stream (a reservoir sample).
    per_row = state.n_remembered.astype(state.centers.dtype) / jnp.maximum(state.n_stored, 1)
    gone = jnp.round(n_forgotten * per_row).astype(jnp.int32)
    n_rem = jnp.maximum(state.n_remembered - gone, n_stored).astype(jnp.int32)
    return state._replace(history=history, history_velocity=velocity, history_mask=mask, n_stored=n_stored,
                          n_remembered=n_rem), n_forgotten


def _provisional(state: State, x: Array, noise_sd, A: int) -> State:
    """x (the round's point, arrival index state.n_seen) into the ring, and which of the last A
    points the new partition leaves unexplained: squared distance to every active centre above
    the χ²_d quantile at ``provisional_level`` times σ², σ the round's noise scale."""
    if A == 0:
        return state
    d = state.centers.shape[1]
    slot = (state.n_seen - 1) % A
    recent = state.recent.at[slot].set(x)
    index = state.recent_index.at[slot].set(state.n_seen)
    far, _ = nearest_center(recent, state.centers, _active(state))
    q = chi2_upper(d, state.params.provisional_level)
    # No scale yet (module docstring): every ring point off a centre, unless provisional centres are off.
    no_scale = ((state.n_stored - state.n_clusters - 1 < PROVISIONAL_FREE_DOF)
                & (state.params.provisional_level > 0) & (far > 0))
    return state._replace(recent=recent, recent_index=index,
                          provisional=(index > 0) & ((far > q * noise_sd ** 2) | no_scale))


def _chains(key, chain0: K.ChainState, tgt: RoundTarget, config: Config):
    """``config.n_chains`` chains of ``config.n_steps`` steps from ``chain0``: (final states, step infos);
    with ``estimate="mean"`` the finals' centres are the chains' path means."""
    keys = jax.random.split(key, config.n_chains)
    if config.estimate == "mean":
        run = lambda k: K.sample_chain(k, chain0, tgt.logdensity_fn, tgt.family, config.n_steps, config.df,
                                       path_mean=True)
        finals, infos, means = jax.vmap(run)(keys)
        return finals._replace(centers=means), infos
    run = lambda k: K.sample_chain(k, chain0, tgt.logdensity_fn, tgt.family, config.n_steps, config.df)
    return jax.vmap(run)(keys)


def _combine(finals: K.ChainState, p: int) -> tuple[Array, Array]:
    """(k̂, ĉ (p, d)) from the chains' finals: k̂ the most frequent final k (ties: the smaller), ĉ the
    slot-wise mean of the estimates of the chains that end at k̂ (they share the round's rows, so
    their slots are aligned)."""
    counts_k = jnp.sum(finals.n_clusters[:, None] == finals.n_clusters[None, :], axis=1)
    best = jnp.max(counts_k)
    k_new = jnp.min(jnp.where(counts_k == best, finals.n_clusters, p + 1))
    sel = (finals.n_clusters == k_new).astype(finals.centers.dtype)
    return k_new, _ops.einsum("c,cpd->pd", sel, finals.centers) / jnp.sum(sel)


def _adapted_log_scale(log_scale: Array, infos, params: Params) -> Array:
    """The proposal scale's next log, moved towards the better accepted of the round's two scales.

    Acceptance of an independence sampler is not monotone in the scale, so a target-acceptance
    (Robbins–Monro) rule collapses the scale when the best acceptance is below the target. Each
    round proposes at two scales, exp(log_scale ∓ δ) (a fixed scale mixture, part of g), and
    log_scale moves towards the one whose proposals were accepted more often.
    """
    prob = infos.acceptance_prob.reshape(-1)
    up = infos.scale_index.reshape(-1) == 1
    a_up = jnp.sum(jnp.where(up, prob, 0.0)) / jnp.maximum(jnp.sum(up), 1)
    a_dn = jnp.sum(jnp.where(up, 0.0, prob)) / jnp.maximum(jnp.sum(~up), 1)
    step = jnp.clip((a_up - a_dn) / (a_up + a_dn + 1e-3), -1.0, 1.0) * jnp.log(params.scale_spread)
    return jnp.clip(log_scale + params.adapt_rate * step, *_LOG_SCALE_BOUNDS)


def update(key, state: State, x: Array, config: Config = Config()) -> tuple[State, Info]:
    """Learn one observation (module docstring, steps 1–7).

    Args:
      key: PRNG key of the round.
      state: `State`.
      x: (d,) observation.
      config: static `Config`.

    Returns:
      ``(new_state, Info)``.
    """
    history_policy = config.history_policy
    p, d = state.centers.shape
    check_point(x, d)
    x = jnp.asarray(x, state.centers.dtype)
    params = state.params
    part_loss, _, prov_loss = _nearest(state, x[None])
    part_loss = part_loss[0]
    pred_loss = jnp.minimum(part_loss, prov_loss[0])
    learned = jnp.isnan(params.radius)
    first = state.n_seen == 0
    origin = jnp.where(learned & first & (state.n_stored == 0), x, state.origin)
    dist = jnp.sqrt(jnp.sum((x - origin) ** 2))
    outside = ~learned & (dist > state.radius)
    radius = jnp.where(learned, jnp.maximum(state.radius, dist), state.radius)
    k_ins, k_chain = jax.random.split(key)
    # Before any point there is no partition to predict with: the first point's loss is measured
    # from the initial centre (the ball's centre) but enters the second-order term of S as 0.
    # The second-order term compares with the partition's own loss (provisional centres only
    # predict: the quasi-posterior is the same with or without them).
    hist_loss = jnp.where(first & (state.n_stored == 0), 0.0, part_loss)
    st = _insert(k_ins, state._replace(origin=origin, radius=radius), x, hist_loss, history_policy)
    tgt = round_target(st, config)
    finals, infos = _chains(k_chain, K.init(st.centers, st.n_clusters, tgt.logdensity_fn, tgt.family, config.df),
                            tgt, config)
    k_new, centers_new = _combine(finals, p)
    # One point so far (or all points equal): no spread to measure, so no λ;
    # the partition is that point (the limit of the quasi-posterior as λ grows).
    trivial = (effective_count(st, history_policy)[0] <= 1) | (st.radius <= 0)
    k_new = jnp.where(trivial, 1, k_new).astype(jnp.int32)
    centers_new = jnp.where(trivial, jnp.zeros_like(centers_new).at[0].set(x), centers_new)
    # Labels come with the k-means row of k̂_{t+1}: row k̂ keeps ĉ_t's labels, row k̂ + 1 gives its
    # new centre the unused label next_id, row k̂ − 1 drops the label of the centre it removed.
    row = jnp.argmax((tgt.family.n_clusters == k_new) & jnp.isfinite(tgt.family.log_weights))
    ids = tgt.row_ids[row]
    next_id = (st.next_id + jnp.any(ids == st.next_id)).astype(jnp.int32)
    dtype = x.dtype
    k_probs = jnp.mean((infos.n_clusters.reshape(-1)[:, None] == jnp.arange(1, p + 1)[None, :])
                       .astype(dtype), axis=0)
    acc = jnp.mean(infos.is_accepted.astype(dtype))
    log_scale = jnp.where(trivial, st.log_scale, _adapted_log_scale(st.log_scale, infos, params))
    new_state = st._replace(centers=centers_new, n_clusters=k_new, ids=ids, next_id=next_id,
                            log_scale=log_scale,
                            k_probs=k_probs)
    if history_policy == "reservoir":
        # A centre born this round has the label next_id had before it (row k̂ + 1's new centre).
        born = (ids == st.next_id) & (jnp.arange(p) < k_new)
        new_state, n_forgotten = _forget(new_state, config.recent_size, tgt.noise_sd, config.tracking, born)
    else:
        n_forgotten = jnp.zeros((), jnp.int32)
    new_state = _provisional(new_state, x, tgt.noise_sd, config.provisional_size)
    info = Info(loss=pred_loss, n_clusters=k_new, acceptance_rate=acc, k_probs=k_probs,
                proposal_scale=jnp.exp(st.log_scale), prior_rate=tgt.eta, radius=st.radius,
                outside_radius=outside, n_forgotten=n_forgotten,
                n_provisional=jnp.sum(new_state.provisional).astype(jnp.int32))
    return new_state, info


PRESETS = {
    # The spec and the R package PACBO 0.1.0 as far as this implementation's shape allows: the
    # prediction is one draw from the quasi-posterior (the chain's last state), λ_t in the data's
    # units (σ = 1) with the R package's online constant 2.5·coeff = 5, no cap on λ, a flat prior
    # on k (no price, no log n term), the three moves proposed with probability 1/3 each.
    # What stays ours: the k-means rows computed once per round (warm-started), the per-centre
    # Student-t scales and their adaptation between rounds, the learned radius unless one is given.
    "paper": dict(estimate="last", lambda_scale=5.0, lambda_cap=float("inf"), price_scale=0.0,
                  log_n_weight=0.0, noise_scale=1.0, noise_prior_points=float("inf"),
                  stay_prob=1.0 / 3.0, drift_level=0.0,
                  provisional_level=0.0, split_guard=False, tracking=False),
}
"""Named configurations of `pacbo` (``preset=``): keyword arguments that explicit ones override."""


# Wide signature: the factory's static options, each documented; numeric ones go to **param_overrides.
def pacbo(max_clusters: int = 50, history_size: int = 256, n_steps: int = 500, *, n_chains: int = 1,
          radius: Optional[float] = None, kmeans_iters: int = 5, history_policy: str = "reservoir",
          df: int = 3, estimate: Optional[str] = None, preset: Optional[str] = None,
          recent_size: Optional[int] = None, provisional_size: int = 8,
          split_guard: Optional[bool] = None, tracking: Optional[bool] = None, **param_overrides) -> StreamLearner:
    """PACBO online clustering as a `jaxstream.StreamLearner`.

    Args:
      max_clusters: p, the largest number of centres (static; R package ``K_max`` = 50).
      history_size: H, capacity of the history (static). A round costs
        O(n_chains·n_steps·H·k̂·d); with H ≥ the stream's length S is exact.
      n_steps: N, MH steps per chain and round (static; R package 500).
      n_chains: chains per round, vmapped (static; module docstring for how
        they are combined).
      radius: R, a bound on ||x_t|| (None: learned from the stream, never raises).
      kmeans_iters: Lloyd iterations of each k-means row (static).
      history_policy: ``"reservoir"`` or ``"window"``.
      df: degrees of freedom of the Student-t proposal (static int).
      estimate: the partition kept after a round, which predicts the next
        point (static): ``"mean"`` (default; None: the preset's, else "mean"), the chain's time average of the
        centres over its steps at its final k̂ (the quasi-posterior mean given
        k̂); ``"last"``, the chain's last state (the spec and the R package: a
        draw from the quasi-posterior, which adds about d/(2λ·n_j) per
        coordinate to the expected loss of each point).
      preset: None, or a name in `PRESETS` (``"paper"``: the spec's and the R
        package's algorithm); explicit arguments override the preset's.
      recent_size: m, the points a cluster keeps when the drift test finds it
        moving (static, 2 ≤ m ≤ H; None: min(6, H); `jaxstream.clustering.forgetting`).
      provisional_size: A ≥ 0, the last points that can predict as provisional
        centres (static; module docstring, "Provisional centres"; 0: none).
      split_guard: price a new centre and cap λ with the k̂ row's noise level while the k̂ + 1
        row's extra centre may split noise (static; None: the preset's, else True;
        `jaxstream.clustering.quasi_posterior`, "Split guard"). False: the noise level of
        the k̂ + 1 row only, as before 2026-11-29.
      tracking: a cluster the drift test finds moving keeps its points, which
        follow it at its estimated velocity (static;
        `jaxstream.clustering.forgetting.track_moved`; None: the preset's,
        else True, the default since 0.4.5; the ``"paper"`` preset forgets
        nothing). False: it keeps only its ``recent_size`` newest
        (`forget_moved`), the default before 0.4.5 (module docstring,
        "Tracking"; a checkpoint written under that default resumes under
        ``tracking=False``).
      **param_overrides: other `default_params` keywords (lambda_scale, price_scale, …;
        ``noise_scale=σ₀``, a guess of the noise sd in the data's units, settles the first
        rounds: see `Params`).
        Valid ranges (checked when concrete, here and by ``init(..., params)``;
        ``jaxstream._checks.PARAM_RANGES["pacbo"]``): radius and noise_scale
        NaN/None or > 0; lambda_scale, lambda2_scale, prior_scale,
        proposal_scale > 0; price_scale, log_n_weight, adapt_rate ≥ 0;
        scale_spread ≥ 1; all finite, but noise_prior_points ≥ 0 may be inf;
        lambda_power and stay_prob in [0, 1]; drift_level and provisional_level in [0, 1).

    Returns:
      ``StreamLearner(init, update, predict, loss, params, config)``.
    """
    if preset is not None:
        if preset not in PRESETS:
            raise ValueError(f"preset must be one of {sorted(PRESETS)} or None; got {preset!r}")
        base = dict(PRESETS[preset])
        if estimate is None:
            estimate = base.get("estimate")
        if split_guard is None:
            split_guard = base.get("split_guard")
        if tracking is None:
            tracking = base.get("tracking")
        for key in ("estimate", "split_guard", "tracking"):
            base.pop(key, None)
        param_overrides = dict(base, **param_overrides)
    defaults = Config._field_defaults  # one place for the defaults: the factory's are Config's
    estimate = defaults["estimate"] if estimate is None else estimate
    split_guard = defaults["split_guard"] if split_guard is None else split_guard
    tracking = defaults["tracking"] if tracking is None else tracking
    if not isinstance(split_guard, (bool, np.bool_)):
        raise TypeError(f"split_guard must be a bool; got {split_guard!r}")
    p = check_capacity(max_clusters, "max_clusters")
    H = check_capacity(history_size, "history_size")
    N = check_capacity(n_steps, "n_steps")
    C = check_capacity(n_chains, "n_chains")
    iters = check_capacity(kmeans_iters, "kmeans_iters", minimum=0)
    df = check_capacity(df, "df")
    if history_policy not in HISTORY_POLICIES:
        raise ValueError(f"history_policy must be one of {HISTORY_POLICIES}; got {history_policy!r}")
    if estimate not in ESTIMATES:
        raise ValueError(f"estimate must be one of {ESTIMATES}; got {estimate!r}")
    m = min(6, H) if recent_size is None else check_capacity(recent_size, "recent_size", minimum=2)
    if m > H:
        raise ValueError(f"recent_size must be at most history_size={H}; got {m}")
    A = check_capacity(provisional_size, "provisional_size", minimum=0)
    if not isinstance(tracking, (bool, np.bool_)):
        raise TypeError(f"tracking must be a bool; got {tracking!r}")
    config = Config(p, H, N, C, iters, history_policy, df, estimate, m, A, bool(split_guard), bool(tracking))
    return cached_learner(_build, config, default_params, dict(param_overrides, radius=radius))


@cached()
def _update_kernel(config: Config):
    """``update(key, state, x)`` of a configuration, built once (equal configurations share compiled code)."""
    def update_(key, state, x):
        return update(key, state, x, config)
    return update_


def _build(config: Config, defaults: Params) -> StreamLearner:
    def init_(key, x_init, params=None):
        return init(key, x_init, defaults if params is None else params, config)

    return StreamLearner(init_, _update_kernel(config), predict, loss, defaults, config)
