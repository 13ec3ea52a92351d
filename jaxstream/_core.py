"""The learner shape shared by every jaxstream algorithm, and stream drivers.

A learner is a `StreamLearner`: a NamedTuple of pure functions plus the
default numeric parameters. Numeric hyper-parameters are stored in the state
(``state.params``, in the spirit of ``optax.inject_hyperparams``) so that a
grid of them can be vmapped through `init` and differentiated through, while
capacities and algorithm variants are static and fixed when the learner is
built.
"""
from __future__ import annotations

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


def _select(pred, on_true, on_false):
    return jax.tree_util.tree_map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


def _resolve_trace(trace: Union[str, TraceFn, None]) -> TraceFn:
    if trace is None:
        return lambda state, x, info: ()
    if callable(trace):
        return trace
    if trace == "loss":
        return lambda state, x, info: info.loss
    if trace == "info":
        return lambda state, x, info: info
    raise ValueError(f"trace must be 'loss', 'info', None or a callable (state, x, info) -> pytree; got {trace!r}")


def _prepare_stream(xs, mask, nonfinite: str):
    if nonfinite not in ("raise", "skip"):
        raise ValueError(f"nonfinite must be 'raise' or 'skip'; got {nonfinite!r}")
    xs = check_points(xs, "xs", allow_nonfinite=(nonfinite == "skip"))
    if mask is not None:
        mask = jnp.asarray(mask)
        if mask.shape != xs.shape[:1]:
            raise ValueError(f"mask must have shape ({xs.shape[0]},) to match xs; got {tuple(mask.shape)}")
        mask = mask.astype(bool)
    return xs, mask


def _scan_stream(learner: StreamLearner, key, xs, state, mask, trace_fn, step_offset):
    """The scan itself: no host-side checks, safe under jit and vmap."""
    T = xs.shape[0]
    if mask is None:
        mask = jnp.ones((T,), bool)
    ts = jnp.arange(T) + step_offset

    def step(state, inp):
        x, valid, t = inp
        # Non-finite rows are skipped under tracing (where nothing can raise).
        valid = valid & jnp.all(jnp.isfinite(x))
        x_safe = jnp.where(valid, x, jnp.zeros_like(x))
        new_state, info = learner.update(jax.random.fold_in(key, t), state, x_safe)
        rec = trace_fn(state, x_safe, info)
        rec = jax.tree_util.tree_map(lambda r: jnp.where(valid, r, jnp.zeros_like(r)), rec)
        return _select(valid, new_state, state), rec

    return lax.scan(step, state, (xs, mask, ts))


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
    xs, mask = _prepare_stream(xs, mask, nonfinite)
    return _scan_stream(learner, key, xs, state, mask, _resolve_trace(trace), step_offset)


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
                nonfinite: str = "raise"):
    """`run_stream` vmapped over many streams.

    Args:
      keys: (B,) keys.
      xs: (B, T, d) streams (pad ragged streams and pass `mask`).
      states: batched states from `init_streams` (leading axis B). Different
        numeric params per stream live in the states.
      mask: optional bool (B, T).
      trace, nonfinite: as in `run_stream`.

    Returns:
      ``(final_states, traces)`` with leading axis B.
    """
    if is_concrete(xs):
        xs = np.asarray(xs)
    if xs.ndim != 3:
        raise ValueError(f"xs must have shape (B, T, d); got {tuple(xs.shape)}")
    B, T, d = xs.shape
    flat_mask = None if mask is None else jnp.asarray(mask).reshape(B * T)
    if mask is not None and jnp.shape(mask) != (B, T):
        raise ValueError(f"mask must have shape ({B}, {T}); got {tuple(jnp.shape(mask))}")
    flat, flat_mask = _prepare_stream(jnp.asarray(xs).reshape(B * T, d), flat_mask, nonfinite)
    xs = flat.reshape(B, T, d)
    mask = None if flat_mask is None else flat_mask.reshape(B, T)
    trace_fn = _resolve_trace(trace)
    run_one = lambda k, x, s, m: _scan_stream(learner, k, x, s, m, trace_fn, 0)
    if mask is None:
        return jax.vmap(lambda k, x, s: run_one(k, x, s, None))(keys, xs, states)
    return jax.vmap(run_one)(keys, xs, states, mask)


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
    run = jax.jit(lambda k, x, s, m, off: run_stream(learner, k, x, s, mask=m, trace="loss",
                                                     nonfinite="skip", step_offset=off))
    start = time.perf_counter()
    n_done, n_valid, total, kept = 0, 0, 0.0, []
    for chunk in _iter_chunks(xs, chunk_size):
        chunk = np.asarray(check_points(chunk, "xs chunk", allow_nonfinite=(nonfinite == "skip")))
        n = chunk.shape[0]
        valid = np.isfinite(chunk).all(axis=1)
        if n < chunk_size:
            chunk = np.concatenate([chunk, np.zeros((chunk_size - n, chunk.shape[1]), chunk.dtype)])
            valid = np.concatenate([valid, np.zeros(chunk_size - n, bool)])
        state, losses = run(key, chunk, state, valid, n_done)
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
