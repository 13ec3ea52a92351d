"""Streams sharded over devices (4 forced host devices in a subprocess)."""
import os
import subprocess
import sys

import jax
import pytest

import jaxstream as js

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _env(**extra):
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.update(extra)
    return env


def test_four_host_devices_equal_one_device_bit_for_bit():
    env = _env(XLA_FLAGS=os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4")
    proc = subprocess.run([sys.executable, os.path.join(HERE, "_sharding_worker.py")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ALL OK" in proc.stdout


def test_devices_argument_is_checked():
    from test_core import mean_learner
    L = mean_learner()
    keys = jax.random.split(jax.random.key(0), 2)
    x = jax.numpy.zeros((2, 5, 3))
    with pytest.raises(ValueError, match="devices"):
        js.init_streams(L, keys, x, devices=len(jax.devices()) + 1)
    with pytest.raises(ValueError, match="devices"):
        js.run_streams(L, keys, x, js.init_streams(L, keys, x), devices=[])
    with pytest.raises(ValueError, match="twice"):
        js.run_streams(L, keys, x, js.init_streams(L, keys, x), devices=[jax.devices()[0]] * 2)
