"""Derivatives of stream losses: pathwise, and of the expected loss by Gaussian smoothing.

* **Pathwise.** `stream_loss` is the total prequential loss of one stream, a
  pure function of the data and the params. The key fixes every discrete
  choice of the learner, so the loss is piecewise smooth, and ``jax.grad`` /
  ``jax.jvp`` of it give its derivative almost everywhere with respect to:

  - slpc: the data and ``delta`` (the vertices stay on their lattice indices);
  - PACBO: the data, the centres and ``proposal_scale``;
  - landmark MDS: the data (and ε, the embedding).

  Loops with data-dependent trip counts are traced in their static form
  (`jaxstream.static_trip_counts`), which reverse mode differentiates.
  A hyper-parameter that only enters a comparison or an argmin (slpc's
  ``h_scale``, ``length_scale``, ``z_scale``, ``epsilon``; PACBO's
  temperatures in the accept step; the landmark radius) has derivative zero
  almost everywhere.
* **Expected loss.** ``J_σ(θ) = E_z E[L(exp(θ + σz))]``, θ the logs of
  positive hyper-parameters and z ~ N(0, I), is smooth even where L is
  piecewise constant. `smoothed_grad` estimates ∇J_σ (not ∇J) by antithetic
  pairs ``(L(θ + σz) − L(θ − σz))·z/(2σ)``, both members on the same stream
  with the same key, all runs one vmapped call. `expected_loss` is J_σ with
  that estimate as its gradient (a custom VJP); `tune` descends it with optax.
* `refine_embedding` lowers an embedding's stress by gradient descent.
"""
from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp

from ._caches import cached
from ._checks import PARAM_RANGES
from ._core import StreamLearner, _scan_stream, _trace_loss
from ._loops import static_trip_counts

Array = jax.Array

__all__ = ["stream_loss", "size_penalty", "smoothed_grad", "gaussian_smoothing_grad", "GradEstimate", "tune", "TuneResult",
           "refine_embedding", "RefineEmbeddingResult", "log_bounds",
           "expected_loss"]


def stream_loss(learner: StreamLearner, key, xs: Array, params=None, *, n_init: int = 20,
                reverse_mode: bool = True, penalty: Callable | None = None) -> Array:
    """Total prequential loss of one stream: init on ``xs[:n_init]``, learn the rest.

    A pure function of ``xs`` (T, d) and ``params`` (the learner's params
    pytree), jit-, vmap- and differentiable (``jax.grad`` and ``jax.jvp``;
    see the module docstring for which inputs carry a derivative). Rows must
    be finite (no host-side checks run here).

    Args:
      learner: a `StreamLearner`.
      key: PRNG key (the same key as `run_stream`'s).
      xs: (T, d) stream, T > n_init.
      params: the learner's params pytree (default ``learner.params``).
      n_init: rows given to ``init``.
      reverse_mode: trace the learner's loops with data-dependent trip counts
        in their static form (`jaxstream._loops.static_trip_counts`), which
        ``jax.grad`` can differentiate. Same values either way; False is
        faster for forward mode and under `vmap`, where the static form runs
        every iteration of those loops.
      penalty: optional ``penalty(final_state) -> ()`` added to the loss: a
        price on the summary itself, in the loss's units (e.g. slpc's
        `size_penalty`), so that a tuner cannot buy loss with a folded,
        many-segment curve.

    Returns:
      () the sum over rounds t >= n_init of the loss of the summary before
      x_t (plus ``penalty`` of the final state).
    """
    if reverse_mode:
        with static_trip_counts():
            return stream_loss(learner, key, xs, params, n_init=n_init, reverse_mode=False, penalty=penalty)
    params = learner.params if params is None else params
    state = learner.init(key, xs[:n_init], params)
    final, losses = _scan_stream(learner.update, key, xs[n_init:], state, None, _trace_loss, 0, all_valid=True)
    total = jnp.sum(losses)
    return total if penalty is None else total + penalty(final)


class size_penalty(NamedTuple):
    """A price on an slpc curve's size for `stream_loss`, `smoothed_grad` and `tune`.

    Called on a final state it returns ``per_segment·K + per_length·ℓ`` (K
    segments, length ℓ in the data's units). A tuner that minimises the
    prequential loss alone buys loss with segments: folds through the band of
    points predict the next point well and misdraw the data. The loss is a
    sum of squared distances over the stream, so the natural unit of
    ``per_segment`` is a few noise variances times log T (BIC's price of a
    vertex), and of ``per_length`` the noise variance times the points per
    unit of length. Equal arguments give equal (hashable) penalties, so
    `smoothed_grad` compiles once for them.

    Attributes:
      per_segment: price of one segment (the loss's units).
      per_length: price of one unit of length (the loss's units per data unit).
    """

    per_segment: float = 0.0
    per_length: float = 0.0

    def __call__(self, state) -> Array:
        from .geometry import polyline_length
        K = (state.n_vertices - 1).astype(state.scale.dtype)
        return self.per_segment * K + self.per_length * polyline_length(state.vertices, state.n_vertices)


