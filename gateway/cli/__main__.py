"""`python -m clawgate.gateway.cli …`, the same as the `clawgate` console script."""

import sys

from . import main

sys.exit(main())
