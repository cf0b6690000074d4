"""State / action normalisation: both conventions, formula by formula, and their invariants."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays

from oxygen_ros.engine.model import FeatureNorm, NormStats, discretize_state

F32 = st.floats(-100, 100, width=32, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(arrays(np.float32, st.integers(1, 40), elements=st.floats(-1e6, 1e6, width=32)))
def test_bins_are_upstream_digitize_monotone_and_bounded(s):
    b = discretize_state(s)
    np.testing.assert_array_equal(b, np.digitize(s, np.linspace(-1, 1, 257)[:-1]) - 1)
    assert b.min() >= -1 and b.max() <= 255 and b.shape == s.shape
    order = np.argsort(s, kind="stable")
    assert (np.diff(b[order]) >= 0).all()
    assert ((b == -1) == (s < -1)).all()


@pytest.mark.parametrize("convention", ["lerobot", "openpi"])
@pytest.mark.parametrize("kind", ["range", "mean_std"])
@settings(max_examples=50, deadline=None)
@given(lo=arrays(np.float32, 5, elements=F32), span=arrays(np.float32, 5, elements=st.floats(0.0625, 50, width=32)),
       x=arrays(np.float32, 5, elements=F32))
def test_inverse_undoes_forward(convention, kind, lo, span, x):
    f = FeatureNorm(kind, lo, lo + span if kind == "range" else span, convention)
    np.testing.assert_allclose(f.inverse(f.forward(x)), x, rtol=1e-4, atol=1e-3)


def test_range_statistics_apply_to_leading_dims_and_cut_actions():
    s = NormStats.quantiles(np.zeros(2), np.full(2, 2.0), np.zeros(2), np.full(2, 4.0), convention="openpi")
    a = np.array([[1.0, -1.0, 0.5, 0.25]], np.float32)
    out = s.unnormalize_actions(a)
    assert out.shape == (1, 2)  # the padded dims are cut
    np.testing.assert_array_equal(out, (a[:, :2] + 1) / 2 * (np.float32(4) + np.float32(1e-6)))
    lerobot = NormStats.quantiles(np.zeros(2), np.zeros(2), np.zeros(2), np.ones(2))
    np.testing.assert_array_equal(lerobot.normalize_state([1e-8, 0.0]), [1.0, -1.0])  # eps where q99 == q01
    with pytest.raises(ValueError, match="not finite"):
        FeatureNorm("range", [0.0, np.nan], [1.0, 1.0])
    with pytest.raises(ValueError, match=r"needs \[.observation.state.q01.\]"):
        NormStats.from_lerobot({"observation.state.q99": np.ones(2)}, {"STATE": "QUANTILES"})