class GradEstimate(NamedTuple):
    """An estimate of ∇J_σ(θ) with its standard errors.

    Attributes:
      grad: (m,) the mean over pairs.
      se: (m,) its standard errors (per coordinate, sd over pairs / sqrt(n_pairs)).
      value: () the mean loss over both members of every pair (≈ J_σ(θ)).
      value_se: () its standard error (pair means).
      pair_values: (n_pairs,) each pair's mean loss, for paired comparisons
        of two estimates made with the same key (common random numbers).
    """

    grad: Array
    se: Array
    value: Array
    value_se: Array
    pair_values: Array


def gaussian_smoothing_grad(f: Callable, theta: Array, key, *, sigma: float, n_pairs: int) -> GradEstimate:
    """Antithetic Gaussian-smoothing estimate of ∇_θ E_z[f(θ + σz, key_i)].

    ``f(theta, key) -> ()`` is evaluated with `jax.vmap` on 2·n_pairs points;
    pair i uses z_i and the key ``fold_in(key, i)`` in both members (common
    random numbers). Unbiased for the smoothed objective's gradient.

    Args:
      f: ``(theta (m,), key) -> ()``.
      theta: (m,) point.
      key: PRNG key.
      sigma: smoothing scale σ > 0.
      n_pairs: number of antithetic pairs (static).
    """
    theta = jnp.asarray(theta)
    kz, kf = jax.random.split(key)
    z = jax.random.normal(kz, (n_pairs,) + theta.shape, theta.dtype)
    keys = jax.vmap(lambda i: jax.random.fold_in(kf, i))(jnp.arange(n_pairs))
    th = jnp.concatenate([theta + sigma * z, theta - sigma * z])
    vals = jax.vmap(f)(th, jnp.concatenate([keys, keys]))
    lp, lm = vals[:n_pairs], vals[n_pairs:]
    g = ((lp - lm) / (2.0 * sigma))[:, None] * z
    pair_mean = 0.5 * (lp + lm)
    sd = lambda a: jnp.std(a, axis=0, ddof=1) / jnp.sqrt(n_pairs)
    return GradEstimate(jnp.mean(g, 0), sd(g), jnp.mean(pair_mean), sd(pair_mean), pair_mean)


def _with_log_params(params, names: Sequence[str], log_theta: Array, bounds=None):
    """Params with ``names`` set to exp(log_theta), clipped to their valid ranges (`log_bounds`)."""
    if bounds is not None:
        log_theta = jnp.clip(log_theta, jnp.asarray([b[0] for b in bounds], log_theta.dtype),
                             jnp.asarray([b[1] for b in bounds], log_theta.dtype))
    return params._replace(**{n: jnp.exp(log_theta[i]).astype(getattr(params, n).dtype)
                              for i, n in enumerate(names)})


def log_bounds(learner: StreamLearner, names: Sequence[str]) -> tuple:
    """((log lo, log hi), ...) per name: the logs of each parameter's valid range
    (`jaxstream._checks.PARAM_RANGES`; (−inf, inf) where the learner has none)."""
    ranges = PARAM_RANGES.get(getattr(getattr(learner, "config", None), "name", None), {})
    out = []
    for n in names:
        r = ranges.get(n)
        lo = math.log(r.lo) if r is not None and r.lo > 0 else -math.inf
        hi = math.log(r.hi) if r is not None and math.isfinite(r.hi) else math.inf
        out.append((lo, hi))
    return tuple(out)


