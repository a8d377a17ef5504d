#!/bin/bash
# mpiflow on several PBS nodes, with the embedded MPI (the mpich wheel and its Hydra mpiexec).
#   qsub -v MPIFLOW_PROGRAM="examples/cg.py --nx 400 --ny 300" scripts/pbs-multi-node.sh
# MPIFLOW_PROGRAM is the Python program and its arguments (default: examples/hello.py).
# Explained line by line in docs/hpc.md; for the site's tuned MPI use pbs-module-mpi.sh.
#PBS -N mpiflow
#PBS -l select=2:ncpus=16:mpiprocs=16
#PBS -l walltime=01:00:00
#PBS -j oe

set -euo pipefail
cd "${PBS_O_WORKDIR:-.}"
source "${MPIFLOW_VENV:-.venv}/bin/activate"      # on a file system every node sees
NP="$(wc -l < "${PBS_NODEFILE}")"
export OMP_NUM_THREADS=1                         # cores per rank: ncpus / mpiprocs
# Keep freed memory for reuse (large tensors and MPI buffers skip the kernel's page zeroing;
# the process holds on to what it freed): docs/running.md#memory-allocation
# export MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=8589934592
read -r -a PROGRAM <<< "${MPIFLOW_PROGRAM:-examples/hello.py}"

# Hydra starts a proxy on each host of the node file with ssh (PBS lets a job ssh to its own
# nodes), then the ranks; -genvall passes this environment (venv, OMP_NUM_THREADS) along.
mpiexec -f "$PBS_NODEFILE" -n "$NP" -genvall python -m mpiflow info
mpiexec -f "$PBS_NODEFILE" -n "$NP" -genvall python "${PROGRAM[@]}"
