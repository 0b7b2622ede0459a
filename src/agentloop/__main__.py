"""``python -m agentloop``: the command line."""

import sys

from agentloop.cli import main

sys.exit(main())