# Wide signature: a public driver's keyword options, each documented.
def smoothed_grad(learner: StreamLearner, key, streams: Array, params, names: tuple, log_theta: Array, *,
                  sigma: float = 0.2, n_pairs: int = 16, n_init: int = 20,
                  penalty: Callable | None = None) -> GradEstimate:
    """Estimate of ∇ J_σ w.r.t. the logs of the hyper-parameters `names`.

    ``J_σ(θ) = E_z[ mean_i L_i(exp(θ + σz)) ]`` where L_i is `stream_loss` of
    stream i (round robin over `streams`) with the learner's key of pair i:
    the expectation is over the smoothing z, the learner's randomness and
    the streams given. Pair i runs ``streams[i % n_streams]`` with the same
    key at θ ± σz_i; the 2·n_pairs runs are one vmapped, jitted call (one
    compilation per learner, shapes, names, σ and n_pairs; the same key
    gives a bit-identical estimate).

    Args:
      learner: a `StreamLearner` (static: hashable, built by its factory).
      key: PRNG key.
      streams: (S, T, d) training streams.
      params: the learner's params pytree (the other leaves stay fixed).
      names: tuple of m positive hyper-parameter names, e.g. ``("h_scale", "length_scale")``.
      log_theta: (m,) their logs.
      sigma: smoothing scale in log units.
      n_pairs: antithetic pairs.
      n_init: points each stream's summary is initialised on.
      penalty: optional ``penalty(final_state, i) -> ()`` added to the loss of
        a run on ``streams[i]`` (i traced: index your own per-stream data
        with it, e.g. a known true curve for `jaxstream.curves.shape`), or
        ``penalty(final_state)``; see `stream_loss` and `size_penalty`.

    Returns:
      `GradEstimate` (gradient w.r.t. log θ).
    """
    run = _smoothed_grad_fn(learner.init, learner.update, tuple(names), float(sigma), int(n_pairs), int(n_init),
                            log_bounds(learner, names), _indexed(penalty))
    return run(key, jnp.asarray(streams), params, jnp.asarray(log_theta))


def _indexed(penalty):
    """``penalty(state, i)`` from a penalty of (state, i) or of the state alone (None stays None)."""
    if penalty is None:
        return None
    import inspect
    try:
        n_args = len(inspect.signature(penalty).parameters)
    except (TypeError, ValueError):
        n_args = 2
    return penalty if n_args >= 2 else _StateOnly(penalty)


class _StateOnly(NamedTuple):
    fn: Callable

    def __call__(self, state, i):
        return self.fn(state)


@cached(2)
def _smoothed_grad_fn(init, update, names, sigma, n_pairs, n_init, bounds=None, penalty=None):
    learner = StreamLearner(init, update, None, None, None, None)

    @jax.jit
    def run(key, streams, params, log_theta):
        S = streams.shape[0]

        def f(lt, k):
            # Pair i's stream: round robin over the given streams (same in both members).
            i = jax.random.randint(jax.random.fold_in(k, 7), (), 0, S)
            pen = None if penalty is None else functools.partial(_call_at, penalty, i)
            return stream_loss(learner, k, streams[i], _with_log_params(params, names, lt, bounds), n_init=n_init,
                               reverse_mode=False, penalty=pen)

        return gaussian_smoothing_grad(f, log_theta, key, sigma=sigma, n_pairs=n_pairs)

    return run


def _call_at(penalty, i, state):
    return penalty(state, i)


# Wide signature: a public driver's keyword options, each documented.
def expected_loss(learner: StreamLearner, key, streams: Array, params, names: tuple, log_theta: Array, *,
                  sigma: float = 0.2, n_pairs: int = 16, n_init: int = 20, penalty: Callable | None = None) -> Array:
    """The smoothed expected loss J_σ(θ) as a function whose derivative is `smoothed_grad`'s estimate.

    Returns the Monte Carlo estimate of J_σ at ``log_theta`` (the mean over
    the 2·n_pairs runs of `smoothed_grad`, same arguments); ``jax.grad`` (or
    ``jax.vjp``) of it w.r.t. ``log_theta`` returns `smoothed_grad`'s
    gradient estimate, through a custom VJP (the same runs: one vmapped call
    gives both). So it composes with any optax loop or a user's own objective
    (e.g. a penalty on θ added to it). Only ``log_theta`` is differentiated;
    the other arguments get no cotangent. Not differentiable twice.

    Args: as `smoothed_grad`.

    Returns:
      () the estimate of J_σ(θ).
    """
    names = tuple(names)

    @jax.custom_vjp
    def f(lt):
        return smoothed_grad(learner, key, streams, params, names, lt, sigma=sigma, n_pairs=n_pairs,
                             n_init=n_init, penalty=penalty).value

    def fwd(lt):
        est = smoothed_grad(learner, key, streams, params, names, lt, sigma=sigma, n_pairs=n_pairs, n_init=n_init,
                            penalty=penalty)
        return est.value, est.grad

    def bwd(grad, g):
        return (g * grad,)

    f.defvjp(fwd, bwd)
    return f(jnp.asarray(log_theta))


class TuneResult(NamedTuple):
    """Output of `tune`.

    Attributes:
      params: the learner's params with the tuned values.
      log_theta: (steps + 1, m) the iterates (logs), first = start.
      loss: (steps,) the estimate of J_σ at each iterate.
      loss_se: (steps,) its standard errors.
    """

    params: object
    log_theta: Array
    loss: Array
    loss_se: Array


