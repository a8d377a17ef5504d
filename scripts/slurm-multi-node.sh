#!/bin/bash
# mpiflow on several Slurm nodes, with the embedded MPI (the mpich wheel and its Hydra mpiexec).
#   sbatch scripts/slurm-multi-node.sh examples/cg.py --nx 400 --ny 300
# Arguments are the Python program and its arguments (default: examples/hello.py).
# Explained line by line in docs/hpc.md; for the site's tuned MPI use slurm-module-mpi.sh.
#SBATCH --job-name=mpiflow
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=16
#SBATCH --cpus-per-task=1
#SBATCH --time=01:00:00
#SBATCH --output=%x-%j.out

set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-.}"
source "${MPIFLOW_VENV:-.venv}/bin/activate"      # on a file system every node sees
export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"
# Keep freed memory for reuse (large tensors and MPI buffers skip the kernel's page zeroing;
# the process holds on to what it freed): docs/running.md#memory-allocation
# export MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=8589934592
if [ "$#" -eq 0 ]; then set -- examples/hello.py; fi

# Hydra starts one proxy per node with srun, and the proxies start the ranks. The ranks on
# different nodes talk through the wheel's UCX or libfabric (InfiniBand, EFA, Omni-Path when
# the node has their libraries, TCP otherwise).
mpiexec -n "${SLURM_NTASKS}" python -m mpiflow info      # check: N nodes, the wheel's MPICH
mpiexec -n "${SLURM_NTASKS}" python "$@"
