"""scikit-learn's array-API-aware estimators and metrics on split mpiflow arrays, against the
same calls on numpy arrays; run by ``test_array_api_sklearn.py`` as
``mpiexec -n N python sklearn_estimators.py`` (1 to 3 ranks).

Every rank runs every case; rank 0 prints ``ok <cases>`` or the failures (exit status 1).
Checked per case: the value (allclose; components and discriminant axes up to sign), that an
array of one row per sample comes back split along dim 0 as the input, and that no split
array of the samples' length was made whole (every redistribution is recorded), except where
scikit-learn itself copies the labels into numpy (``GATHERED``).
"""

from __future__ import annotations

import os

os.environ["SCIPY_ARRAY_API"] = "1"  # before SciPy is first imported: its array API mode

import sys
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import sklearn
import sklearn.metrics as metrics
from sklearn.decomposition import PCA
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import (
    LogisticRegression,
    PoissonRegressor,
    Ridge,
    RidgeClassifierCV,
    RidgeCV,
)
from sklearn.mixture import GaussianMixture
from sklearn.naive_bayes import GaussianNB
from sklearn.preprocessing import (
    Binarizer,
    KernelCenterer,
    LabelEncoder,
    MaxAbsScaler,
    MinMaxScaler,
    Normalizer,
    PolynomialFeatures,
    StandardScaler,
)

import mpiflow as flow
from mpiflow import array_api as xp
from mpiflow.boxing import execute
from mpiflow.layouts.sbp import Broadcast, Split
from mpiflow.ops import indexing, pointwise
from mpiflow.tensors import conversion, creation

warnings.simplefilter("ignore")  # convergence warnings alike for numpy and mpiflow

N, D = 23, 4  # uneven parts at 2 and 3 ranks
rng = np.random.default_rng(0)
A = rng.standard_normal((N, D))
DATA = {"X": A, "y": A @ rng.standard_normal(D) + 0.1 * rng.standard_normal(N),
        "c": (A[:, 0] + 0.3 * A[:, 1] > 0).astype(np.int64) + (A[:, 2] > 0.5),
        "K": A @ A.T, "w": rng.uniform(0.5, 2.0, N)}

