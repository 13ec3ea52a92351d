"""Many streams at once: `init_streams` and `run_streams`, vmapped, the stream axis
sharded over devices and, under `jax.distributed`, over processes."""
from __future__ import annotations

import functools
from typing import Any, Sequence, Union

import numpy as np
import jax
import jax.numpy as jnp
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from ._caches import cached
from ._checks import check_bytes_fit, is_concrete, tree_nbytes
from ._loops import static_if_differentiated, static_trip_counts_enabled
from ._core import PRNGKey, State, StreamLearner, TraceFn, _compiled_scan, _prepare_stream, _resolve_trace

__all__ = ["init_streams", "run_streams"]


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


@cached(4)
def _jitted_init(init, in_axes, static_loops: bool):
    # jitted (not op by op), so that one device and a mesh run the same fused
    # program and agree bit for bit; `static_loops` (`jaxstream._loops`) is part of the key
    del static_loops
    return jax.jit(jax.vmap(init, in_axes=in_axes))


@cached(4)
def _sharded_init(init, devs: tuple, impl, x_init_batched: bool, params_batched: bool, static_loops: bool):
    del static_loops  # part of the key
    mesh, rows, _ = _mesh(devs)

    def local(kd, x_inits, params):
        in_axes = (0, 0 if x_init_batched else None, 0 if params_batched else None)
        return jax.vmap(init, in_axes=in_axes)(_wrap_keys(kd, impl), x_inits, params)

    specs = (P("streams"), P("streams") if x_init_batched else P(), P("streams") if params_batched else P())
    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=specs, out_specs=P("streams"), check_vma=False))


@cached(4)
def _sharded_scan(update, trace_fn, all_valid: bool, masked: bool, devs: tuple, impl, static_loops: bool):
    del static_loops  # part of the key
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
    with static_if_differentiated(x_inits, params):  # jax.grad through it needs no context
        return _init_streams(learner, keys, x_inits, params, in_axes, devs, x_init_batched, params_batched, gather)


# Wide signature: init_streams' checked arguments and the devices' layout.
def _init_streams(learner, keys, x_inits, params, in_axes, devs, x_init_batched, params_batched, gather):
    static = static_trip_counts_enabled()
    kd, impl = _key_parts(keys)
    B = kd.shape[0]
    if len(devs) == 1 and jax.process_count() == 1:
        init = _jitted_init(learner.init, in_axes, static)
        with jax.default_device(devs[0]):  # part of the trace's key: the check traces in the same context
            _check_states_fit(init.trace(keys, x_inits, params), B, 1)
            return init(keys, x_inits, params)
    B_pad = -(-B // len(devs)) * len(devs)
    _, rows, repl = _mesh(devs)
    args = (_place(kd, rows, B_pad),
            _place(x_inits, rows, B_pad) if x_init_batched else _replicate(x_inits, repl),
            _place(params, rows, B_pad) if params_batched else _replicate(params, repl))
    init = _sharded_init(learner.init, devs, impl, x_init_batched, params_batched, static)
    _check_states_fit(init.trace(*args), B, len(devs))
    return _finish(init(*args), B, gather)


def _check_states_fit(traced, B: int, n_devices: int) -> None:
    """Refuse a batch whose states cannot fit before XLA allocates them (which swaps or hangs).
    ``traced`` is the init's `jax.jit(...).trace`, which the call that follows reuses."""
    check_bytes_fit(tree_nbytes(traced.out_info), f"the states of {B:,} streams",
                    "split the streams into smaller batches (or lower the learner's capacities)", n_devices)


def _replicate(tree, repl):
    def put(a):
        if _is_global(a):
            return a
        if jax.process_count() == 1:
            return jax.device_put(a, repl)
        host = np.asarray(a)
        return jax.make_array_from_callback(host.shape, repl, lambda idx: host[idx])
    return jax.tree_util.tree_map(put, tree)


# Wide signature: a public driver's keyword options, each documented.
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
    differ by a few ulps where a learner calls transcendental functions: a
    backend may evaluate them differently depending on where a value falls
    in the batch (`benchmarks/README.md` has the XLA:CPU case).
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
        traces); False returns global ``jax.Array`` values sharded over the processes
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
    with static_if_differentiated(xs, states):  # jax.grad through it needs no context
        return _run_streams(learner, keys, xs, states, mask, trace_fn, all_valid, devs, B, step_offset, gather)


# Wide signature: run_streams' checked arguments and the devices' layout.
def _run_streams(learner, keys, xs, states, mask, trace_fn, all_valid, devs, B, step_offset, gather):
    if len(devs) == 1 and jax.process_count() == 1:
        run = _compiled_scan(learner.update, trace_fn, all_valid, mask is not None, True)
        with jax.default_device(devs[0]):
            return run(keys, xs, states, mask, step_offset)
    kd, impl = _key_parts(keys)
    B_pad = -(-B // len(devs)) * len(devs)
    _, rows, repl = _mesh(devs)
    run = _sharded_scan(learner.update, trace_fn, all_valid, mask is not None, devs, impl,
                        static_trip_counts_enabled())
    args = [_place(kd, rows, B_pad), _place(xs, rows, B_pad), _place(states, rows, B_pad)]
    if mask is not None:
        args.append(_place(mask, rows, B_pad))
    args.append(_replicate(jnp.asarray(step_offset), repl) if jax.process_count() > 1 else step_offset)
    return _finish(run(*args), B, gather)
