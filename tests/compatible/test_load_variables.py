"""``flow.load_variables``'s ``ignore_mismatch`` (mpiflow.compatible.single_client.checkpoint):
a value of another shape than its variable's is skipped with a warning, or refused."""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import numpy
import pytest
from numpy.testing import assert_array_equal

import mpiflow.compatible.single_client as flow

tp = flow.typing
RANK = flow.env.get_rank()



def predict_job() -> Any:
    @flow.global_function(type="predict")
    def predict(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.layers.dense(x, 1, use_bias=False, name="fc")

    return predict


def skipped_warning() -> Any:
    """Rank 0 warns (once per variable); the other ranks say nothing."""
    if RANK == 0:
        return pytest.warns(UserWarning, match=r"'fc-weight' has shape \(1, 3\), the value "
                                               r"\(3, 1\): skipped")
    return contextlib.nullcontext()


@pytest.mark.mpi
def test_a_mismatched_value_is_skipped_or_refused_after_the_variables_exist() -> None:
    job = predict_job()
    x = numpy.ones((2, 3), numpy.float32)
    before = job(x)
    with skipped_warning():
        flow.load_variables({"fc-weight": numpy.zeros((3, 1))})
    assert_array_equal(job(x), before)
    with pytest.raises(ValueError, match=r"'fc-weight' has shape \(1, 3\).*ignore_mismatch"):
        flow.load_variables({"fc-weight": numpy.zeros((3, 1))}, ignore_mismatch=False)
    flow.load_variables({"fc-weight": numpy.full((1, 3), 2.0)}, ignore_mismatch=False)
    assert_array_equal(job(x), numpy.full((2, 1), 6.0))


@pytest.mark.mpi
def test_a_mismatched_value_loaded_early_is_checked_when_the_variable_is_made() -> None:
    x = numpy.ones((2, 3), numpy.float32)
    flow.load_variables({"fc-weight": numpy.full((3, 1), 2.0)}, ignore_mismatch=False)
    with pytest.raises(ValueError, match=r"'fc-weight' has shape \(1, 3\)"):
        predict_job()(x)  # the same element count: once silently reshaped
    flow.clear_default_session()
    flow.load_variables({"fc-weight": numpy.full((3, 1), 2.0)})
    with skipped_warning():
        out = predict_job()(x)
    assert not (out == 6.0).all()  # the initializer's values
    flow.clear_default_session()
    flow.load_variables({"fc-weight": numpy.full((1, 3), 2.0)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_array_equal(predict_job()(x), numpy.full((2, 1), 6.0))
