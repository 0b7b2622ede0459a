"""The command line: ``agentloop`` and ``python -m agentloop``.

``commands`` parses and runs, ``runs`` reads a store back (``runs``, ``runs show``),
``console`` renders, ``demo`` is the offline demo, ``advice`` says what to do about a failure.
"""

from agentloop.cli.commands import (
    main,
)

__all__ = [
    "main",
]