# Wide signature: a public driver's keyword options, each documented.
def tune(learner: StreamLearner, key, streams, names: Sequence[str], *, params=None, optimizer=None,
         steps: int = 20, sigma: float = 0.2, n_pairs: int = 16, n_init: int = 20,
         penalty: Callable | None = None) -> TuneResult:
    """Tune positive hyper-parameters by the smoothed-gradient estimator and an optax optimiser.

    Minimises J_σ(θ) (see `smoothed_grad`) over θ = log of `names`, one
    `smoothed_grad` call (2·n_pairs stream runs) per step with a fresh key.
    Returns the final iterate (not the best: the loss estimates are noisy).

    Args:
      learner: `StreamLearner`.
      key: PRNG key.
      streams: (S, T, d) training streams.
      names: the hyper-parameters to tune (positive leaves of ``learner.params``;
        the search is over their logs; iterates are projected onto each
        parameter's valid range, e.g. slpc's ``epsilon <= 1``, and the
        smoothed evaluations clipped to it).
      params: starting params (default ``learner.params``).
      optimizer: an ``optax.GradientTransformation`` (default ``optax.adam(0.1)``).
      steps, sigma, n_pairs, n_init: see `smoothed_grad`.
      penalty: a price on each run's final summary added to its loss (see
        `smoothed_grad`; for slpc, `size_penalty` prices segments and
        length): the prequential loss alone can be bought with a folded,
        many-segment curve.

    Returns:
      `TuneResult`.
    """
    import optax

    names = tuple(names)
    params = learner.params if params is None else params
    opt = optax.adam(0.1) if optimizer is None else optimizer
    streams = jnp.asarray(streams)
    lt = jnp.log(jnp.stack([jnp.asarray(getattr(params, n), streams.dtype) for n in names]))
    bounds = log_bounds(learner, names)
    lo, hi = (jnp.asarray([b[i] for b in bounds], lt.dtype) for i in (0, 1))
    state = opt.init(lt)
    its, losses, ses = [lt], [], []
    for s in range(steps):
        est = smoothed_grad(learner, jax.random.fold_in(key, s), streams, params, names, lt,
                            sigma=sigma, n_pairs=n_pairs, n_init=n_init, penalty=penalty)
        upd, state = opt.update(est.grad, state, lt)
        lt = optax.apply_updates(lt, upd)
        lt = jnp.clip(lt, lo, hi)  # projected onto the valid ranges
        its.append(lt)
        losses.append(est.value)
        ses.append(est.value_se)
    return TuneResult(_with_log_params(params, names, lt, bounds), jnp.stack(its), jnp.stack(losses), jnp.stack(ses))


class RefineEmbeddingResult(NamedTuple):
    """Output of `refine_embedding`.

    Attributes:
      Y: (n, k) refined coordinates.
      stress: (steps,) normalised stress before each step.
    """

    Y: Array
    stress: Array


@functools.partial(jax.jit, static_argnames=("optimizer", "steps"))
def refine_embedding(dist: Array, Y: Array, *, optimizer=None, steps: int = 200) -> RefineEmbeddingResult:
    """Lower the normalised stress of an embedding by gradient descent (optax).

    Minimises `jaxstream.embedding.normalized_stress` (dist, Y) over Y from a
    start such as landmark MDS coordinates (``LandmarkMDS.transform`` of the
    points, or `lmds_transform`). Its derivative is finite everywhere
    (coincident points and the diagonal take the subgradient 0). Cost: one
    (n, n) distance matrix and its derivative per step, O(steps·n²·k),
    against LMDS's O(n·n_L·k) per point.

    Args:
      dist: (n, n) symmetric target distances.
      Y: (n, k) starting coordinates.
      optimizer: an ``optax.GradientTransformation`` (static; default
        ``optax.adam(1e-2)``, scale it to the data's units).
      steps: number of steps (static).

    Returns:
      `RefineEmbeddingResult`.
    """
    import optax

    from .embedding.stress import normalized_stress

    opt = optax.adam(1e-2) if optimizer is None else optimizer
    dist = jnp.asarray(dist)
    Y = jnp.asarray(Y, dist.dtype)

    def step(carry, _):
        y, s = carry
        val, g = jax.value_and_grad(normalized_stress, argnums=1)(dist, y)
        upd, s = opt.update(g, s, y)
        return (optax.apply_updates(y, upd), s), val

    (Y, _), vals = jax.lax.scan(step, (Y, opt.init(Y)), None, length=steps)
    return RefineEmbeddingResult(Y, vals)
