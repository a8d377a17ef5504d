"""scikit-learn's array API dispatch on mpiflow's arrays: its scalers run unchanged on an array
split over the ranks and return one laid out as the input (in a fresh process: SciPy reads
``SCIPY_ARRAY_API=1`` when it is first imported)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("sklearn")

PROGRAM = textwrap.dedent("""
    import numpy as np
    import sklearn
    from sklearn.preprocessing import MinMaxScaler, StandardScaler

    import mpiflow as flow
    from mpiflow import array_api as xp

    a = np.random.default_rng(0).standard_normal((9, 3))
    x = xp.asarray(a)
    with sklearn.config_context(array_api_dispatch=True):
        for kind in (MinMaxScaler, StandardScaler):
            y = kind().fit_transform(x)
            assert type(y) is flow.Tensor and y.sbp == x.sbp, (kind, type(y))
            np.testing.assert_allclose(y.numpy(), kind().fit_transform(a), rtol=1e-12)
    print("ok")
""")


def test_scalers_run_on_split_arrays() -> None:
    env = {**os.environ, "SCIPY_ARRAY_API": "1", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
