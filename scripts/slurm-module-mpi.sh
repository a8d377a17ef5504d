#!/bin/bash
# mpiflow on Slurm nodes with the site's MPI from a module, started by srun.
#   sbatch scripts/slurm-module-mpi.sh examples/kmeans.py --points 10000000
# Arguments are the Python program and its arguments (default: examples/hello.py).
# mpiflow must be installed WITHOUT the [mpich] extra. Explained in docs/hpc.md.
#SBATCH --job-name=mpiflow
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=16
#SBATCH --cpus-per-task=1
#SBATCH --time=01:00:00
#SBATCH --output=%x-%j.out

set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-.}"
module purge
module load openmpi                                # EDIT: your site's MPI module
source "${MPIFLOW_VENV:-.venv}/bin/activate"

# Make mpi4py load the module's MPI library, and the dynamic loader find its dependencies.
if [ -z "${MPI4PY_LIBMPI:-}" ]; then
  MPI_BIN="$(dirname "$(command -v mpicc || command -v mpiexec || echo /nonexistent/bin/x)")"
  export MPI4PY_LIBMPI="$(dirname "$MPI_BIN")/lib/libmpi.so"
fi
if [ ! -e "$MPI4PY_LIBMPI" ]; then
  echo "no MPI library at $MPI4PY_LIBMPI: load your MPI module or set MPI4PY_LIBMPI" >&2
  exit 1
fi
export LD_LIBRARY_PATH="$(dirname "$MPI4PY_LIBMPI")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"
# Keep freed memory for reuse (large tensors and MPI buffers skip the kernel's page zeroing;
# the process holds on to what it freed): docs/running.md#memory-allocation
# export MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=8589934592
if [ "$#" -eq 0 ]; then set -- examples/hello.py; fi

# Which MPI mpi4py loads, asked without starting it (MPI allows the call before MPI_Init).
# (Or build mpi4py against the module instead of MPI4PY_LIBMPI: with the module loaded,
#  pip install --no-binary mpi4py --force-reinstall mpi4py.)
LIBRARY="$(python -c 'import mpi4py; mpi4py.rc.initialize = False
from mpi4py import MPI; print(MPI.Get_library_version().splitlines()[0])')"
echo "mpi4py loads: $LIBRARY"                      # must name the module's MPI
# srun starts every rank through the PMI plugin the library speaks (srun --mpi=list).
case "$LIBRARY" in
  *"Open MPI"*) SRUN_MPI=pmix ;;                   # Open MPI 4 and 5: PMIx
  *"Intel(R) MPI"*) SRUN_MPI=pmi2                  # Intel MPI: Slurm's PMI-2 library
    export I_MPI_PMI_LIBRARY="${I_MPI_PMI_LIBRARY:-/usr/lib64/libpmi2.so}" ;;
  *) SRUN_MPI="${MPIFLOW_SRUN_MPI:-}" ;;           # MPICH, MVAPICH, Cray: the site's default
esac
srun ${SRUN_MPI:+--mpi="$SRUN_MPI"} --cpus-per-task="${SLURM_CPUS_PER_TASK:-1}" python "$@"
