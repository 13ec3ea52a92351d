"""Throughput of every learner: one table, one run, any backend.

Two parts, both through the public API only (``jaxstream.slpc(...)``,
``init_streams``, ``run_streams``, ``run_stream``):

1. ``overhead``: `run_stream` against a bare ``lax.scan`` of ``update`` on one
   stream (µs per point, steady state), unmasked and with a mask. The driver
   should cost at most 1.3x the bare scan.
2. ``table``: learner x batch size -> stream-updates/s (steady state), compile
   seconds (first call minus a steady call), bytes of state per stream, on
   the current backend and all its devices; then the same table in a
   subprocess with 4 forced host (CPU) devices.
3. ``disk``: `run_stream_chunked` from a ``.npy`` file (with and without the
   reader thread, with checkpoints) against one in-memory `run_stream` call.

Run (the same command on CPU and GPU)::

    flock /tmp/jaxstream-bench.lock python benchmarks/throughput.py
    python benchmarks/throughput.py --part table --batches 1,16,256,4096 --learners slpc
    python benchmarks/throughput.py --part overhead

Cells whose estimated run time exceeds ``--cell-seconds`` or whose states
exceed ``--max-state-gb`` are printed as skipped, with the reason.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import jaxstream as js  # noqa: E402
from jaxstream import datasets  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import timed  # noqa: E402


# ---------------------------------------------------------------------------
# Learners and their streams
# ---------------------------------------------------------------------------

def _mixture(n, seed):
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0], [4.0, 4.0]])
    return (centres[rng.integers(0, 4, n)] + 0.5 * rng.normal(size=(n, 2))).astype(np.float32)


def make_learner(name):
    """(learner, stream generator(n, seed) -> (n, d) float32, n_init)."""
    if name == "slpc":
        return (js.slpc(),
                lambda n, seed: np.asarray(datasets.make_cubic_stream(n, seed=seed), np.float32), 20)
    if name == "pacbo":
        return js.pacbo(), _mixture, 10
    if name == "landmark_mds":
        return (js.landmark_mds(),
                lambda n, seed: np.asarray(datasets.make_s_curve(n, random_state=seed)[0], np.float32), 20)
    if name == "landmark_mds_cached1500":
        # the issue-9 case: an (N, N) distance cache in the state, N = 1500
        return (js.landmark_mds(100, buffer_size=1500, cache_distances=True),
                lambda n, seed: np.asarray(datasets.make_s_curve(n, random_state=seed)[0], np.float32), 20)
    raise ValueError(f"unknown learner {name!r}")


def _streams(gen, B, n, seed=0):
    """(B, n, d): stream b is a shuffled copy of one long stream (cheap for large B)."""
    base = gen(max(4 * n, 2000), seed)
    rng = np.random.default_rng(seed + 1)
    idx = np.stack([rng.choice(base.shape[0], n, replace=False) for _ in range(min(B, 64))])
    return base[idx[np.arange(B) % idx.shape[0]]]


def _state_bytes(state):
    return sum(int(np.prod(leaf.shape)) * leaf.dtype.itemsize for leaf in jax.tree_util.tree_leaves(state)
               if hasattr(leaf, "dtype") and not jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key))


# ---------------------------------------------------------------------------
# Part 1: driver overhead against a bare scan
# ---------------------------------------------------------------------------

def overhead(names, T, repeats):
    print(f"\n## run_stream vs a bare lax.scan of update (one stream, T={T}, µs per learned point, best of "
          f"{repeats} interleaved calls)\n# masked: run_stream with 1 row in 7 masked out, against a bare scan "
          f"of the kept rows")
    print(f"{'learner':<26} {'bare scan':>10} {'run_stream':>11} {'ratio':>6} {'bare kept':>10} {'masked':>9} "
          f"{'ratio':>6}")
    for name in names:
        learner, gen, n0 = make_learner(name)
        key = jax.random.key(0)
        data = _streams(gen, 1, n0 + T)[0]
        s0 = jax.block_until_ready(learner.init(key, data[:n0]))
        xs = data[n0:]

        @jax.jit
        def bare(key, xs, state):
            def step(state, inp):
                x, t = inp
                state, info = learner.update(jax.random.fold_in(key, t), state, x)
                return state, info.loss
            return lax.scan(step, state, (xs, jnp.arange(xs.shape[0])))

        mask = np.ones(T, bool)
        mask[::7] = False  # the masked run learns the same rows as a bare scan of xs[mask]
        kept = xs[mask]
        calls = {"bare": lambda: bare(key, xs, s0), "bare_kept": lambda: bare(key, kept, s0),
                 "run": lambda: js.run_stream(learner, key, xs, s0),
                 "masked": lambda: js.run_stream(learner, key, xs, s0, mask=mask)}
        best = {k: np.inf for k in calls}
        for fn in calls.values():
            jax.block_until_ready(fn())  # compile
        for _ in range(repeats):  # interleaved, best of: robust to other jobs sharing the CPU
            for k, fn in calls.items():
                t = time.perf_counter()
                jax.block_until_ready(fn())
                best[k] = min(best[k], time.perf_counter() - t)
        t_bare, t_run = best["bare"], best["run"]
        t_mask = best["masked"] * T / kept.shape[0]
        t_kept = best["bare_kept"] * T / kept.shape[0]
        us = lambda t: 1e6 * t / T
        print(f"{name:<26} {us(t_bare):>10.1f} {us(t_run):>11.1f} {t_run / t_bare:>6.2f} "
              f"{us(t_kept):>10.1f} {us(t_mask):>9.1f} {t_mask / t_kept:>6.2f}", flush=True)


# ---------------------------------------------------------------------------
# Part 2: the throughput table
# ---------------------------------------------------------------------------

def _warm_state(learner, gen, n0, warmup):
    """One stream's state after ``warmup`` rounds (the learners' costs depend on the phase: a
    landmark buffer filling up, a curve growing), so every cell times the same steady phase."""
    key = jax.random.key(7)
    x = gen(n0 + warmup, 99)
    s0 = learner.init(key, x[:n0])
    if warmup:
        s0, _ = js.run_stream(learner, key, x[n0:], s0)
    return jax.block_until_ready(s0)


def table(names, batches, updates_per_cell, cell_seconds, max_state_gb, repeats, devices, min_steps=8,
          warmup=256):
    devs = jax.devices() if devices is None else jax.devices()[:devices]
    print(f"\n## throughput: backend={jax.default_backend()}, {len(devs)} device(s): "
          f"{devs[0].device_kind}; run_streams sharded over them")
    print(f"# every stream starts from one stream's state after {warmup} rounds (copied B times), then runs"
          f" T new rounds of its own data")
    print(f"{'learner':<14} {'B':>6} {'T':>5} {'stream-updates/s':>17} {'compile s':>10} "
          f"{'state B/stream':>15}")
    for name in names:
        learner, gen, n0 = make_learner(name)
        warm = _warm_state(learner, gen, n0, warmup)
        rate = None
        for B in batches:
            T = int(max(min_steps, min(256, updates_per_cell // B)))
            keys = jax.random.split(jax.random.key(1), B)
            per_stream = _state_bytes(warm)
            if per_stream * B > max_state_gb * 2**30:
                print(f"{name:<14} {B:>6} {'':>5} {'skipped: states need':>17} "
                      f"{per_stream * B / 2**30:.1f} GiB > --max-state-gb", flush=True)
                continue
            if rate is not None and B * T / rate > cell_seconds:
                print(f"{name:<14} {B:>6} {T:>5} {'skipped:':>17} ~{B * T / rate:.0f} s at the last rate "
                      f"> --cell-seconds", flush=True)
                continue
            data = _streams(gen, B, n0 + T)
            try:
                states = jax.tree_util.tree_map(lambda a: jnp.repeat(a[None], B, axis=0), warm)
                xs = data[:, n0:]
                run = lambda: js.run_streams(learner, keys, xs, states, devices=devs)
                _, first, steady = timed(run, repeats=repeats)
            except jax.errors.JaxRuntimeError as e:  # the states fit, a step's temporaries did not
                if "RESOURCE_EXHAUSTED" not in str(e):
                    raise
                print(f"{name:<14} {B:>6} {T:>5} {'skipped:':>17} out of device memory ({str(e).splitlines()[0][:90]})",
                      flush=True)
                continue
            rate = B * T / steady
            print(f"{name:<14} {B:>6} {T:>5} {rate:>17,.0f} {max(first - steady, 0.0):>10.2f} "
                  f"{_state_bytes(states) // B:>15,}", flush=True)


# ---------------------------------------------------------------------------
# Part 3: a long stream from disk
# ---------------------------------------------------------------------------

def disk(name, T, chunk_size, repeats):
    import tempfile
    learner, gen, n0 = make_learner(name)
    key = jax.random.key(0)
    data = gen(n0 + T, 3)
    s0 = jax.block_until_ready(learner.init(key, data[:n0]))
    print(f"\n## a long stream from disk: {name}, T={T} rows in a .npy, chunk_size={chunk_size} "
          f"(best of {repeats}; points/s)")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "stream.npy")
        np.save(path, data[n0:])
        csv = os.path.join(tmp, "stream.csv")
        np.savetxt(csv, data[n0:], delimiter=",", fmt="%.9g")
        calls = {"run_stream, one call (in memory)": lambda: js.run_stream(learner, key, data[n0:], s0),
                 "run_stream_chunked, .npy, prefetch=2": lambda: js.run_stream_chunked(
                     learner, key, path, s0, chunk_size=chunk_size),
                 "run_stream_chunked, .npy, prefetch=0": lambda: js.run_stream_chunked(
                     learner, key, path, s0, chunk_size=chunk_size, prefetch=0),
                 "run_stream_chunked, .csv, prefetch=2": lambda: js.run_stream_chunked(
                     learner, key, csv, s0, chunk_size=chunk_size),
                 "run_stream_chunked, .csv, prefetch=0": lambda: js.run_stream_chunked(
                     learner, key, csv, s0, chunk_size=chunk_size, prefetch=0),
                 ".npy, prefetch=2, checkpoint every 2 chunks": lambda: js.run_stream_chunked(
                     learner, key, path, s0, chunk_size=chunk_size, checkpoint=os.path.join(tmp, "c.ckpt"),
                     checkpoint_every=2)}
        best = {k: np.inf for k in calls}
        for fn in calls.values():
            jax.block_until_ready(fn()[0])
        for _ in range(repeats):
            for k, fn in calls.items():
                t = time.perf_counter()
                jax.block_until_ready(fn()[0])
                best[k] = min(best[k], time.perf_counter() - t)
        for k, t in best.items():
            print(f"{k:<40} {T / t:>12,.0f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=["all", "overhead", "table", "disk"], default="all")
    ap.add_argument("--disk-learner", default="landmark_mds")
    ap.add_argument("--disk-rows", type=int, default=16384)
    ap.add_argument("--chunk-size", type=int, default=4096)
    ap.add_argument("--learners", default="slpc,pacbo,landmark_mds")
    ap.add_argument("--overhead-learners", default="slpc,pacbo,landmark_mds,landmark_mds_cached1500")
    ap.add_argument("--batches", default="1,16,256,4096")
    ap.add_argument("--updates-per-cell", type=int, default=4096,
                    help="stream-updates per timed call (T = this / B, clipped to [--min-steps, 256])")
    ap.add_argument("--warmup", type=int, default=256,
                    help="rounds one stream runs before the table; its state is copied to every stream")
    ap.add_argument("--min-steps", type=int, default=8,
                    help="fewest rounds per timed call (lower it to fit B = 4096 on a slow CPU)")
    ap.add_argument("--overhead-steps", type=int, default=300)
    ap.add_argument("--cell-seconds", type=float, default=60.0,
                    help="skip a cell whose steady call would take longer (estimated from the last B)")
    ap.add_argument("--max-state-gb", type=float, default=4.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--devices", type=int, default=None, help="use the first N devices (default: all)")
    ap.add_argument("--forced-host-devices", type=int, default=4,
                    help="also run the table on CPU with this many forced host devices (0: skip)")
    ap.add_argument("--no-subprocess", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()

    print(f"jaxstream {js.__version__}, jax {jax.__version__}, backend {jax.default_backend()}, "
          f"devices {jax.devices()}, host CPUs {os.cpu_count()}")
    if args.part in ("all", "overhead") and not args.no_subprocess:
        overhead(args.overhead_learners.split(","), args.overhead_steps, args.repeats)
    if args.part in ("all", "disk") and not args.no_subprocess:
        disk(args.disk_learner, args.disk_rows, args.chunk_size, min(args.repeats, 3))
    if args.part in ("all", "table"):
        table(args.learners.split(","), [int(b) for b in args.batches.split(",")], args.updates_per_cell,
              args.cell_seconds, args.max_state_gb, args.repeats, args.devices, args.min_steps,
              args.warmup)
        if args.forced_host_devices and not args.no_subprocess:
            env = dict(os.environ, JAX_PLATFORMS="cpu",
                       XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") +
                                  f" --xla_force_host_platform_device_count={args.forced_host_devices}"))
            cmd = [sys.executable, os.path.abspath(__file__), "--part", "table", "--no-subprocess",
                   "--learners", args.learners, "--batches", args.batches,
                   "--updates-per-cell", str(args.updates_per_cell), "--cell-seconds", str(args.cell_seconds),
                   "--max-state-gb", str(args.max_state_gb), "--repeats", str(args.repeats),
                   "--min-steps", str(args.min_steps), "--warmup", str(args.warmup)]
            print(f"\n# subprocess: {args.forced_host_devices} forced host devices (XLA_FLAGS)", flush=True)
            subprocess.run(cmd, env=env, check=True)


if __name__ == "__main__":
    main()
