"""The learner shape shared by every jaxstream algorithm, and stream drivers.

A learner is a `StreamLearner`: a NamedTuple of pure functions plus the
default numeric parameters. Numeric hyper-parameters are stored in the state
(``state.params``, in the spirit of ``optax.inject_hyperparams``) so that a
grid of them can be vmapped through `init` and differentiated through, while
capacities and algorithm variants are static and fixed when the learner is
built.

`run_stream` runs one stream as one `lax.scan`; it compiles one program
per learner configuration, trace and validity mode and reuses it. Many
streams (`jaxstream._sharding`: `run_streams`, `init_streams`) and streams
longer than memory (`jaxstream._chunked`: `run_stream_chunked`) build on
it.

Validity (masks, non-finite rows) costs only what it must: a stream known on
the host to be finite and unmasked runs ``update`` alone; otherwise each round
is a ``lax.cond`` that leaves the state untouched when the row is skipped.
Under `vmap` with a batched mask JAX runs both branches and selects, i.e. one
pass over every state leaf that ``update`` rewrites per round; a learner
could avoid even that only by taking the validity flag into ``update`` and
masking its own (small) writes, which the `StreamLearner` shape does not
offer today.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, NamedTuple, Optional, Union

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from ._caches import cached
from ._checks import PARAM_RANGES, check_params, check_points, host_array, is_concrete
from ._loops import reverse_ready, static_if_differentiated, static_trip_counts_enabled

Array = jax.Array
PRNGKey = jax.Array
State = Any
Info = Any
TraceFn = Callable[[State, Array, Info], Any]


class StreamLearner(NamedTuple):
    """An online learner as a bundle of pure functions.

    Attributes:
      init: ``(key, x_init[n0, d], params=None) -> state``. Builds the summary
        from the first points. ``params=None`` uses `params` below.
      update: ``(key, state, x[d]) -> (state, info)``. Learns one observation.
        ``info.loss`` is the prequential loss: the loss of the summary *before*
        the update at x.
      predict: ``(state, x[..., d]) -> array``. Read-only prediction (label,
        projection, embedding, ... depending on the learner).
      loss: ``(state, x[d]) -> scalar``. Instantaneous loss of the current
        summary at x.
      params: default numeric hyper-parameters (a pytree of arrays).
      config: the static configuration: a hashable NamedTuple of plain
        Python values (capacities and variant flags) whose class names the
        learner (``config.name``), e.g. `jaxstream.curves.Config`.
        Checkpoints record it (`config_record`) and refuse a state saved
        under another configuration. ``None`` for a hand-built learner (a
        dict of plain values is accepted too).
    """

    init: Callable[..., State]
    update: Callable[[PRNGKey, State, Array], tuple[State, Info]]
    predict: Callable[[State, Array], Array]
    loss: Callable[[State, Array], Array]
    params: Any
    config: Any = None


def config_record(config) -> Optional[dict]:
    """A learner's configuration as a dict of plain values: ``{"learner": name, **fields}``
    (plus ``state_layout`` where the configuration declares one, or ``config.record()`` where it
    defines one, e.g. to name a metric function); a dict is returned as it is."""
    if config is None or isinstance(config, dict):
        return config
    if hasattr(config, "record"):  # a configuration with fields that are not plain values
        return config.record()
    rec = dict(learner=type(config).name, **config._asdict())
    layout = getattr(type(config), "state_layout", None)
    if layout is not None:
        rec["state_layout"] = layout
    return rec


def _hashable_kwargs(kwargs: dict):
    """kwargs as a sorted tuple when every value is a plain scalar (or a dtype), else None."""
    items = []
    for k, v in sorted(kwargs.items()):
        if v is None or isinstance(v, (bool, int, float, str, np.generic, np.dtype, type)):
            items.append((k, v.item() if isinstance(v, np.generic) else v))
        else:
            return None
    return tuple(items)


def _learner_name(config) -> Optional[str]:
    if isinstance(config, dict):
        return config.get("learner")
    return getattr(type(config), "name", None)


def _validated_build(build, config, default_params, kwargs: dict) -> "StreamLearner":
    """``build(config, default_params(**kwargs))`` with the params checked against their ranges
    (`jaxstream._checks.PARAM_RANGES`), and an `init` that checks params given to it too."""
    name = _learner_name(config)
    check_params(name, kwargs)  # as given (before a cast, e.g. of an int parameter)
    params = default_params(**kwargs)
    check_params(name, params)
    learner = build(config, params)
    if name in PARAM_RANGES:
        learner = learner._replace(init=_checked_init(learner.init, name))
    return learner


def _checked_init(init, name: str):
    differentiable = reverse_ready(init, init)  # jax.grad(jax.jit(f)) of an f that calls init

    @functools.wraps(init)
    def init_(key, x_init, params=None):
        if params is not None:
            check_params(name, params)
        with static_if_differentiated(x_init, params):
            if static_trip_counts_enabled():
                return init(key, x_init, params)
            return differentiable(key, x_init, params)

    return init_


@cached()
def _cached_build(build, config, default_params, items, x64: bool):
    del x64  # part of the key: default params take JAX's default float
    return _validated_build(build, config, default_params, dict(items))


def cached_learner(build: Callable, config, default_params: Callable, param_kwargs: dict) -> "StreamLearner":
    """``build(config, default_params(**param_kwargs))``, the same object again for equal arguments.

    Factories call it so that a second call with equal arguments returns the
    learner built the first time, whose functions (and so whose compiled
    programs, cached by function) are reused. Numeric arguments that are not
    plain scalars (arrays) build a new learner each time; its `update` is
    still the configuration's cached kernel.

    The numeric parameters are checked against their valid ranges
    (`jaxstream._checks.PARAM_RANGES`, by ``config.name``) where they are
    concrete, here and in the learner's `init` when it is given params: a
    `ValueError` names the parameter and its range. Nothing is checked inside
    the compiled `update` (no cost per round).
    """
    known = inspect.signature(default_params).parameters
    unknown = sorted(set(param_kwargs) - set(known))
    if unknown:
        name = getattr(config, "name", None) or "the factory"
        raise TypeError(f"{name}() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}; its "
                        f"numeric parameters are {', '.join(known)}")
    items = _hashable_kwargs(param_kwargs)
    if items is None:
        return _validated_build(build, config, default_params, param_kwargs)
    return _cached_build(build, config, default_params, items, bool(jax.config.jax_enable_x64))


def _trace_none(state, x, info):
    return ()


def _trace_loss(state, x, info):
    return info.loss


def _trace_info(state, x, info):
    return info


def _resolve_trace(trace: Union[str, TraceFn, None]) -> TraceFn:
    # Module-level functions (not fresh lambdas) so that compiled scans are
    # found again in `_compiled_scan`'s cache.
    if trace is None:
        return _trace_none
    if callable(trace):
        return trace
    if trace == "loss":
        return _trace_loss
    if trace == "info":
        return _trace_info
    raise ValueError(f"trace must be 'loss', 'info', None or a callable (state, x, info) -> pytree; got {trace!r}")


def _prepare_stream(xs, mask, nonfinite: str):
    """Check a stream on the host where it is concrete.

    Returns:
      ``(xs, mask, all_valid)``: `mask` is None or a bool (T,) array (rows that
      are known non-finite on the host are folded into it); `all_valid` is True
      when every row is known to be learned (concrete, finite, unmasked), so the
      scan can skip validity handling altogether.
    """
    if nonfinite not in ("raise", "skip"):
        raise ValueError(f"nonfinite must be 'raise' or 'skip'; got {nonfinite!r}")
    # Concrete inputs stay NumPy here: under an enclosing trace (make_jaxpr, a
    # user's jit around other work) any jnp call would turn them into tracers.
    concrete = is_concrete(xs)
    if concrete:
        xs = host_array(xs, "xs")
    checked = check_points(xs, "xs", allow_nonfinite=(nonfinite == "skip"))
    xs = xs.astype(checked.dtype, copy=False) if concrete else checked
    if mask is not None:
        if is_concrete(mask):
            mask = np.asarray(mask)
        if mask.shape != xs.shape[:1]:
            raise ValueError(f"mask must have shape ({xs.shape[0]},) to match xs; got {tuple(mask.shape)}")
        mask = mask.astype(bool)
    if not concrete or (mask is not None and not is_concrete(mask)):
        return xs, mask, False
    valid = np.ones(xs.shape[0], bool) if mask is None else mask
    if nonfinite == "skip":
        valid = valid & np.isfinite(xs).all(axis=1)
    if valid.all():
        return xs, None, True
    return xs, valid, False


def _zeros_like_shape(s):
    return jnp.zeros(s.shape, s.dtype)


def _scan_stream(update, key, xs, state, mask, trace_fn, step_offset, *, all_valid: bool = False):
    """The scan itself: no host-side checks, safe under jit and vmap.

    With ``all_valid=True`` (every row known to be valid: no mask, rows checked
    finite on the host) a round is exactly ``update`` plus the trace: nothing
    else touches the state. Otherwise a round is ``lax.cond(valid, learn,
    skip)``, so a skipped round leaves the state alone and a learned one costs
    what `update` costs. Under `vmap` with a batched `valid`, JAX turns the
    cond into a select of both branches: every state leaf that `update`
    rewrites is then selected once per round (a pass over it), which is what
    `run_streams` avoids by taking the unmasked path whenever it can.
    """
    T = xs.shape[0]
    ts = jnp.arange(T) + step_offset

    if all_valid and mask is None:
        def step(state, inp):
            x, t = inp
            new_state, info = update(jax.random.fold_in(key, t), state, x)
            return new_state, trace_fn(state, x, info)

        return lax.scan(step, state, (xs, ts))

    if mask is None:
        mask = jnp.ones((T,), bool)

    def step(state, inp):
        x, valid, t = inp
        # Non-finite rows are skipped under tracing (where nothing can raise);
        # zeros replace them so that no NaN reaches a skipped branch's loops.
        valid = valid & jnp.all(jnp.isfinite(x))
        x_safe = jnp.where(valid, x, jnp.zeros_like(x))
        k = jax.random.fold_in(key, t)

        # One jitted function for both the shape query and the branch: the
        # second use hits jit's trace cache, so `update` is traced once.
        @jax.jit
        def learn(k, state, x):
            new_state, info = update(k, state, x)
            return new_state, trace_fn(state, x, info)

        rec_shape = jax.eval_shape(learn, k, state, x_safe)[1]

        def skip(k, state, x):
            return state, jax.tree_util.tree_map(_zeros_like_shape, rec_shape)

        return lax.cond(valid, learn, skip, k, state, x_safe)

    return lax.scan(step, state, (xs, mask, ts))


def _compiled_scan(update, trace_fn, all_valid: bool, masked: bool, batched: bool):
    """One jitted driver per (update, trace, validity mode, batching, loop form).

    Learners built with the same configuration share `update` (the factories
    cache their kernels), so calling `run_stream` again, on other data of the
    same shape, reuses the compiled program instead of compiling a new scan.
    """
    if static_trip_counts_enabled():
        return _compiled_scan_for(update, trace_fn, all_valid, masked, batched, True)
    return _reverse_ready_scan(update, trace_fn, all_valid, masked, batched)


@cached(4)
def _reverse_ready_scan(update, trace_fn, all_valid: bool, masked: bool, batched: bool):
    """The fast driver (dynamic loops), differentiated through the static one (`_loops.reverse_ready`):
    so ``jax.grad(jax.jit(f))`` of a function that runs a stream works too."""
    return reverse_ready(_compiled_scan_for(update, trace_fn, all_valid, masked, batched, False),
                         _compiled_scan_for(update, trace_fn, all_valid, masked, batched, True))


@cached(4)
def _compiled_scan_for(update, trace_fn, all_valid: bool, masked: bool, batched: bool, static_loops: bool):
    # `static_loops` (`jaxstream._loops`) is part of the key, so that a scan traced for `jax.grad`
    # inside `static_trip_counts()` is not the fast one compiled outside it (or the reverse).
    del static_loops

    def one(key, xs, state, mask, step_offset):
        return _scan_stream(update, key, xs, state, mask if masked else None, trace_fn, step_offset,
                            all_valid=all_valid)

    if batched:
        one = jax.vmap(one, in_axes=(0, 0, 0, 0 if masked else None, None))
    return jax.jit(one)


def run_stream(learner: StreamLearner, key: PRNGKey, xs, state: State, *,
               mask=None, trace: Union[str, TraceFn, None] = "loss",
               nonfinite: str = "raise", step_offset=0):
    """Run a learner over a whole stream as one `lax.scan` (prequential).

    For every x_t the loss of the current summary at x_t is recorded first,
    then x_t is learned. The key of round t is ``fold_in(key, step_offset + t)``,
    so running a stream in chunks gives bit-identical results to one call.

    Args:
      learner: a `StreamLearner`.
      key: PRNG key.
      xs: stream of shape (T, d). Concrete values are checked on the host
        (`jaxstream._checks.check_points`): NaN/inf follow `nonfinite`;
        finite values whose squares would overflow the working dtype
        (|x| > ``magnitude_limit``, about 1.8e16 in float32) raise, as does a
        stream whose spread is so small that squared distances underflow
        (``spread_limit``, about 1.1e-16 in float32). Each row is learned in
        the state's dtype (fixed by ``init``): a float64 stream after a
        float32 ``init`` is cast to float32.
      state: the learner's state (from ``learner.init``).
      mask: optional bool (T,); False rows are skipped (state unchanged, trace
        entries zero). Use it for ragged streams padded to a common length.
      trace: what to record per round: ``"loss"`` (the prequential loss,
        shape (T,)), ``"info"`` (the learner's whole Info), None, or a callable
        ``(state_before, x, info) -> pytree``.
      nonfinite: policy for rows with NaN/inf when `xs` is concrete:
        ``"raise"`` (default) raises ValueError naming the first bad row;
        ``"skip"`` masks them out. Under tracing, non-finite rows are always
        skipped (their trace entries are zero).
      step_offset: global index of xs[0], for chunked runs.

    Returns:
      ``(final_state, trace)`` where each trace leaf has leading axis T.
    """
    xs, mask, all_valid = _prepare_stream(xs, mask, nonfinite)
    with static_if_differentiated(xs, state):  # so that jax.grad through it needs no context
        run = _compiled_scan(learner.update, _resolve_trace(trace), all_valid, mask is not None, False)
        return run(key, xs, state, mask, step_offset)
