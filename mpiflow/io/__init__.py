"""Parallel files: the scientists' formats, and checkpoints (MPI-IO: each rank its shard).

- Data files: :func:`load_hdf5`/:func:`save_hdf5` (h5py), :func:`load_netcdf`/
  :func:`save_netcdf` (netCDF-4 through h5netcdf), :func:`load_zarr`/:func:`save_zarr`,
  :func:`load_csv`/:func:`save_csv` and :func:`load_npy`/:func:`save_npy` read and write one
  global tensor of any layout, every rank moving only its own region (docs/science.md,
  "Files", says what is parallel with which library). A failure on any rank raises
  :class:`ParallelIOError` on every rank; a failed save leaves nothing under its name.
- :func:`save` writes a tree of tensors, arrays and Python values as a directory: one plain
  ``.npy`` file per array (each rank writing only its shard), a JSON ``metadata.json``, and
  ``objects.pkl`` for Python values JSON cannot hold. It is crash-safe: the directory appears
  atomically when complete, and a failure on any rank raises on every rank.
- :func:`load` reads it back on any number of ranks, as local tensors or in any layout. It
  unpickles ``objects.pkl`` with a restricted unpickler (:mod:`.unpickle`) that runs no code:
  ``weights_only=False`` opts in to plain pickle, for checkpoints whose source you trust.

Examples:
    >>> import mpiflow as flow
    >>> from mpiflow.io import load, save
    >>> p = flow.placement.all("cpu")
    >>> save({"w": flow.ones(6, 2, placement=p, sbp=flow.sbp.split(0)), "step": 7}, "ckpt")
    >>> load("ckpt", p, flow.sbp.split(1))["w"].sbp
    (mpiflow.sbp.split(dim=1),)
"""

from .checkpoint import SbpChoice, load, save
from .csv_files import load_csv, save_csv
from .errors import CheckpointError, ParallelIOError
from .format import FORMAT, VERSION
from .hdf5 import load_hdf5, save_hdf5
from .netcdf import load_netcdf, save_netcdf
from .npy_files import load_npy, save_npy
from .zarr_files import load_zarr, save_zarr

__all__ = ["FORMAT", "VERSION", "CheckpointError", "ParallelIOError", "SbpChoice", "load",
           "load_csv", "load_hdf5", "load_netcdf", "load_npy", "load_zarr", "save", "save_csv",
           "save_hdf5", "save_netcdf", "save_npy", "save_zarr"]
