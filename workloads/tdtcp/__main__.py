"""``python -m workloads.tdtcp``: see :mod:`workloads.tdtcp.cli`."""

import sys

from workloads.tdtcp.cli import main

if __name__ == "__main__":
    sys.exit(main())
