"""The learner shape shared by every jaxstream algorithm, and stream drivers.

A learner is a `StreamLearner`: a NamedTuple of pure functions plus the
default numeric parameters. Numeric hyper-parameters are stored in the state
(``state.params``, in the spirit of ``optax.inject_hyperparams``) so that a
grid of them can be vmapped through `init` and differentiated through, while
capacities and algorithm variants are static and fixed when the learner is
built.

Drivers: `run_stream` (one stream, one `lax.scan`), `run_streams` and
`init_streams` (many streams: vmapped, the stream axis sharded over devices
and, under `jax.distributed`, over processes), `run_stream_chunked` (a stream
longer than memory, from an array, a ``.npy``/CSV file or any iterable of
blocks, with prefetching, a progress bar and checkpoints). Each compiles one
program per learner configuration, trace and validity mode and reuses it.

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
import os
import queue
import sys
import threading
import time
from typing import Any, Callable, Iterable, NamedTuple, Optional, Sequence, Union

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

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


# ---------------------------------------------------------------------------
# Many streams over many devices and hosts
# ---------------------------------------------------------------------------

Devices = Union[None, int, str, Sequence[Any]]


def _resolve_devices(devices: Devices) -> tuple:
    """The devices the stream axis is sharded over (all of one platform)."""
    if devices is None:
        devs = jax.devices()
    elif isinstance(devices, str):
        devs = jax.devices(devices)
    elif isinstance(devices, (int, np.integer)) and not isinstance(devices, bool):
        avail = jax.devices()
        if not 1 <= devices <= len(avail):
            raise ValueError(f"devices={devices}: there are {len(avail)} {avail[0].platform} device(s)")
        devs = avail[:int(devices)]
    else:
        devs = list(devices)
        if not devs or not all(isinstance(d, jax.Device) for d in devs):
            raise ValueError(f"devices must be None, an int, a platform name or a non-empty list of "
                             f"jax.Device; got {devices!r}")
    platforms = {d.platform for d in devs}
    if len(platforms) > 1:
        raise ValueError(f"devices must all be of one platform; got {sorted(platforms)}")
    if len(set(devs)) != len(devs):
        raise ValueError("devices contains the same device twice")
    return tuple(devs)


def _is_global(a) -> bool:
    # a tracer (run_streams under jit) has no addressability to ask about: it is not a global array here
    return isinstance(a, jax.Array) and not isinstance(a, jax.core.Tracer) and not a.is_fully_addressable


def _key_parts(keys):
    """Typed keys travel as their raw data (shard_map, host transfers) and are
    re-wrapped on the device; legacy uint32 keys travel as they are."""
    if is_concrete(keys) and not isinstance(keys, jax.Array):
        keys = jnp.asarray(keys)
    if jnp.issubdtype(keys.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(keys), str(jax.random.key_impl(keys))
    return keys, None


def _wrap_keys(kd, impl):
    return kd if impl is None else jax.random.wrap_key_data(kd, impl=impl)


@functools.lru_cache(maxsize=64)
def _mesh(devs: tuple):
    mesh = Mesh(np.asarray(devs, dtype=object), ("streams",))
    return mesh, NamedSharding(mesh, P("streams")), NamedSharding(mesh, P())


def _pad_rows(a, B_pad: int):
    """Pad the leading (stream) axis to B_pad with copies of stream 0: padded
    streams do real, discarded work and keep the unmasked fast path."""
    B = a.shape[0]
    if B == B_pad:
        return a
    if isinstance(a, np.ndarray):
        return np.concatenate([a, np.repeat(a[:1], B_pad - B, axis=0)])
    return jnp.concatenate([a, jnp.repeat(a[:1], B_pad - B, axis=0)])


def _place(tree, sharding, B_pad: int):
    """Put every leaf (leading axis B) on the mesh, padded to B_pad rows.

    One process: `device_put` of the padded array. Several processes
    (`jax.distributed`): a leaf already global is padded under jit; a host
    (NumPy) leaf, the same on every process, becomes a global array of which
    each process materialises only its own rows.
    """
    def put(a):
        if _is_global(a):
            if a.shape[0] != B_pad:
                a = jax.jit(lambda v: _pad_rows(v, B_pad), out_shardings=sharding)(a)
            return a
        if jax.process_count() == 1:
            return jax.device_put(_pad_rows(a if isinstance(a, jax.Array) else np.asarray(a), B_pad), sharding)
        host = _pad_rows(np.asarray(a), B_pad)
        return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])

    return jax.tree_util.tree_map(put, tree)


def _finish(tree, B: int, gather: bool):
    """Drop padding; across processes gather to NumPy on every process."""
    if _is_global_tree(tree):
        if gather:
            tree = multihost_utils.process_allgather(tree, tiled=True)
            return jax.tree_util.tree_map(lambda a: a[:B], tree)
        leaves = jax.tree_util.tree_leaves(tree)
        if leaves and leaves[0].shape[0] != B:
            raise ValueError(f"gather=False across processes needs B={B} to be a multiple of the number of "
                             "devices (padded streams cannot be dropped from a global array without moving it)")
        return tree
    return jax.tree_util.tree_map(lambda a: a if a.shape[0] == B else a[:B], tree)


def _is_global_tree(tree) -> bool:
    return any(_is_global(a) for a in jax.tree_util.tree_leaves(tree))


@functools.lru_cache(maxsize=64)
def _jitted_init(init, in_axes):
    # jitted (not op by op), so that one device and a mesh run the same fused
    # program and agree bit for bit
    return jax.jit(jax.vmap(init, in_axes=in_axes))


@functools.lru_cache(maxsize=64)
def _sharded_init(init, devs: tuple, impl, x_init_batched: bool, params_batched: bool):
    mesh, rows, _ = _mesh(devs)

    def local(kd, x_inits, params):
        in_axes = (0, 0 if x_init_batched else None, 0 if params_batched else None)
        return jax.vmap(init, in_axes=in_axes)(_wrap_keys(kd, impl), x_inits, params)

    specs = (P("streams"), P("streams") if x_init_batched else P(), P("streams") if params_batched else P())
    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=specs, out_specs=P("streams"), check_vma=False))


@functools.lru_cache(maxsize=64)
def _sharded_scan(update, trace_fn, all_valid: bool, masked: bool, devs: tuple, impl):
    mesh, rows, _ = _mesh(devs)
    run = _compiled_scan(update, trace_fn, all_valid, masked, True)

    if masked:
        def local(kd, xs, states, mask, step_offset):
            return run(_wrap_keys(kd, impl), xs, states, mask, step_offset)
        specs = (P("streams"),) * 4 + (P(),)
    else:
        def local(kd, xs, states, step_offset):
            return run(_wrap_keys(kd, impl), xs, states, None, step_offset)
        specs = (P("streams"),) * 3 + (P(),)
    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=specs, out_specs=P("streams"), check_vma=False))


def init_streams(learner: StreamLearner, keys: PRNGKey, x_inits, params=None, *,
                 params_batched: bool = False, x_init_batched: bool = True,
                 devices: Devices = None, gather: bool = True):
    """Initialise many streams at once (vmap of ``learner.init``), sharded
    over devices.

    Args:
      keys: (B,) keys (``jax.random.split(key, B)``).
      x_inits: (B, n0, d) initial points, or (n0, d) shared by all streams when
        ``x_init_batched=False``.
      params: None (the learner's defaults), one params pytree shared by all
        streams, or, with ``params_batched=True``, a params pytree whose leaves
        all have a leading axis B (e.g. a grid of hyper-parameters).
      devices: where the streams live, as in `run_streams` (default: every
        device of the default platform, across processes under
        `jax.distributed`).
      gather: under several processes, return NumPy states on every process
        (True) or global arrays (False); see `run_streams`.

    Returns:
      A batched state whose leaves have leading axis B, sharded over the
      devices along that axis.
    """
    if params is None:
        params = learner.params
    devs = _resolve_devices(devices)
    in_axes = (0, 0 if x_init_batched else None, 0 if params_batched else None)
    if len(devs) == 1 and jax.process_count() == 1:
        with jax.default_device(devs[0]):
            return _jitted_init(learner.init, in_axes)(keys, x_inits, params)
    kd, impl = _key_parts(keys)
    B = kd.shape[0]
    B_pad = -(-B // len(devs)) * len(devs)
    _, rows, repl = _mesh(devs)
    args = (_place(kd, rows, B_pad),
            _place(x_inits, rows, B_pad) if x_init_batched else _replicate(x_inits, repl),
            _place(params, rows, B_pad) if params_batched else _replicate(params, repl))
    out = _sharded_init(learner.init, devs, impl, x_init_batched, params_batched)(*args)
    return _finish(out, B, gather)


def _replicate(tree, repl):
    def put(a):
        if _is_global(a):
            return a
        if jax.process_count() == 1:
            return jax.device_put(a, repl)
        host = np.asarray(a)
        return jax.make_array_from_callback(host.shape, repl, lambda idx: host[idx])
    return jax.tree_util.tree_map(put, tree)


def run_streams(learner: StreamLearner, keys: PRNGKey, xs, states: State, *,
                mask=None, trace: Union[str, TraceFn, None] = "loss",
                nonfinite: str = "raise", step_offset=0, devices: Devices = None, gather: bool = True):
    """`run_stream` vmapped over many streams, the streams sharded over devices.

    With several devices the stream axis is split over a one-axis mesh
    (``jax.sharding.Mesh`` named ``"streams"``) by `jax.shard_map`: each
    device runs the vmapped scan on its own block of streams, with no
    communication. B is padded to a multiple of the device count with copies
    of stream 0, whose results are dropped. Each device runs the program that
    ``run_streams(..., devices=1)`` runs on its block of streams, and the
    results equal those single-device runs of the blocks bit for bit (tested
    on CPU). Against one device running all B streams in one batch they can
    differ by a few ulps where a learner calls exp/log/erfinv (PACBO; slpc and
    landmark_mds were bit-equal in our checks): XLA:CPU evaluates these
    with a SIMD polynomial on full vector lanes and a scalar routine on the
    remainder, so exp(x) depends on where x falls in the array (``jnp.exp``
    of 64 floats in one call vs in blocks of 3 differs in 5 of them). The
    same happens between B=2 and B=8 on one device.
    With B a multiple of the device count the results stay sharded (feed
    them to the next call); otherwise dropping the padding re-lays them out.

    Under `jax.distributed` (several processes, ``jax.devices()`` listing every
    process's devices) the same call runs each process's share of the
    streams: every process calls it with the same arguments (NumPy inputs
    identical on every process, or global arrays), and each materialises only
    its own rows.

    Args:
      keys: (B,) keys.
      xs: (B, T, d) streams (pad ragged streams and pass `mask`).
      states: batched states from `init_streams` (leading axis B). Different
        numeric params per stream live in the states.
      mask: optional bool (B, T).
      trace, nonfinite, step_offset: as in `run_stream` (the round keys of
        stream b are ``fold_in(keys[b], step_offset + t)``).
      devices: None (every device of the default platform), an int n (the
        first n of them), a platform name (``"cpu"``, ``"gpu"``, ``"tpu"``) or
        a list of `jax.Device`. One device: a plain jitted vmap.
      gather: several processes only: True (default) returns NumPy results,
        the padding dropped, on every process (an all-gather of the states and
        traces); False returns global `jax.Array`s sharded over the processes
        (then B must be a multiple of the device count).

    Returns:
      ``(final_states, traces)`` with leading axis B.
    """
    xnp = np if is_concrete(xs) and not _is_global(xs) else jnp
    if xnp is np:
        xs = np.asarray(xs)
    if xs.ndim != 3:
        raise ValueError(f"xs must have shape (B, T, d); got {tuple(xs.shape)}")
    B, T, d = xs.shape
    if mask is not None and jnp.shape(mask) != (B, T):
        raise ValueError(f"mask must have shape ({B}, {T}); got {tuple(jnp.shape(mask))}")
    devs = _resolve_devices(devices)
    trace_fn = _resolve_trace(trace)
    if _is_global(xs):
        # rows live on other processes: no host-side look at the values
        if nonfinite not in ("raise", "skip"):
            raise ValueError(f"nonfinite must be 'raise' or 'skip'; got {nonfinite!r}")
        all_valid = False
        if mask is None:
            mask = jnp.ones((B, T), bool)
    else:
        mnp = np if is_concrete(mask) else jnp
        flat_mask = None if mask is None else mnp.reshape(mnp.asarray(mask), (B * T,))
        flat, flat_mask, all_valid = _prepare_stream(xnp.reshape(xs, (B * T, d)), flat_mask, nonfinite)
        xs = flat.reshape(B, T, d)
        mask = None if flat_mask is None else flat_mask.reshape(B, T)
    if len(devs) == 1 and jax.process_count() == 1:
        run = _compiled_scan(learner.update, trace_fn, all_valid, mask is not None, True)
        with jax.default_device(devs[0]):
            return run(keys, xs, states, mask, step_offset)
    kd, impl = _key_parts(keys)
    B_pad = -(-B // len(devs)) * len(devs)
    _, rows, repl = _mesh(devs)
    run = _sharded_scan(learner.update, trace_fn, all_valid, mask is not None, devs, impl)
    args = [_place(kd, rows, B_pad), _place(xs, rows, B_pad), _place(states, rows, B_pad)]
    if mask is not None:
        args.append(_place(mask, rows, B_pad))
    args.append(_replicate(jnp.asarray(step_offset), repl) if jax.process_count() > 1 else step_offset)
    return _finish(run(*args), B, gather)


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


def read_npy_blocks(path, block_rows: int = 65536) -> Iterable[np.ndarray]:
    """Blocks of rows of a (T, d) ``.npy`` file, read through a memory map
    (host memory: one block, whatever the file's size)."""
    arr = np.load(path, mmap_mode="r")
    if arr.ndim != 2:
        raise ValueError(f"{path}: expected a (T, d) array; got shape {arr.shape}")
    for i in range(0, arr.shape[0], block_rows):
        yield np.array(arr[i:i + block_rows])


def read_csv_blocks(path, block_rows: int = 65536, *, delimiter: str = ",", skip_header: int = 0,
                    columns: Optional[Sequence[int]] = None) -> Iterable[np.ndarray]:
    """Blocks of rows of a numeric CSV file (host memory: one block).

    Args:
      path: the file.
      block_rows: rows parsed at a time.
      delimiter: column separator.
      skip_header: lines to skip at the top.
      columns: indices of the columns to keep (default: all).
    """
    import itertools
    with open(path) as f:
        for _ in range(skip_header):
            next(f, None)
        while True:
            lines = list(itertools.islice(f, block_rows))
            if not lines:
                return
            block = np.loadtxt(lines, delimiter=delimiter, usecols=columns, ndmin=2)
            yield block


def _n_rows(xs) -> Optional[int]:
    if isinstance(xs, (np.ndarray, jax.Array)):
        return int(xs.shape[0])
    if isinstance(xs, (str, os.PathLike)) and str(xs).endswith(".npy"):
        return int(np.load(xs, mmap_mode="r").shape[0])
    return None


def _source(xs, chunk_size):
    if isinstance(xs, (str, os.PathLike)):
        path = str(xs)
        if path.endswith(".npy"):
            return read_npy_blocks(path, chunk_size)
        if path.endswith((".csv", ".txt", ".tsv")):
            return read_csv_blocks(path, chunk_size, delimiter="\t" if path.endswith(".tsv") else ",")
        raise ValueError(f"{path}: a path must name a .npy or .csv/.tsv/.txt file")
    return xs


def _iter_chunks(xs, chunk_size, skip: int = 0):
    """Chunks of exactly chunk_size rows (the last one shorter), after `skip` rows."""
    if isinstance(xs, (np.ndarray, jax.Array)):
        for i in range(skip, xs.shape[0], chunk_size):
            yield np.asarray(xs[i:i + chunk_size])
        return
    buf = []
    n = 0
    for block in xs:
        block = np.asarray(block)
        if block.ndim == 1:
            block = block[None]
        if skip:
            drop = min(skip, block.shape[0])
            block, skip = block[drop:], skip - drop
        buf.append(block)
        n += block.shape[0]
        while n >= chunk_size:
            cat = np.concatenate(buf)
            yield cat[:chunk_size]
            rest = cat[chunk_size:]
            buf, n = ([rest] if rest.shape[0] else []), rest.shape[0]
    if skip:
        raise ValueError(f"the stream ended {skip} rows before the checkpoint's position")
    if n:
        yield np.concatenate(buf)


class _Prefetcher:
    """Reads and prepares the next chunks in a thread while the device runs
    the current one; at most `depth` prepared chunks wait (bounded memory)."""

    _END = object()

    def __init__(self, gen, depth: int):
        self._q = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, args=(gen,), daemon=True)
        self._thread.start()

    def _work(self, gen):
        try:
            for item in gen:
                if not self._put(item):
                    return
            self._put(self._END)
        except BaseException as e:  # handed to the consumer, raised there
            self._put(e)

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self):
        while True:
            item = self._q.get()
            if item is self._END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def close(self):
        self._stop.set()
        self._thread.join(timeout=5)


class _Progress:
    def __init__(self, total: Optional[int], start_done: int):
        self.total, self.t0, self.start_done = total, time.perf_counter(), start_done

    def update(self, done: int, loss: float):
        rate = (done - self.start_done) / max(time.perf_counter() - self.t0, 1e-9)
        if self.total:
            frac = min(done / self.total, 1.0)
            bar = "#" * int(30 * frac) + "." * (30 - int(30 * frac))
            eta = (self.total - done) / rate if rate > 0 else float("inf")
            line = (f"\r[{bar}] {100 * frac:5.1f}% {done:,}/{self.total:,} points, {rate:,.0f}/s, "
                    f"ETA {eta:,.0f} s, cumulative loss {loss:.4g}")
        else:
            line = f"\r[jaxstream] {done:,} points, {rate:,.0f}/s, cumulative loss {loss:.4g}"
        print(line, end="", file=sys.stderr, flush=True)

    def close(self):
        print(file=sys.stderr, flush=True)


def _save_checkpoint(path, learner, state, key, n_done, n_valid, total, kept, chunk_size):
    from . import checkpoint
    if kept is not None:  # the losses so far, beside the checkpoint, written first and atomically
        tmp = f"{path}.losses.tmp.npy"
        np.save(tmp, np.concatenate(kept) if kept else np.zeros(0, np.float32))
        os.replace(tmp, f"{path}.losses.npy")
    meta = dict(n_done=n_done, n_valid=n_valid, cumulative_loss=total, key=_key_fingerprint(key),
                keep_losses=kept is not None, chunk_size=chunk_size)
    checkpoint.save(path, learner, state, metadata=meta, allow_missing_config=learner.config is None)


def _key_fingerprint(key) -> list:
    kd, _ = _key_parts(key)
    return np.asarray(kd).ravel().tolist()


def run_stream_chunked(learner: StreamLearner, key: PRNGKey, xs, state: State, *,
                       chunk_size: int = 4096, keep_losses: bool = False, nonfinite: str = "raise",
                       progress: bool = False, prefetch: int = 2,
                       checkpoint: Optional[Union[str, os.PathLike]] = None, checkpoint_every: int = 16,
                       resume: bool = False,
                       on_chunk: Optional[Callable[[int, State, np.ndarray], None]] = None):
    """Run a very long stream chunk by chunk with bounded device and host memory.

    One compiled scan of ``chunk_size`` rounds is reused for every chunk (a
    chunk with a non-finite row, and the last, shorter one, use a second,
    masked scan), and round keys are ``fold_in(key, t)`` with the global t, so
    the result equals one `run_stream` call bit for bit. A reader thread
    prepares the next chunks while the device runs the current one (JAX
    dispatch is asynchronous), so reading a file overlaps with compute.

    Memory: on the device, the state plus one chunk (and its losses); on the
    host, at most ``prefetch + 2`` chunks (with ``keep_losses=False``).

    Args:
      xs: a (T, d) array; a path to a ``.npy`` file (memory-mapped: a file
        larger than memory is fine) or to a numeric ``.csv``/``.tsv`` file
        without header (parsed block by block; use `read_csv_blocks` for
        headers or column choices); or any iterable of (n_i, d) blocks (e.g.
        a generator reading a database), so the whole stream never has to be
        in memory.
      chunk_size: rounds per compiled scan.
      keep_losses: keep every prequential loss on the host (O(T) host memory);
        by default only their running sum is kept.
      nonfinite: ``"raise"`` (default: ValueError naming the chunk) or
        ``"skip"`` rows with NaN/inf.
      progress: draw a progress bar on stderr (with percentage and ETA when
        the length is known: arrays and ``.npy`` files).
      prefetch: chunks read ahead by the reader thread (0: read in the main
        thread, no overlap).
      checkpoint: a file to save the state to every `checkpoint_every` chunks
        and at the end (`jaxstream.checkpoint.save`, atomic: a kill leaves the
        previous checkpoint intact). With ``keep_losses=True`` the losses so
        far go to ``<checkpoint>.losses.npy``.
      checkpoint_every: chunks between checkpoints.
      resume: when `checkpoint` exists, start from it: load the state, skip
        the rows it has already learned and go on; the result equals one
        uninterrupted call bit for bit. The checkpoint must come from the same
        learner configuration, key, chunk size and `keep_losses`
        (ValueError otherwise); `state` is then ignored.
      on_chunk: optional callback ``(n_done, state, chunk_losses)`` after each
        chunk (e.g. to log).

    Returns:
      ``(final_state, ChunkedResult)``.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1; got {chunk_size}")
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be >= 1; got {checkpoint_every}")
    if nonfinite not in ("raise", "skip"):
        raise ValueError(f"nonfinite must be 'raise' or 'skip'; got {nonfinite!r}")
    if resume and checkpoint is None:
        raise ValueError("resume=True needs checkpoint=<path>")
    run_full = _compiled_scan(learner.update, _trace_loss, True, False, False)
    run_masked = _compiled_scan(learner.update, _trace_loss, False, True, False)
    start = time.perf_counter()
    n_done, n_valid, total = 0, 0, 0.0
    kept = [] if keep_losses else None
    if resume and os.path.exists(checkpoint):
        from . import checkpoint as ckpt
        state, meta = ckpt.load(checkpoint, learner, allow_missing_config=learner.config is None)
        if meta.get("key") != _key_fingerprint(key):
            raise ValueError(f"{checkpoint} was written for another key")
        if meta.get("keep_losses") != keep_losses:
            raise ValueError(f"{checkpoint} was written with keep_losses={meta.get('keep_losses')}")
        if meta.get("chunk_size") != chunk_size:
            raise ValueError(f"{checkpoint} was written with chunk_size={meta.get('chunk_size')}: resume with "
                             "the same chunk size")
        n_done, n_valid, total = int(meta["n_done"]), int(meta["n_valid"]), float(meta["cumulative_loss"])
        if keep_losses:
            kept = [np.load(f"{checkpoint}.losses.npy")]
            if kept[0].shape[0] != n_done:
                raise ValueError(f"{checkpoint}.losses.npy does not match the checkpoint")

    def prepared():
        offset = n_done
        for chunk in _iter_chunks(_source(xs, chunk_size), chunk_size, skip=n_done):
            chunk = np.asarray(check_points(chunk, f"xs (the chunk starting at row {offset})",
                                            allow_nonfinite=(nonfinite == "skip")))
            n = chunk.shape[0]
            offset += n
            valid = np.isfinite(chunk).all(axis=1)
            if n == chunk_size and valid.all():
                yield chunk, None, n
                continue
            if n < chunk_size:
                chunk = np.concatenate([chunk, np.zeros((chunk_size - n, chunk.shape[1]), chunk.dtype)])
                valid = np.concatenate([valid, np.zeros(chunk_size - n, bool)])
            yield chunk, valid, n

    chunks = _Prefetcher(prepared(), prefetch) if prefetch > 0 else prepared()
    bar = _Progress(_n_rows(xs), n_done) if progress else None
    n_chunks = 0
    try:
        for chunk, valid, n in chunks:
            if valid is None:
                state, losses = run_full(key, chunk, state, None, n_done)
            else:
                state, losses = run_masked(key, chunk, state, valid, n_done)
            losses = np.asarray(losses)[:n]  # waits for this chunk; the reader is already on the next
            total += float(losses.astype(np.float64).sum())
            if keep_losses:
                kept.append(losses)
            n_done += n
            n_valid += n if valid is None else int(valid[:n].sum())
            n_chunks += 1
            if checkpoint is not None and n_chunks % checkpoint_every == 0:
                _save_checkpoint(checkpoint, learner, state, key, n_done, n_valid, total, kept, chunk_size)
            if on_chunk is not None:
                on_chunk(n_done, state, losses)
            if bar is not None:
                bar.update(n_done, total)
    finally:
        if isinstance(chunks, _Prefetcher):
            chunks.close()
        if bar is not None:
            bar.close()
    if checkpoint is not None and n_chunks % checkpoint_every:
        _save_checkpoint(checkpoint, learner, state, key, n_done, n_valid, total, kept, chunk_size)
    losses = np.concatenate(kept) if keep_losses and kept else (np.zeros(0) if keep_losses else None)
    return state, ChunkedResult(n_valid, total, losses, time.perf_counter() - start)
