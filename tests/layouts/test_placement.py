"""Placements (mpiflow/layouts/placement.py): canonical order, mesh shape, coordinates, errors."""

from __future__ import annotations

import pickle

import numpy
import pytest
from boxing_helpers import SIZE, fake_world  # noqa: F401 - a fixture

from mpiflow.placement import Placement, placement


@pytest.mark.mpi
def test_all_is_every_world_rank() -> None:
    p = Placement.all("cpu")
    assert p.ranks.tolist() == list(range(SIZE)) and p.mesh_shape == (SIZE,) and p.ndim == 1
    assert placement is Placement and p.type == "cpu"
    assert all(r in p for r in range(SIZE)) and SIZE not in p


@pytest.mark.mpi
def test_rank_outside_the_world_is_refused() -> None:
    with pytest.raises(ValueError, match=rf"\[{SIZE}\] are not all ranks of the world"):
        Placement("cpu", [SIZE])


@pytest.mark.usefixtures("fake_world")
class TestMeshes:
    def test_canonical_order_keeps_the_mesh_shape(self) -> None:
        p = Placement("cpu", [[3, 1], [2, 0]])
        assert p.ranks.tolist() == [[0, 1], [2, 3]] and p.mesh_shape == (2, 2)
        assert p == Placement("cpu", [[0, 1], [2, 3]])
        assert hash(p) == hash(Placement("cpu", [[0, 1], [2, 3]]))
        assert Placement("cpu", [1, 0]) == Placement("cpu", [0, 1])
        assert p.rank_list == (0, 1, 2, 3)

    def test_equality_needs_type_shape_and_ranks(self) -> None:
        assert Placement("cpu", [0, 1]) != Placement("cuda", [0, 1])
        assert Placement("cpu", [[0, 1]]) != Placement("cpu", [0, 1])
        assert Placement("cpu", [0, 1]) != Placement("cpu", [0, 2])
        assert Placement("cpu", [0]) != "cpu"

    def test_coordinates(self) -> None:
        p = Placement("cpu", [[4, 5, 6], [7, 8, 9]])
        assert p.coordinates(4) == (0, 0) and p.coordinates(8) == (1, 1)
        assert p.coordinates(0) is None and 6 in p and 3 not in p
        assert Placement("cpu", 3).ranks.tolist() == [3]  # one rank
        assert Placement("cpu", numpy.array([2, 1])).rank_list == (1, 2)

    def test_ranks_are_read_only(self) -> None:
        p = Placement("cpu", [0, 1])
        with pytest.raises(ValueError, match="read-only"):
            p.ranks[0] = 5

    def test_repr_and_pickle(self) -> None:
        p = Placement("cuda", [[1, 0], [3, 2]])
        assert repr(p) == 'mpiflow.placement(type="cuda", ranks=[[0, 1], [2, 3]])'
        assert pickle.loads(pickle.dumps(p)) == p

    @pytest.mark.parametrize(("type_", "ranks", "message"), [
        ("tpu", [0], "type must be one of"),
        ("cpu", [], "at least one rank"),
        ("cpu", [[0, 1], [2]], "same length"),
        ("cpu", [0, 0], "repeat"),
        ("cpu", [-1], "not all ranks of the world"),
        ("cpu", numpy.array([0.0, 1.0]), "must be integers"),
    ])
    def test_bad_placements(self, type_: str, ranks: object, message: str) -> None:
        with pytest.raises(ValueError, match=message):
            Placement(type_, ranks)


@pytest.mark.parametrize("bad", ["01", [[0], [0, 0]], [0.5], [True], [[0], [1, 2]]])
def test_ranks_must_be_integers_in_a_regular_mesh(bad: object) -> None:
    with pytest.raises(ValueError):
        placement("cpu", bad)
