"""The package's caches (issue 56, item 1): least recently used with a bound, clearable, and
resident memory bounded over many configurations in one process."""
from __future__ import annotations

import gc
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

import jaxstream as js
from jaxstream import _caches

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def small_caches():
    before = js.cache_size()
    yield
    js.set_cache_size(before)


def test_factories_return_the_same_learner_until_it_is_evicted(small_caches):
    """Equal arguments give the same learner while it is among the `cache_size()` most recently
    built; past that the least recently used is built anew, and `clear_caches` drops them all."""
    js.set_cache_size(2)
    a, b = js.landmark_mds(5), js.landmark_mds(6)
    assert js.landmark_mds(5) is a                    # a is now the most recent
    c = js.landmark_mds(7)                            # evicts b, the least recent
    assert js.landmark_mds(5) is a and js.landmark_mds(7) is c
    assert js.landmark_mds(6) is not b
    assert all(info.size <= info.maxsize for info in js.cache_info().values())
    assert js.cache_info()["jaxstream._core._cached_build"].maxsize == 2
    js.clear_caches()
    assert js.landmark_mds(5) is not a
    assert js.cache_info()["jaxstream._core._cached_build"].size == 1


def test_an_evicted_learner_still_runs_and_gives_the_same_result(small_caches):
    """Eviction (which empties JAX's caches too) costs a compile, never a result: a learner a caller
    holds runs on after its entry left the caches, bit for bit as before."""
    L = js.landmark_mds(4, buffer_size=12)
    key = jax.random.key(1)
    xs = jax.numpy.asarray(np.random.default_rng(1).normal(size=(30, 2)).astype(np.float32))
    before = js.run_stream(L, key, xs[8:], L.init(key, xs[:8]))[1]
    js.set_cache_size(1)
    for m in range(5, 9):
        js.landmark_mds(m, buffer_size=12)
    after = js.run_stream(L, key, xs[8:], L.init(key, xs[:8]))[1]
    np.testing.assert_array_equal(np.asarray(before), np.asarray(after))


def test_cache_size_must_be_a_positive_int(small_caches):
    for bad in (0, -1, 2.5, True, "8"):
        with pytest.raises(ValueError, match="positive int"):
            js.set_cache_size(bad)
    assert js.cache_size() == 64                      # tests/conftest.py's


