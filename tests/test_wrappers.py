"""The three estimators against scikit-learn's own estimator checks.

jaxstream never imports scikit-learn; its estimators follow its conventions
(and River's ``learn_one``/``predict_one``), and these tests hold them to
scikit-learn's checks that apply to unsupervised streaming models. Checks
left out, and why:

* ``check_estimators_unfitted``: wants scikit-learn's own NotFittedError
  class; ours (`jaxstream.NotFittedError`) is a ValueError and an
  AttributeError like it, without the dependency.
* ``check_dtype_object``: an object array is refused with a clear error
  rather than converted.
* the dtype sweeps and invariance checks that refit many small datasets
  (``check_estimators_dtypes``, ``check_readonly_memmap_input``,
  ``check_methods_subset_invariance``, ``check_transformer_general``...)
  pass but cost minutes of compilation; they are run by
  ``python tests/test_wrappers.py --all``.
"""
import sys
import warnings

import numpy as np
import pytest

import jaxstream as js

sklearn = pytest.importorskip("sklearn")  # a test extra: pip install -e '.[test]'
from sklearn.utils.estimator_checks import estimator_checks_generator  # noqa: E402

ESTIMATORS = {
    "SLPC": lambda: js.SLPC(seed=0, t0=5, max_segments=8, history_size=64),
    "PACBO": lambda: js.PACBO(max_clusters=5, n_steps=20, history_size=64),
    "LandmarkMDS": lambda: js.LandmarkMDS(5, n_components=2, buffer_size=64),
}
CHECKS = [
    "check_estimator_cloneable", "check_estimator_repr", "check_no_attributes_set_in_init",
    "check_get_params_invariance", "check_set_params", "check_parameters_default_constructible",
    "check_do_not_raise_errors_in_init_or_set_params", "check_estimators_fit_returns_self",
    "check_estimators_overwrite_params", "check_dont_overwrite_parameters", "check_dict_unchanged",
    "check_fit_idempotent", "check_fit_check_is_fitted", "check_n_features_in", "check_n_features_in_after_fitting",
    "check_fit2d_predict1d", "check_fit1d", "check_fit2d_1sample", "check_fit2d_1feature", "check_estimators_nan_inf",
    "check_complex_data", "check_estimators_empty_data_messages", "check_estimators_pickle",
    "check_transformers_unfitted", "check_estimator_sparse_array", "check_estimator_sparse_matrix",
    "check_fit_score_takes_y", "check_pipeline_consistency",
]
EXCLUDED = {"check_estimators_unfitted", "check_dtype_object"}


def _checks(est, names=None):
    out = {}
    for e, check in estimator_checks_generator(est, legacy=True, mark=None):
        name = getattr(check, "func", check).__name__
        if (names is None and name not in EXCLUDED) or (names is not None and name in names):
            out.setdefault(name, []).append((e, check))
    return out


@pytest.mark.parametrize("model", sorted(ESTIMATORS))
@pytest.mark.parametrize("check_name", CHECKS)
def test_sklearn_check(model, check_name):
    found = _checks(ESTIMATORS[model](), {check_name}).get(check_name)
    if not found:
        pytest.skip(f"this scikit-learn ({sklearn.__version__}) has no {check_name} for {model}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for e, check in found:
            check(e)


def test_not_fitted_is_a_value_and_attribute_error():
    m = js.SLPC()
    assert not hasattr(m, "vertices_")
    for kind in (ValueError, AttributeError, RuntimeError):
        with pytest.raises(kind, match="no summary yet"):
            m.predict(np.zeros((2, 2)))


def test_pickle_round_trip_keeps_learning_identically():
    import pickle
    X = js.datasets.make_cubic_stream(80, seed=1)
    a = js.SLPC(seed=3, t0=10, max_segments=8, history_size=64).partial_fit(X[:50])
    b = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(a.vertices_, b.vertices_)
    a.partial_fit(X[50:])
    b.partial_fit(X[50:])
    np.testing.assert_array_equal(a.vertices_, b.vertices_)
    np.testing.assert_array_equal(a.last_losses_, b.last_losses_)


if __name__ == "__main__" and "--all" in sys.argv:
    for model, make in ESTIMATORS.items():
        for name, pairs in _checks(make()).items():
            for e, check in pairs:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        check(e)
                        print(f"{model} {name}: passed")
                    except Exception as exc:  # report every check, then go on
                        print(f"{model} {name}: FAILED {str(exc)[:200]}")
