"""The layouts layer, pure (no MPI, no torch, no CuPy): SBP values, placements, layouts, shard
math and the redistribution planner (layouts in, a plan of steps out).

Modules: ``sbp`` (``S(0)``, ``B``, ``P``), ``placement``, ``layout`` (a placement and an sbp
tuple), ``shards`` (each rank's piece), ``steps`` (the plan's step values) and ``plan``
(:func:`~mpiflow.layouts.plan.plan_redistribution`). The public faces are :mod:`mpiflow.sbp`,
:mod:`mpiflow.placement` and :mod:`mpiflow.boxing`; :mod:`mpiflow.boxing` also runs the plans.
"""
