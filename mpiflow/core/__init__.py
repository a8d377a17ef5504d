"""The pure core: values and helpers every layer uses, with no MPI and no side effects.

- :mod:`.reduce_op`: :class:`ReduceOp` and which dtypes each op accepts.
- :mod:`.array_module`: numpy or CuPy, told apart without importing CuPy.
- :mod:`.buffers`: what users pass to communication functions, as arrays sharing its memory.
- :mod:`.torch_arrays`: torch tensors as numpy/CuPy arrays (torch is never imported here).
- :mod:`.steps`: the write-back steps that finish an operation.
- :mod:`.message_size`: the error for a message whose size ranks disagree on.
- :mod:`.errors`: a bad global-tensor argument's error (a ``RuntimeError`` and a ``ValueError``).
- :mod:`.extras`: the optional extras and the install hint an error message gives.
- :mod:`.all_reduce_form`: which form of ``MPI_Allreduce`` (in place or out of place) each MPI
  library runs faster, from which size.
- :mod:`.launcher_env`: torchrun's ``RANK``, ``LOCAL_RANK``... from an MPI launcher's variables.
- :mod:`.settings`: every ``MPIFLOW_*`` environment variable, and the one parser that reads
  them (docs/configuration.md).

Nothing here imports ``mpi4py``: an import-linter contract (``setup.cfg``) checks it.
"""
