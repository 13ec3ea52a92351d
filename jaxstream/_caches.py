"""The package's caches of learners and compiled programs: least recently used, bounded, clearable.

Factories return the same learner for equal arguments and learners of equal
configurations share their compiled programs; the caches that make this so
hold at most `cache_size()` configurations each (the scan caches four times
as many entries: one configuration compiles a few scan variants).

JAX keeps its own staging and executable caches, which cannot be emptied for
one program alone; so once the package's caches have evicted `cache_size()`
entries (a configuration leaves two or three caches), the package also
empties JAX's caches (`jax.clear_caches`, outside any trace) and hands the
freed heap back to the operating system. Programs still in use compile again
on their next call. ``set_cache_size(n, clear_jax=False)`` keeps JAX's caches
(resident memory then grows by about 100 MiB per configuration).

XLA:CPU maps each compiled kernel's code and data into memory mappings of their own (a few
per kernel), and Linux allows a process
``vm.max_map_count`` mappings (65,530 by default). Past that XLA cannot load the next program
and the process dies inside the compiler. So after its compilations (every 0.5 s of compiling
or 32 of them) the package counts its process's mappings (Linux) and, above `MAP_SHARE` of the
limit, empties JAX's caches at its next entry point outside a trace, whatever `set_cache_size`
says.
"""
from __future__ import annotations

import collections
import ctypes
import functools
import gc
import threading
from typing import Callable, NamedTuple

import jax
import jax.monitoring
from jax._src import core as jax_core  # trace_state_clean: no public equivalent

__all__ = ["clear_caches", "cache_size", "set_cache_size", "cache_info", "CacheInfo"]

DEFAULT_CACHE_SIZE = 4
_size = DEFAULT_CACHE_SIZE
_clear_jax = True
_jax_clear_pending = False
_evicted = 0.0  # configurations evicted since JAX's caches were last emptied (entries / scale)
_registry: list["_LRU"] = []

# Share of the process's memory-mapping limit above which JAX's caches are emptied (module
# docstring): the rest is headroom for the programs compiled before the next entry point.
MAP_SHARE = 0.5
_MAPS = "/proc/self/maps"
_MAP_LIMIT = "/proc/sys/vm/max_map_count"
_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"  # jax._src.dispatch.BACKEND_COMPILE_EVENT


class CacheInfo(NamedTuple):
    """Statistics of one cache: ``hits``, ``misses``, ``size`` (entries now), ``maxsize``."""

    hits: int
    misses: int
    size: int
    maxsize: int


class _LRU:
    """A least-recently-used cache of a function of hashable arguments, whose bound is
    ``scale * cache_size()`` (read at each insertion, so `set_cache_size` applies at once)."""

    def __init__(self, fn: Callable, scale: int):
        self._fn, self._scale = fn, scale
        self._data: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.RLock()
        self.hits = self.misses = 0
        functools.update_wrapper(self, fn)

    @property
    def maxsize(self) -> int:
        return self._scale * _size

    def __call__(self, *args):
        with self._lock:
            hit = args in self._data
            if hit:
                self._data.move_to_end(args)
                self.hits += 1
                value = self._data[args]
        if not hit:
            value = self._fn(*args)  # outside the lock: building may call other cached functions
            with self._lock:
                self.misses += 1
                self._data[args] = value
                self._data.move_to_end(args)
                self._shrink()
                value = self._data[args]
        _release_if_pending()
        return value

    def _shrink(self) -> None:
        global _jax_clear_pending, _evicted
        while len(self._data) > self.maxsize:
            self._data.popitem(last=False)
            _evicted += 1.0 / self._scale
        # emptying JAX's caches makes every program compile again, so not at every eviction: once
        # per `cache_size()` entries evicted (a configuration leaves two or three caches)
        if _clear_jax and _evicted >= _size:
            _jax_clear_pending = True

    def cache_clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0

    def cache_info(self) -> CacheInfo:
        return CacheInfo(self.hits, self.misses, len(self._data), self.maxsize)


