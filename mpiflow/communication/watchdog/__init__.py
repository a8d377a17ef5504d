"""The watchdog: bounds every blocking call, and reports a hang or a failure on every rank.

Modules: ``state`` (the call state the hot paths mark, ``watched``), ``monitor`` (the
watchdog thread, the timeout), ``sites`` (what the blocking modules register: their sites
and frame readers), ``report`` (the hang report's text), ``failure`` (an MPI error inside a
collective: a rank-tagged abort) and ``skew`` (a collective that raised on one rank while
the others ran it). This package is the bottom of the communication layer: it imports no
communicator.
"""

from .monitor import *  # noqa: F403
from .monitor import __all__ as _monitor_all
from .sites import *  # noqa: F403
from .sites import __all__ as _sites_all

__all__ = sorted({*_monitor_all, *_sites_all})
