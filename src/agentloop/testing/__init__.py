"""Test doubles that ship with the package: scripted models, a fake clock, a fake provider server.

``doubles`` holds the models, clock and recording observer; ``fake_server`` (with its script
and wire modules) serves provider-shaped HTTP replies on 127.0.0.1.
"""

from agentloop.testing.doubles import (
    FakeClock,
    FakeProviderServer,
    FakeReply,
    FakeScript,
    FakeToolCall,
    Fault,
    FunctionModel,
    RecordingObserver,
    ScriptedCall,
    ScriptedModel,
    ScriptExhausted,
    Step,
    call,
    load_fake_script,
    reply,
)

__all__ = [
    "FakeClock",
    "FakeProviderServer",
    "FakeReply",
    "FakeScript",
    "FakeToolCall",
    "Fault",
    "FunctionModel",
    "RecordingObserver",
    "ScriptExhausted",
    "ScriptedCall",
    "ScriptedModel",
    "Step",
    "call",
    "load_fake_script",
    "reply",
]
