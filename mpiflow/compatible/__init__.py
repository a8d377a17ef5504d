"""Compatibility faces for programs written against earlier APIs.

:mod:`mpiflow.compatible.single_client` runs OneFlow 0.x programs (``@flow.global_function``
jobs with ``flow.typing`` placeholders), as ``oneflow.compatible.single_client`` does.
"""

__all__: list[str] = []
