"""Test configuration: no persistent XLA compilation cache unless asked for.

JAX's persistent cache goes through jaxlib's executable (de)serialisation,
which segfaulted a test worker three times (two writes, one read; 2026-11-27),
and it saved nothing measurable over the whole suite. So by default the tests
use none, and the command line's own cache is off for them too
(``JAXSTREAM_COMPILATION_CACHE=0``, inherited by the subprocesses and read by
in-process `jaxstream.cli.main` calls, which would otherwise turn on the
shared ``~/.cache/jaxstream/xla``). ``JAXSTREAM_JAX_CACHE=DIR`` gives the
tests (and their subprocesses) a cache in DIR.
"""
import os

import jax

os.environ.setdefault("JAXSTREAM_COMPILATION_CACHE", "0")
_cache = os.environ.get("JAXSTREAM_JAX_CACHE", "")
if _cache:
    jax.config.update("jax_compilation_cache_dir", _cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


import pytest  # noqa: E402

import jaxstream  # noqa: E402

# Each file starts from empty caches (below), so no test needs the package's bound; a bound
# reached inside a test would empty JAX's caches there, and tests that count compilations would
# count the recompiles. tests/test_caches.py tests the bound itself.
jaxstream.set_cache_size(64)


@pytest.fixture(autouse=True, scope="module")
def _no_compiled_programs_kept():
    """Each test file starts from cleared JAX caches, so that a worker's memory does not grow with
    every file it ran (few programs are shared between files). It also kept workers below the
    memory-mapping limit whose crossing crashed XLA:CPU in long-lived workers (each compiled
    kernel holds mappings of its own; the package now empties JAX's caches at half the limit:
    `jaxstream._caches`)."""
    jaxstream.clear_caches()
    yield


@pytest.fixture
def on_cpu():
    """Run the test's own computations on the CPU, for tests that compare them bit for bit with
    subprocesses started with JAX_PLATFORMS=cpu: bit equality holds between runs on one backend
    (on an H100 a GPU reference differed from a CPU worker in the last bit)."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield
