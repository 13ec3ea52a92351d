"""Soak test: each learner on a long stream in chunks, memory and speed over time.

For each learner (slpc, PACBO, landmark MDS) the stream is generated lazily
block by block (it never exists as a whole on the host) and learned with
`run_stream_chunked`. Printed per learner:

* host RSS and device bytes (the total size of live JAX arrays, plus the
  device's ``memory_stats()["bytes_in_use"]`` where the backend reports it;
  CPU does not) at the start (after the first chunk, so compiled code and the
  state are allocated) and at the end, and the peak host RSS;
* traces of ``update`` (a Python counter in its body): one for the scan of
  full chunks, one more for the masked scan of a shorter last chunk; XLA
  backend compilations during the full chunks after the first (0 expected);
* seconds per chunk: the first (compile included), the median and the
  fastest chunk of the first and of the last quarter of the other full
  chunks (no slowdown expected; on a shared machine the fastest is the least
  disturbed by other jobs), and points per second;
* the cumulative prequential loss and its mean over the first and last tenth
  of the stream (a sanity check that the learner kept learning).

Usage:
  flock /tmp/jaxstream-bench.lock python benchmarks/soak.py [--n 1000000]
      [--chunk 4096] [--learners slpc pacbo landmarks] [--pacbo-steps 500]

``--n`` sets the stream length (10^6 by default; PACBO's default 500 MCMC
steps a round make 10^6 rounds take hours on a CPU, see ``--pacbo-steps``).
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import sys
import time

import numpy as np
import jax

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import jaxstream as js  # noqa: E402
from jax._src import dispatch, monitoring  # noqa: E402  (the compile event's name)

_COMPILES = [0]


def _on_event(event, duration, **kwargs):
    if event == dispatch.BACKEND_COMPILE_EVENT:
        _COMPILES[0] += 1


monitoring.register_event_duration_secs_listener(_on_event)


def host_rss_mb() -> float:
    """Current resident set size (Linux /proc), else the peak from getrusage."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def device_bytes() -> tuple[int, int | None]:
    """(bytes of live JAX arrays, backend bytes_in_use or None)."""
    live = sum(a.nbytes for a in jax.live_arrays())
    stats = jax.devices()[0].memory_stats()
    return live, (stats or {}).get("bytes_in_use")


def _fmt_dev(live, in_use):
    s = f"{live / 2**20:.2f} MiB live arrays"
    return s + (f", {in_use / 2**20:.1f} MiB in use" if in_use is not None else "")


# Stationary streams, generated block by block (seeded per block).

def cubic_blocks(n, block, seed=0):
    for i, start in enumerate(range(0, n, block)):
        m = min(block, n - start)
        rng = np.random.default_rng([seed, i])
        x = rng.uniform(-1, 1, m)
        yield np.stack([x, x ** 3 - x], 1).astype(np.float32) + 0.094 * rng.standard_normal((m, 2)).astype(np.float32)


FOUR = np.array([[0.0, 0.0], [-4.0, -1.0], [0.0, 7.0], [5.0, 2.0]], np.float32)


def four_group_blocks(n, block, seed=0):
    for i, start in enumerate(range(0, n, block)):
        m = min(block, n - start)
        rng = np.random.default_rng([seed, i])
        yield FOUR[rng.integers(0, 4, m)] + rng.standard_normal((m, 2)).astype(np.float32)


def s_curve_blocks(n, block, seed=0):
    for i, start in enumerate(range(0, n, block)):
        m = min(block, n - start)
        X, _ = js.datasets.make_s_curve(m, noise=0.05, random_state=seed * 100003 + i)
        yield X.astype(np.float32)


