#!/bin/bash
# mpiflow on PBS nodes with the site's MPI from a module, started by that MPI's mpiexec.
#   qsub -v MPIFLOW_PROGRAM="examples/kmeans.py --points 10000000" scripts/pbs-module-mpi.sh
# MPIFLOW_PROGRAM is the Python program and its arguments (default: examples/hello.py).
# mpiflow must be installed WITHOUT the [mpich] extra. Explained in docs/hpc.md.
#PBS -N mpiflow
#PBS -l select=2:ncpus=16:mpiprocs=16
#PBS -l walltime=01:00:00
#PBS -j oe

set -euo pipefail
cd "${PBS_O_WORKDIR:-.}"
module purge
module load openmpi                                # EDIT: your site's MPI module
MPIEXEC="$(command -v mpiexec)"                    # the module's, before the venv's PATH
source "${MPIFLOW_VENV:-.venv}/bin/activate"

# Make mpi4py load the module's MPI library, and the dynamic loader find its dependencies.
if [ -z "${MPI4PY_LIBMPI:-}" ]; then
  export MPI4PY_LIBMPI="$(dirname "$(dirname "$MPIEXEC")")/lib/libmpi.so"
fi
if [ ! -e "$MPI4PY_LIBMPI" ]; then
  echo "no MPI library at $MPI4PY_LIBMPI: load your MPI module or set MPI4PY_LIBMPI" >&2
  exit 1
fi
export LD_LIBRARY_PATH="$(dirname "$MPI4PY_LIBMPI")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
NP="$(wc -l < "${PBS_NODEFILE}")"
export OMP_NUM_THREADS=1                         # cores per rank: ncpus / mpiprocs
# Keep freed memory for reuse (large tensors and MPI buffers skip the kernel's page zeroing;
# the process holds on to what it freed): docs/running.md#memory-allocation
# export MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=8589934592
read -r -a PROGRAM <<< "${MPIFLOW_PROGRAM:-examples/hello.py}"

# Which MPI mpi4py loads, asked without starting it (MPI allows the call before MPI_Init).
# (Or build mpi4py against the module instead of MPI4PY_LIBMPI: with the module loaded,
#  pip install --no-binary mpi4py --force-reinstall mpi4py.)
LIBRARY="$(python -c 'import mpi4py; mpi4py.rc.initialize = False
from mpi4py import MPI; print(MPI.Get_library_version().splitlines()[0])')"
echo "mpi4py loads: $LIBRARY"                      # must name the module's MPI
# How the library's mpiexec hands this environment (the venv's PATH, MPI4PY_LIBMPI, ...) to
# the ranks on the other nodes. Open MPI built with PBS support (tm) reads the nodes from the
# job; Hydra (MPICH, Intel MPI) reads $PBS_NODEFILE.
case "$LIBRARY" in
  *"Open MPI"*) EXPORT=(-x PATH -x MPI4PY_LIBMPI -x LD_LIBRARY_PATH -x OMP_NUM_THREADS) ;;
  *) EXPORT=(-genvall -f "$PBS_NODEFILE") ;;     # Intel MPI, MPICH (Cray PALS: --ppn 16)
esac
# Or: python -m mpiflow.launch -n "$NP" --hostfile "$PBS_NODEFILE" "${PROGRAM[@]}" (finds
# "$MPIEXEC" by MPI4PY_LIBMPI and translates the options for the library).
"$MPIEXEC" -n "$NP" "${EXPORT[@]}" python "${PROGRAM[@]}"
