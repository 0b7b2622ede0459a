"""agentloop: LLM agent loops that do not fall over.

Soft errors are tool results the model reads; hard errors are typed exceptions from
``agentloop.errors`` that end a run after it is finalized.
"""

from agentloop.model import ModelSettings

__all__ = ["ModelSettings"]
