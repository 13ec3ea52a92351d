"""Test configuration: a persistent XLA compilation cache.

Many tests compile the same programs (the same update inside different jit
wrappers); the cache, keyed by the program and the JAX version, lets later
tests and later runs reuse them. Set JAXSTREAM_JAX_CACHE="" to disable it.
"""
import os
import tempfile

import jax

_cache = os.environ.get("JAXSTREAM_JAX_CACHE", os.path.join(tempfile.gettempdir(), "jaxstream-jax-cache"))
if _cache:
    jax.config.update("jax_compilation_cache_dir", _cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


import pytest  # noqa: E402


@pytest.fixture
def on_cpu():
    """Run the test's own computations on the CPU, for tests that compare them bit for bit with
    subprocesses started with JAX_PLATFORMS=cpu: bit equality holds between runs on one backend
    (on an H100 a GPU reference differed from a CPU worker in the last bit)."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield
