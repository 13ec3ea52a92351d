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