def cached(scale: int = 1) -> Callable[[Callable], _LRU]:
    """Decorator: a registered `_LRU` cache holding ``scale * cache_size()`` entries."""

    def wrap(fn):
        cache = _LRU(fn, scale)
        _registry.append(cache)
        return cache

    return wrap


def cache_size() -> int:
    """The number of configurations each of the package's caches holds (default 4)."""
    return _size


def set_cache_size(n: int, clear_jax: bool = True) -> None:
    """Hold at most `n` configurations per cache (least recently used first out).

    A larger bound avoids recompiling when a process cycles through more
    configurations than that; each configuration's compiled programs cost
    about 100 MiB of host memory (slpc, CPU). Shrinking evicts at once.

    Args:
      n: configurations per cache (default 4).
      clear_jax: once `n` entries have been evicted, also empty JAX's
        caches and return the freed memory (module docstring); False keeps
        JAX's caches, so a process's memory grows with every configuration
        it ever built.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the cache size must be a positive int; got {n!r}")
    global _size, _clear_jax
    _size, _clear_jax = n, bool(clear_jax)
    for cache in _registry:
        with cache._lock:
            cache._shrink()
    _release_if_pending()


def cache_info() -> dict:
    """``{qualified function name: CacheInfo}`` for every cache of the package."""
    return {f"{c._fn.__module__}.{c._fn.__qualname__}": c.cache_info() for c in _registry}


def _trim_heap() -> bool:
    """Hand freed heap memory back to the operating system (glibc's ``malloc_trim``); False elsewhere."""
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


def _map_limit() -> int | None:
    """The process's memory-mapping limit (``vm.max_map_count``), None where it cannot be read."""
    try:
        with open(_MAP_LIMIT, "rb") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def _maps_in_use() -> int | None:
    """The memory mappings this process holds (Linux), None where they cannot be counted."""
    try:
        with open(_MAPS, "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return None


_since_check = [0, 0.0]  # compilations and their seconds since the mappings were last counted


def _after_compile(event: str, duration: float, **_) -> None:
    """JAX's listener after each compilation: near the mapping limit, ask for JAX's caches to
    be emptied at the next entry point (not here: the program just compiled is being cached).
    Counting the mappings reads /proc (its cost grows with their number), so it is done after
    0.5 s of compiling or 32 compilations, whichever comes first."""
    global _jax_clear_pending
    if event != _COMPILE_EVENT or _jax_clear_pending:
        return
    _since_check[0] += 1
    _since_check[1] += duration
    if _since_check[0] < 32 and _since_check[1] < 0.5:
        return
    _since_check[:] = [0, 0.0]
    limit, used = _map_limit(), _maps_in_use()
    if limit and used is not None and used > MAP_SHARE * limit:
        _jax_clear_pending = True


jax.monitoring.register_event_duration_secs_listener(_after_compile)


def _release_if_pending() -> None:
    """Empty JAX's caches if an eviction or the mapping limit asked for it, unless inside a
    trace (then at the next chance)."""
    global _jax_clear_pending, _evicted
    if _jax_clear_pending and jax_core.trace_state_clean():
        _jax_clear_pending, _evicted = False, 0.0
        jax.clear_caches()
        gc.collect()
        _trim_heap()


def clear_caches() -> None:
    """Empty every cache of the package and JAX's compilation caches, and return the memory.

    Learners and compiled programs that nothing else references are freed;
    the next call of a factory builds and compiles again. On glibc (Linux) the
    freed heap is handed back to the operating system, so resident memory
    falls (freed memory is otherwise kept by the allocator for reuse).
    """
    global _jax_clear_pending, _evicted
    for cache in _registry:
        cache.cache_clear()
    _jax_clear_pending, _evicted = False, 0.0
    jax.clear_caches()
    gc.collect()
    _trim_heap()
