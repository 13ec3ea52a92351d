"""Loops with data-dependent trip counts, and their reverse-differentiable form.

The learners skip work they do not need: PACBO's loops over blocks of centre
slots stop at the largest active k, the landmark learner's rare branches run
at most once (`jaxstream._batching.rare`). Such loops lower to
``lax.while_loop``, which forward mode (``jax.jvp``) differentiates but
reverse mode (``jax.grad``) cannot.

Inside `static_trip_counts()` every such loop traced takes its static form
instead: the static maximum number of iterations, each guarded by a
``lax.cond`` that skips the ones beyond the dynamic count (a ``scan``, which
reverse mode differentiates). The values are the same; for one stream the
skipped iterations cost a branch each; under `vmap` the guard becomes a
select and every iteration runs. `jaxstream.differentiable.stream_loss`
traces the learner inside this context; `run_stream` and the learners'
``init`` enter it when their inputs are being differentiated, and are
differentiated through their static form when a jitted caller is
(`reverse_ready`), so ``jax.grad`` works through every learner;
undifferentiated runs keep the dynamic form.

The flag is read when a function is traced: a function jitted (and cached)
before keeps the form it was traced with, so a jitted helper that contains
such a loop must take `static_trip_counts_enabled()` as part of its cache key.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Callable

import jax
from jax import lax

__all__ = ["static_trip_counts", "static_trip_counts_enabled", "fori_upto", "reverse_ready"]

_state = threading.local()


@contextlib.contextmanager
def static_trip_counts():
    """Within this context, loops with a dynamic trip count are traced in their static form."""
    old = getattr(_state, "static", False)
    _state.static = True
    try:
        yield
    finally:
        _state.static = old


def static_trip_counts_enabled() -> bool:
    """Whether `static_trip_counts` is active (read at trace time)."""
    return bool(getattr(_state, "static", False))


def _differentiated(x) -> bool:
    """Whether `x` is (or, under vmap, wraps) a forward- or reverse-mode autodiff tracer."""
    from jax._src.interpreters import ad  # JVPTracer / LinearizeTracer: no public names for them

    while isinstance(x, jax.core.Tracer):
        if isinstance(x, (ad.JVPTracer, ad.LinearizeTracer)):
            return True
        x = getattr(x, "val", None)  # a BatchTracer's value
    return False


def static_if_differentiated(*trees):
    """`static_trip_counts()` when any leaf of `trees` is being differentiated, else a no-op
    context: so ``jax.grad`` through `run_stream` or ``init`` needs no context of its own.

    (A function jitted before ``jax.grad`` is applied to it, ``jax.grad(jax.jit(f))``, is traced
    without autodiff tracers; there `reverse_ready` takes over.)
    """
    if static_trip_counts_enabled() or not any(_differentiated(x) for x in jax.tree_util.tree_leaves(trees)):
        return contextlib.nullcontext()
    return static_trip_counts()


def reverse_ready(fast: Callable, static: Callable) -> Callable:
    """``fast``, differentiated through ``static``, traced inside `static_trip_counts()`.

    ``fast`` and ``static`` compute the same function: ``static`` (a function that reads the
    flag when traced) in its static form. The result calls ``fast`` when nothing differentiates
    it; any JVP of it (``jax.jvp``, and ``jax.grad``, which linearises through the JVP) is
    ``static``'s, whose loops reverse mode can transpose. This covers what
    `static_if_differentiated` cannot see: ``jax.grad(jax.jit(f))`` traces ``f`` without autodiff
    tracers, and differentiates the traced program afterwards. Positional arguments only.
    """
    @jax.custom_jvp
    def run(*args):
        return fast(*args)

    @run.defjvp
    def _jvp(primals, tangents):
        with static_trip_counts():
            return jax.jvp(static, primals, tangents)

    def call(*args):
        # Concrete arguments: nothing can differentiate the call (and the rule would move host
        # arrays to the device before `fast`'s checks on the host).
        if not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(args)):
            return fast(*args)
        return run(*args)

    return call


def fori_upto(n, n_max: int, body: Callable, init):
    """``lax.fori_loop(0, n, body, init)`` for a dynamic ``n ≤ n_max`` (static).

    In the static form (`static_trip_counts`) the loop runs ``n_max`` guarded
    iterations; ``body(i, carry)`` must then accept any ``i < n_max`` (its
    result is discarded for ``i ≥ n``).
    """
    if not static_trip_counts_enabled():
        return lax.fori_loop(0, n, body, init)

    def guarded(i, carry):
        return lax.cond(i < n, body, lambda _, c: c, i, carry)

    return lax.fori_loop(0, n_max, guarded, init)
