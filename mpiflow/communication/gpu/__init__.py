"""Device (CuPy) arrays across the network: NCCL, CUDA-aware MPI, or MPI through host buffers.

Modules: ``maker`` (which communicator moves a group's device arrays; registered with the MPI
layer at import), ``transport`` (the transport choice, as pure functions), ``array_ops`` (what
the transports need from an array library), ``cuda_aware``, ``staging`` and ``nccl`` (the
three implementations). CuPy is imported only when a device array is seen.
"""
