"""slpc's history (`jaxstream.curves.history`): the incrementally sorted residuals."""
import numpy as np
import jax
import jax.numpy as jnp

from jaxstream.curves import history

def test_sorted_replace_matches_a_list_remove_and_insort():
    """`history.sorted_replace` against Python's list.remove + sort on 400 random
    cases with ties, empty and full arrays, and each of remove / insert off."""
    f = jax.jit(history.sorted_replace)
    rng = np.random.default_rng(0)
    n = 12
    for _ in range(400):
        m = int(rng.integers(0, n + 1))
        vals = np.sort(rng.integers(0, 5, m).astype(np.float32))
        srt = np.concatenate([vals, np.full(n - m, np.inf, np.float32)])
        remove = bool(rng.integers(2)) and m > 0
        old = vals[rng.integers(m)] if remove else np.float32(rng.integers(0, 5))
        insert = bool(rng.integers(2)) and m - remove < n
        new = np.float32(rng.integers(0, 5))
        ref = list(vals)
        if remove:
            ref.remove(old)
        if insert:
            ref.append(new)
        ref = np.concatenate([np.sort(np.asarray(ref, np.float32)), np.full(n - len(ref), np.inf, np.float32)])
        np.testing.assert_array_equal(np.asarray(f(jnp.asarray(srt), old, remove, new, insert)), ref)
