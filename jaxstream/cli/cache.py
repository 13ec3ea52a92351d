"""The persistent compilation cache: a second run of a command compiles nothing."""
from __future__ import annotations

import os
from typing import Optional

#: The environment variable that places (or, set to 0 or off, turns off) the command line's cache.
CACHE_ENV = "JAXSTREAM_COMPILATION_CACHE"


def compilation_cache_dir() -> Optional[str]:
    """Where the command line keeps compiled programs between runs, or None when off.

    JAX's own setting wins (``jax_compilation_cache_dir``, e.g. from the
    ``JAX_COMPILATION_CACHE_DIR`` environment variable); otherwise
    ``$JAXSTREAM_COMPILATION_CACHE`` if set, else ``$XDG_CACHE_HOME/jaxstream/xla``
    (``~/.cache/jaxstream/xla``). ``JAXSTREAM_COMPILATION_CACHE=0`` (or
    ``off``, or an empty value) turns it off.
    """
    import jax
    own = jax.config.jax_compilation_cache_dir
    if own:
        return own
    env = os.environ.get(CACHE_ENV)
    if env is not None:
        return None if env.strip().lower() in ("", "0", "off", "false", "no") else env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxstream", "xla")


def _enable_compilation_cache() -> None:
    """A second run of the same command compiles nothing: every program, however quick to
    compile, goes to JAX's persistent compilation cache (`compilation_cache_dir`)."""
    import jax
    path = compilation_cache_dir()
    if path is None:
        return
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return  # a read-only home: run without the cache
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
