#!/bin/bash
# mpiflow on one PBS (PBS Pro / OpenPBS) node, with the embedded MPI (the mpich wheel).
#   qsub -v MPIFLOW_PROGRAM="examples/heat2d.py --plot heat.png" scripts/pbs-one-node.sh
# MPIFLOW_PROGRAM is the Python program and its arguments (default: examples/hello.py).
# Explained line by line in docs/hpc.md.
#PBS -N mpiflow
#PBS -l select=1:ncpus=8:mpiprocs=8
#PBS -l walltime=00:30:00
#PBS -j oe

set -euo pipefail
cd "${PBS_O_WORKDIR:-.}"
source "${MPIFLOW_VENV:-.venv}/bin/activate"      # pip install -e ".[mpich]" made it
NP="$(wc -l < "${PBS_NODEFILE}")"                  # one line per MPI process (mpiprocs)
export OMP_NUM_THREADS=1                         # cores per rank: ncpus / mpiprocs
# Keep freed memory for reuse (large tensors and MPI buffers skip the kernel's page zeroing;
# the process holds on to what it freed): docs/running.md#memory-allocation
# export MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=8589934592
read -r -a PROGRAM <<< "${MPIFLOW_PROGRAM:-examples/hello.py}"

mpiexec -n "$NP" python "${PROGRAM[@]}"
