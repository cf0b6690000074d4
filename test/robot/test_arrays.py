"""robot/arrays.py: the tick's whole-array checks say what ndarray.all() says, NaN, inf, empty
and 2-D arrays included."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from oxygen_ros.robot.arrays import all_finite, all_true


@settings(max_examples=300, deadline=None)
@given(arrays(np.float64, array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=40),
              elements=st.floats(allow_nan=True, allow_infinity=True)))
def test_all_finite_is_isfinite_all(x):
    assert all_finite(x) == bool(np.isfinite(x).all())


@settings(max_examples=300, deadline=None)
@given(arrays(np.bool_, array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=40)))
def test_all_true_is_all(mask):
    assert all_true(mask) == bool(mask.all())


def test_the_edges():
    assert all_finite(np.zeros(0)) and all_true(np.zeros(0, bool))
    assert not all_finite(np.array([0.0, np.nan])) and not all_finite(np.array([np.inf]))
    assert all_finite(np.array([1e308, -1e308]))  # large but finite: nothing is summed
    assert all_finite(np.float32([1.0, 2.0])) and not all_finite(np.float32([-np.inf]))
