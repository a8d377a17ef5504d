# Sourced by the scripts: make .venv in the checkout (once) and install mpiflow with the extras
# given in $MPIFLOW_EXTRAS. Set MPIFLOW_PYTHON to choose the interpreter that creates it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV="${MPIFLOW_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  "${MPIFLOW_PYTHON:-python3}" -m venv "$VENV"
fi
PY="$VENV/bin/python"
# pip runs again only when what it would install changed (the package's metadata, the extras,
# the constraints): a second script or CI step on the same venv skips its ~5 s of resolving.
# The install is editable, so source changes need none. `rm $VENV/.mpiflow-installed` forces it.
stamp="$VENV/.mpiflow-installed"
wanted="$(cat setup.cfg pyproject.toml "${PIP_CONSTRAINT:-/dev/null}" | cksum) [${MPIFLOW_EXTRAS}]"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
  rm -f "$stamp"
  "$PY" -m pip install --quiet --disable-pip-version-check -e ".[${MPIFLOW_EXTRAS}]"
  echo "$wanted" > "$stamp"
fi
# The mpiexec that belongs to mpi4py's MPI: the mpich wheel's in the venv, unless overridden.
MPIEXEC="${MPIEXEC:-$VENV/bin/mpiexec}"
if [ ! -x "$MPIEXEC" ]; then
  MPIEXEC="$(command -v mpiexec)"
fi
export PATH="$PWD/$VENV/bin:$PATH"
