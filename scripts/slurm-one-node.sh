#!/bin/bash
# mpiflow on one Slurm node, with the embedded MPI (the mpich wheel and its Hydra mpiexec).
#   sbatch scripts/slurm-one-node.sh examples/heat2d.py --plot heat.png
# Arguments are the Python program and its arguments (default: examples/hello.py).
# Explained line by line in docs/hpc.md.
#SBATCH --job-name=mpiflow
#SBATCH --nodes=1
#SBATCH --ntasks=8
#SBATCH --cpus-per-task=1
#SBATCH --time=00:30:00
#SBATCH --output=%x-%j.out

set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-.}"
source "${MPIFLOW_VENV:-.venv}/bin/activate"      # pip install -e ".[mpich]" made it
export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"
# Keep freed memory for reuse (large tensors and MPI buffers skip the kernel's page zeroing;
# the process holds on to what it freed): docs/running.md#memory-allocation
# export MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=8589934592
if [ "$#" -eq 0 ]; then set -- examples/hello.py; fi

# The wheel's Hydra reads the allocation from Slurm and starts the ranks through srun.
# (python -m mpiflow.launch -n "$SLURM_NTASKS" "$@" does the same, with --timeout if wanted.)
mpiexec -n "${SLURM_NTASKS}" python "$@"