def soak(name, learner, blocks, x_init, *, n, chunk, seed=0):
    traces = [0]
    inner = learner.update

    def counted_update(key, state, x):
        traces[0] += 1  # runs only while tracing
        return inner(key, state, x)

    learner = learner._replace(update=counted_update)
    key = jax.random.key(seed)
    state = learner.init(key, x_init)
    times, marks = [], {}
    sums = dict(first=0.0, n_first=0, last=0.0, n_last=0)
    tenth = max(n // 10, 1)

    compiles, sizes, rss, live = [], [], [], []

    def on_chunk(n_done, state, chunk_losses):
        jax.block_until_ready(state)
        times.append(time.perf_counter())
        compiles.append(_COMPILES[0])
        sizes.append(len(chunk_losses))
        rss.append(host_rss_mb())
        live.append(device_bytes()[0])
        if len(times) == 1:
            marks["start"] = (host_rss_mb(), device_bytes(), _COMPILES[0])
        # Sums only: on CPU np.asarray(jax_array) is a view that would keep each chunk's buffer alive.
        start = n_done - len(chunk_losses)
        if start < tenth:
            first = np.asarray(chunk_losses[: max(0, tenth - start)], np.float64)
            sums["first"] += first.sum()
            sums["n_first"] += first.size
        if n_done > n - tenth:
            last = np.asarray(chunk_losses[max(0, len(chunk_losses) - (n_done - (n - tenth))):], np.float64)
            sums["last"] += last.sum()
            sums["n_last"] += last.size

    rss0 = host_rss_mb()
    t0 = time.perf_counter()
    state, res = js.run_stream_chunked(learner, key, blocks, state, chunk_size=chunk, on_chunk=on_chunk)
    jax.block_until_ready(state)
    per_chunk = np.diff(np.array([t0] + times))
    rss_start, (live_start, use_start), compiles_start = marks["start"]
    live_end, use_end = device_bytes()
    compiles_after = _COMPILES[0] - compiles_start
    # The last chunk, when shorter, runs the masked (padded) scan: one more
    # trace and compilation by design, not a retrace of the steady state.
    n_full = sum(1 for m in sizes if m == chunk)
    steady_compiles = compiles[max(n_full - 1, 0)] - compiles[0] if n_full else 0
    steady = per_chunk[1:n_full]  # full chunks after the first (compiled) one
    # Quarters rather than a few chunks: on a shared machine single chunks vary with other jobs;
    # the fastest chunk of each quarter is the least disturbed.
    q = max(len(steady) // 4, 1)
    early = statistics.median(steady[:q]) if len(steady) else float("nan")
    late = statistics.median(steady[-q:]) if len(steady) >= 2 else float("nan")
    early_min = steady[:q].min() if len(steady) else float("nan")
    late_min = steady[-q:].min() if len(steady) >= 2 else float("nan")
    f_mean = sums["first"] / sums["n_first"] if sums["n_first"] else float("nan")
    l_mean = sums["last"] / sums["n_last"] if sums["n_last"] else float("nan")
    print(f"\n== {name} {learner.config or ''}: {res.n_points:,} points in {len(per_chunk)} chunks of {chunk} "
          f"({res.seconds:.1f} s) ==")
    mid = len(rss) // 2
    print(f"host RSS: {rss0:.0f} MiB before init, {rss_start:.0f} MiB after chunk 1, {rss[mid]:.0f} MiB after "
          f"chunk {mid + 1}, {rss[max(n_full - 1, 0)]:.0f} MiB after the last full chunk {n_full}, "
          f"{host_rss_mb():.0f} MiB at the end (peak {peak_rss_mb():.0f} MiB)")
    print(f"live JAX arrays after chunk 1 / middle / last full chunk: {live[0] / 2**20:.3f} / "
          f"{live[mid] / 2**20:.3f} / {live[max(n_full - 1, 0)] / 2**20:.3f} MiB")
    print(f"device: after chunk 1 {_fmt_dev(live_start, use_start)}; at the end {_fmt_dev(live_end, use_end)}")
    partial = len(sizes) - n_full
    print(f"traces of update: {traces[0]} ({'one scan for full chunks' + (', one masked scan for the last partial chunk' if partial else '')}); "
          f"XLA compilations during full chunks 2..{n_full}: {steady_compiles}, after chunk 1 in all: {compiles_after}")
    print(f"seconds per chunk: first {per_chunk[0]:.2f} (compile included); first quarter of the full chunks "
          f"after it: median {early:.3f}, fastest {early_min:.3f}; last quarter: median {late:.3f}, fastest "
          f"{late_min:.3f} (late/early: median {late / early:.2f}, fastest {late_min / early_min:.2f}); "
          f"steady state {len(steady) * chunk / max(steady.sum(), 1e-9):,.0f} points/s (full chunks 2..{n_full})")
    print(f"prequential loss: cumulative {res.cumulative_loss:.6g}; mean over the first tenth {f_mean:.4g}, "
          f"over the last tenth {l_mean:.4g}")
    return dict(traces=traces[0], compiles_after=compiles_after, steady_compiles=steady_compiles,
                early=early, late=late, early_min=early_min, late_min=late_min,
                rss=(rss_start, host_rss_mb()), live=(live_start, live_end))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="stream length per learner")
    ap.add_argument("--n-pacbo", type=int, default=None, help="stream length for PACBO (default: --n)")
    ap.add_argument("--chunk", type=int, default=4096, help="rounds per compiled chunk")
    ap.add_argument("--learners", nargs="+", default=["slpc", "pacbo", "landmarks"],
                    choices=["slpc", "pacbo", "landmarks"])
    ap.add_argument("--pacbo-steps", type=int, default=500, help="PACBO MCMC steps per round")
    args = ap.parse_args(argv)
    print(f"jax {jax.__version__}, {jax.devices()[0].platform} ({jax.devices()[0].device_kind}), "
          f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}; "
          f"n={args.n:,}, chunk={args.chunk}")
    rng = np.random.default_rng(123)
    if "slpc" in args.learners:
        x_init = next(cubic_blocks(20, 20, seed=99))
        soak("slpc", js.slpc(), cubic_blocks(args.n, 10_000),
             x_init, n=args.n, chunk=args.chunk)
    if "pacbo" in args.learners:
        n = args.n_pacbo or args.n
        x_init = FOUR[rng.integers(0, 4, 20)] + rng.standard_normal((20, 2)).astype(np.float32)
        soak("pacbo",
             js.pacbo(50, 256, args.pacbo_steps), four_group_blocks(n, 10_000), x_init, n=n,
             chunk=args.chunk)
    if "landmarks" in args.learners:
        x_init = s_curve_blocks(20, 20, seed=99).__next__()
        soak("landmark_mds", js.landmark_mds(100), s_curve_blocks(args.n, 10_000),
             x_init, n=args.n, chunk=args.chunk)


if __name__ == "__main__":
    main()