def test_jax_caches_are_emptied_outside_a_trace_only():
    """Evictions inside a trace (a cached builder called while jit traces) defer JAX's clear to
    the next chance outside it."""
    calls = []
    _caches._evicted = 0.0

    @_caches.cached()
    def build(i):
        return i

    try:
        original, _caches.jax.clear_caches = _caches.jax.clear_caches, lambda: calls.append(1)

        @jax.jit
        def f(x):
            for i in range(2 * _caches.cache_size()):  # cache_size() evictions, while tracing
                build(i)
            assert _caches._jax_clear_pending and not calls
            return x

        f(1.0)
        assert not calls
        build(-1)                                     # outside the trace: cleared now
        assert calls == [1] and not _caches._jax_clear_pending
    finally:
        _caches.jax.clear_caches = original
        _caches._registry.remove(build)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_memory_stays_bounded_over_thirty_configurations():
    """30 configurations built and run in one fresh process (landmark MDS: the quickest to compile;
    each keeps ~15 MiB of JAX's caches when they are never emptied, +400 MiB over the run):
    resident memory after the last is within 100 MiB of the most it reached over the first 8."""
    out = subprocess.run([sys.executable, os.path.join(HERE, "_caches_worker.py"), "30", "landmarks"],
                         capture_output=True, text=True, timeout=1500, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert out.returncode == 0, out.stderr[-3000:]
    rss = np.array([float(line) for line in out.stdout.split()])
    assert rss.shape == (30,)
    assert rss[-1] < rss[:8].max() + 100 and rss[8:].max() < rss[:8].max() + 150, rss.round()


def test_near_the_mapping_limit_jax_caches_are_emptied_at_the_next_entry(monkeypatch):
    """A compilation that finds the process above `MAP_SHARE` of its mapping limit asks for JAX's
    caches to be emptied; the package's next entry point outside a trace (a cache hit too)
    empties them, with no eviction and even with ``clear_jax=False``. Below the share, nothing."""
    calls, used = [], [0]
    monkeypatch.setattr(_caches, "_map_limit", lambda: 10_000)
    monkeypatch.setattr(_caches, "_maps_in_use", lambda: used[0])
    monkeypatch.setattr(_caches.jax, "clear_caches", lambda: calls.append(1))
    monkeypatch.setattr(_caches, "_jax_clear_pending", False)
    monkeypatch.setattr(_caches, "_clear_jax", False)

    @_caches.cached()
    def build(i):
        return i

    def compile_one(k):  # a program of its own each time (counted once its 0.5 s is reached)
        jax.jit(lambda x: x * k + 1.0)(np.float32(k))
        _caches._after_compile(_caches._COMPILE_EVENT, 0.5)

    try:
        build(0)
        used[0] = 4_999
        compile_one(1)
        assert not _caches._jax_clear_pending
        build(0)
        assert not calls
        used[0] = 5_001
        compile_one(2)
        assert _caches._jax_clear_pending and not calls

        @jax.jit
        def f(x):
            build(0)                                  # inside a trace: not yet
            return x

        f(1.0)
        assert not calls
        build(0)                                      # a hit outside a trace: emptied now
        assert calls == [1] and not _caches._jax_clear_pending
    finally:
        _caches._registry.remove(build)


def test_the_mappings_are_counted_only_after_enough_compiling(monkeypatch):
    """Reading /proc costs ~1 ms per 1,000 mappings: the listener counts them after 32 compilations
    or 0.5 s of compiling, and ignores JAX's other events."""
    reads = []
    monkeypatch.setattr(_caches, "_maps_in_use", lambda: reads.append(1) or 0)
    monkeypatch.setattr(_caches, "_since_check", [0, 0.0])
    monkeypatch.setattr(_caches, "_jax_clear_pending", False)
    for _ in range(31):
        _caches._after_compile(_caches._COMPILE_EVENT, 0.001)
    _caches._after_compile("/jax/some/other/event", 1.0)
    assert not reads
    _caches._after_compile(_caches._COMPILE_EVENT, 0.001)
    assert len(reads) == 1
    _caches._after_compile(_caches._COMPILE_EVENT, 0.3)
    _caches._after_compile(_caches._COMPILE_EVENT, 0.3)
    assert len(reads) == 2


@pytest.mark.skipif(not sys.platform.startswith("linux") or jax.default_backend() != "cpu",
                    reason="XLA:CPU's kernels in /proc/self/maps")
def test_compiled_kernels_hold_mappings_until_jax_caches_are_emptied():
    """What the guard relies on: on XLA:CPU a program of many kernels adds memory mappings of its
    own (a few per kernel), JAX's listener sees its compilation, and emptying JAX's caches returns
    them."""
    events = []
    listener = lambda event, duration, **_: events.append(event)  # noqa: E731
    jax.monitoring.register_event_duration_secs_listener(listener)

    def program(x):
        out = []
        for i in range(40):  # 40 sorts: a kernel each
            x = jax.numpy.sort(x * 1.5 + i)
            out.append(jax.numpy.cumsum(x))
        return out

    try:
        x = jax.numpy.ones(64)
        jax.block_until_ready(x)
        before = _caches._maps_in_use()
        jax.block_until_ready(jax.jit(program)(x))
        after = _caches._maps_in_use()
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert _caches._COMPILE_EVENT in events
    assert _caches._map_limit() > 0
    assert after - before >= 80, (before, after)
    jax.clear_caches()
    gc.collect()
    assert _caches._maps_in_use() <= after - 80