# (the call on a dict of arrays, whether its result is compared up to the sign of columns)
Case = tuple[Callable[[dict[str, Any]], Any], bool]
CASES: dict[str, Case] = {
    "PCA full": (lambda d: PCA(3, svd_solver="full").fit_transform(d["X"]), True),
    "PCA covariance_eigh": (lambda d: PCA(3, svd_solver="covariance_eigh")
                            .fit_transform(d["X"]), True),
    "PCA randomized QR": (lambda d: PCA(2, svd_solver="randomized", random_state=0,
                                        power_iteration_normalizer="QR")
                          .fit_transform(d["X"]), True),
    "PCA whiten inverse": (lambda d: (lambda p: p.inverse_transform(p.transform(d["X"])))(
        PCA(3, whiten=True).fit(d["X"])), False),
    "Ridge": (lambda d: Ridge(0.5).fit(d["X"], d["y"], sample_weight=d["w"]).predict(d["X"]),
              False),
    "Ridge svd 2 targets": (lambda d: Ridge(1.0, solver="svd").fit(
        d["X"], d["ns"].stack([d["y"], 2 * d["y"]], axis=1)).predict(d["X"]), False),
    "RidgeCV": (lambda d: RidgeCV().fit(d["X"], d["y"]).predict(d["X"]), False),
    "RidgeClassifierCV": (lambda d: RidgeClassifierCV().fit(d["X"], d["c"])
                          .decision_function(d["X"]), False),
    "LDA svd transform": (lambda d: LinearDiscriminantAnalysis().fit(d["X"], d["c"])
                          .transform(d["X"]), True),
    "LDA svd predict_proba": (lambda d: LinearDiscriminantAnalysis().fit(d["X"], d["c"])
                              .predict_proba(d["X"]), False),
    "LogisticRegression": (lambda d: LogisticRegression().fit(d["X"], d["c"])
                           .predict_proba(d["X"]), False),
    "PoissonRegressor": (lambda d: PoissonRegressor().fit(d["X"], d["ns"].abs(d["y"]))
                         .predict(d["X"]), False),
    "GaussianNB": (lambda d: GaussianNB().fit(d["X"], d["c"]).predict_proba(d["X"]), False),
    "GaussianNB predict": (lambda d: GaussianNB().fit(d["X"], d["c"]).predict(d["X"]), False),
    "GaussianMixture diag": (lambda d: GaussianMixture(
        2, covariance_type="diag", init_params="random_from_data", random_state=0)
        .fit(d["X"]).predict_proba(d["X"]), False),
    "Binarizer": (lambda d: Binarizer(threshold=0.2).fit_transform(d["X"]), False),
    "KernelCenterer": (lambda d: KernelCenterer().fit_transform(d["K"]), False),
    "LabelEncoder": (lambda d: LabelEncoder().fit_transform(d["c"]), False),
    "MaxAbsScaler": (lambda d: MaxAbsScaler().fit_transform(d["X"]), False),
    "MinMaxScaler": (lambda d: MinMaxScaler().fit_transform(d["X"]), False),
    "Normalizer": (lambda d: Normalizer().fit_transform(d["X"]), False),
    "PolynomialFeatures": (lambda d: PolynomialFeatures(2).fit_transform(d["X"]), False),
    "StandardScaler": (lambda d: StandardScaler().fit_transform(d["X"]), False),
    "Nystroem": (lambda d: Nystroem(n_components=5, random_state=0).fit_transform(d["X"]),
                 False),
    "accuracy_score": (lambda d: metrics.accuracy_score(d["c"], (d["c"] + 1) % 3), False),
    "confusion_matrix": (lambda d: metrics.confusion_matrix(d["c"], (d["c"] + 1) % 3), False),
    "f1_score": (lambda d: metrics.f1_score(d["c"], (d["c"] * 2) % 3, average="macro"), False),
    "log_loss": (lambda d: metrics.log_loss(d["c"] > 0, 1 / (1 + d["ns"].exp(-d["X"][:, 0]))),
                 False),
    "r2_score": (lambda d: metrics.r2_score(d["y"], d["X"][:, 0]), False),
    "mean_squared_error": (lambda d: metrics.mean_squared_error(d["y"], d["X"][:, 0]), False),
    "mean_absolute_error": (lambda d: metrics.mean_absolute_error(d["y"], d["X"][:, 0]),
                            False),
    "median_absolute_error": (lambda d: metrics.median_absolute_error(d["y"], d["X"][:, 0]),
                              False),
    "explained_variance_score": (lambda d: metrics.explained_variance_score(
        d["y"], d["X"][:, 0]), False),
    "cosine_similarity": (lambda d: metrics.pairwise.cosine_similarity(d["X"], d["X"][:5]),
                          False),
    "euclidean_distances": (lambda d: metrics.pairwise.euclidean_distances(
        d["X"], d["X"][:5]), False),
    "rbf_kernel": (lambda d: metrics.pairwise.rbf_kernel(d["X"], d["X"][:5]), False),
    "pairwise_distances manhattan": (lambda d: metrics.pairwise_distances(
        d["X"], d["X"][:5], metric="manhattan"), False),
}
# scikit-learn copies the labels into numpy here (a scipy.sparse matrix of them, or
# ``move_to(..., xp=numpy)`` by design): a vector of N labels is made whole on every rank.
GATHERED = {"RidgeClassifierCV", "confusion_matrix", "f1_score", "log_loss"}


def gathers(moves: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The redistributions that made a split dim of N or more rows whole."""
    return [m for m in moves if any(isinstance(a, Split) and isinstance(b, Broadcast)
                                    and m[0][a.dim] >= N for a, b in zip(m[1], m[2]))]


def check(name: str, case: Case, moves: list[tuple[Any, ...]]) -> None:
    fn, signs = case
    want = np.asarray(fn({**DATA, "ns": np}), dtype=float)
    arrays = {k: xp.asarray(v) for k, v in DATA.items()}
    moves.clear()
    with sklearn.config_context(array_api_dispatch=True):
        out = fn({**arrays, "ns": xp})
    made = gathers(moves)
    assert not made or name in GATHERED, f"gathered a split array: {made}"
    if isinstance(out, flow.Tensor) and out.ndim and out.shape[0] == N:
        assert out.sbp == (Split(0),), f"the result is laid out {out.sbp}, not split"
    got = np.asarray(out.numpy() if isinstance(out, flow.Tensor) else out, dtype=float)
    if signs:  # a component's sign is arbitrary: take numpy's
        got = got * np.sign(np.sum(got * want, axis=0))
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-7)


def main() -> int:
    moves: list[tuple[Any, ...]] = []
    real = execute.redistribute

    def spy(local: Any, shape: Any, src: Any, dst: Any) -> Any:
        moves.append((tuple(shape), tuple(src.sbp), tuple(dst.sbp)))
        return real(local, shape, src, dst)

    for module in (execute, conversion, creation, indexing, pointwise):  # each its own name
        module.redistribute = spy  # type: ignore[attr-defined]
    failed = []
    for name, case in CASES.items():
        try:
            check(name, case, moves)
        except Exception:  # every rank goes on to the next case alike
            failed.append(f"{name}: {traceback.format_exc(limit=-3)}")
    if flow.env.get_rank() == 0:
        print("\n".join(failed) if failed else f"ok {len(CASES)}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
