"""The learner shape shared by every jaxstream algorithm, and stream drivers.

A learner is a `StreamLearner`: a NamedTuple of pure functions plus the
default numeric parameters. Numeric hyper-parameters are stored in the state
(``state.params``, in the spirit of ``optax.inject_hyperparams``) so that a
grid of them can be vmapped through `init` and differentiated through, while
capacities and algorithm variants are static and fixed when the learner is
built.
"""
from __future__ import annotations

import functools
import sys
import time
from typing import Any, Callable, Iterable, NamedTuple, Optional, Union

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from ._checks import check_points, is_concrete

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
      config: the static configuration (a dict of plain Python values: the
        learner's name under ``"learner"`` and the factory's static
        arguments, e.g. capacities and variant flags). Checkpoints record it
        and refuse a state saved under another configuration. ``None`` for a
        hand-built learner.
    """

    init: Callable[..., State]
    update: Callable[[PRNGKey, State, Array], tuple[State, Info]]
    predict: Callable[[State, Array], Array]
    loss: Callable[[State, Array], Array]
    params: Any
    config: Optional[dict] = None


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
        xs = np.asarray(xs)
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


@functools.lru_cache(maxsize=256)
def _compiled_scan(update, trace_fn, all_valid: bool, masked: bool, batched: bool):
    """One jitted driver per (update, trace, validity mode, batching).

    Learners built with the same configuration share `update` (the factories
    cache their kernels), so calling `run_stream` again, on other data of the
    same shape, reuses the compiled program instead of compiling a new scan.
    """
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
      xs: stream of shape (T, d).
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
    run = _compiled_scan(learner.update, _resolve_trace(trace), all_valid, mask is not None, False)
    return run(key, xs, state, mask, step_offset)


def init_streams(learner: StreamLearner, keys: PRNGKey, x_inits, params=None, *,
                 params_batched: bool = False, x_init_batched: bool = True):
    """Initialise many streams at once (vmap of ``learner.init``).

    Args:
      keys: (B,) keys (``jax.random.split(key, B)``).
      x_inits: (B, n0, d) initial points, or (n0, d) shared by all streams when
        ``x_init_batched=False``.
      params: None (the learner's defaults), one params pytree shared by all
        streams, or, with ``params_batched=True``, a params pytree whose leaves
        all have a leading axis B (e.g. a grid of hyper-parameters).

    Returns:
      A batched state whose leaves have leading axis B.
    """
    if params is None:
        params = learner.params
    in_axes = (0, 0 if x_init_batched else None, 0 if params_batched else None)
    return jax.vmap(learner.init, in_axes=in_axes)(keys, x_inits, params)


def run_streams(learner: StreamLearner, keys: PRNGKey, xs, states: State, *,
                mask=None, trace: Union[str, TraceFn, None] = "loss",
                nonfinite: str = "raise", step_offset=0):
    """`run_stream` vmapped over many streams.

    Args:
      keys: (B,) keys.
      xs: (B, T, d) streams (pad ragged streams and pass `mask`).
      states: batched states from `init_streams` (leading axis B). Different
        numeric params per stream live in the states.
      mask: optional bool (B, T).
      trace, nonfinite, step_offset: as in `run_stream` (the round keys of
        stream b are ``fold_in(keys[b], step_offset + t)``).

    Returns:
      ``(final_states, traces)`` with leading axis B.
    """
    xnp = np if is_concrete(xs) else jnp
    if xnp is np:
        xs = np.asarray(xs)
    if xs.ndim != 3:
        raise ValueError(f"xs must have shape (B, T, d); got {tuple(xs.shape)}")
    B, T, d = xs.shape
    if mask is not None and jnp.shape(mask) != (B, T):
        raise ValueError(f"mask must have shape ({B}, {T}); got {tuple(jnp.shape(mask))}")
    mnp = np if is_concrete(mask) else jnp
    flat_mask = None if mask is None else mnp.reshape(mnp.asarray(mask), (B * T,))
    flat, flat_mask, all_valid = _prepare_stream(xnp.reshape(xs, (B * T, d)), flat_mask, nonfinite)
    xs = flat.reshape(B, T, d)
    mask = None if flat_mask is None else flat_mask.reshape(B, T)
    run = _compiled_scan(learner.update, _resolve_trace(trace), all_valid, mask is not None, True)
    return run(keys, xs, states, mask, step_offset)


class ChunkedResult(NamedTuple):
    """Summary of `run_stream_chunked`.

    Attributes:
      n_points: number of valid points learned (skipped non-finite rows excluded).
      cumulative_loss: sum of prequential losses (float64 on the host).
      losses: per-point prequential losses (NumPy) when ``keep_losses=True``,
        else None.
      seconds: wall time spent, compile included.
    """

    n_points: int
    cumulative_loss: float
    losses: Optional[np.ndarray]
    seconds: float


def _iter_chunks(xs, chunk_size):
    if isinstance(xs, (np.ndarray, jax.Array)):
        for i in range(0, xs.shape[0], chunk_size):
            yield np.asarray(xs[i:i + chunk_size])
    else:
        buf = []
        n = 0
        for block in xs:
            block = np.asarray(block)
            if block.ndim == 1:
                block = block[None]
            buf.append(block)
            n += block.shape[0]
            while n >= chunk_size:
                cat = np.concatenate(buf)
                yield cat[:chunk_size]
                rest = cat[chunk_size:]
                buf, n = ([rest] if rest.shape[0] else []), rest.shape[0]
        if n:
            yield np.concatenate(buf)


def run_stream_chunked(learner: StreamLearner, key: PRNGKey, xs: Union[np.ndarray, Iterable],
                       state: State, *, chunk_size: int = 4096, keep_losses: bool = False,
                       nonfinite: str = "raise", progress: bool = False,
                       on_chunk: Optional[Callable[[int, State, np.ndarray], None]] = None):
    """Run a very long stream chunk by chunk with bounded device and host memory.

    One compiled scan of ``chunk_size`` rounds is reused for every chunk (the
    last one is padded and masked), and round keys are ``fold_in(key, t)`` with
    the global t, so the result equals one `run_stream` call bit for bit.

    Args:
      xs: a (T, d) array, or any iterable of (n_i, d) blocks (e.g. a generator
        reading a file), so the whole stream never has to be in memory.
      chunk_size: rounds per compiled scan.
      keep_losses: keep every prequential loss on the host (O(T) host memory);
        by default only their running sum is kept.
      progress: print a progress line on stderr.
      on_chunk: optional callback ``(n_done, state, chunk_losses)`` after each
        chunk (e.g. to checkpoint the state or log).

    Returns:
      ``(final_state, ChunkedResult)``.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1; got {chunk_size}")
    run_full = _compiled_scan(learner.update, _trace_loss, True, False, False)
    run_masked = _compiled_scan(learner.update, _trace_loss, False, True, False)
    start = time.perf_counter()
    n_done, n_valid, total, kept = 0, 0, 0.0, []
    for chunk in _iter_chunks(xs, chunk_size):
        chunk = np.asarray(check_points(chunk, "xs chunk", allow_nonfinite=(nonfinite == "skip")))
        n = chunk.shape[0]
        valid = np.isfinite(chunk).all(axis=1)
        if n == chunk_size and valid.all():
            state, losses = run_full(key, chunk, state, None, n_done)
        else:
            if n < chunk_size:
                chunk = np.concatenate([chunk, np.zeros((chunk_size - n, chunk.shape[1]), chunk.dtype)])
                valid = np.concatenate([valid, np.zeros(chunk_size - n, bool)])
            state, losses = run_masked(key, chunk, state, valid, n_done)
        losses = np.asarray(losses)[:n]
        total += float(losses.astype(np.float64).sum())
        if keep_losses:
            kept.append(losses)
        if on_chunk is not None:
            on_chunk(n_done + n, state, losses)
        n_done += n
        n_valid += int(valid[:n].sum())
        if progress:
            rate = n_done / max(time.perf_counter() - start, 1e-9)
            print(f"\r[jaxstream] {n_done} points, {rate:,.0f} points/s, cumulative loss {total:.4g}",
                  end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    losses = np.concatenate(kept) if keep_losses and kept else (np.zeros(0) if keep_losses else None)
    return state, ChunkedResult(n_valid, total, losses, time.perf_counter() - start)
