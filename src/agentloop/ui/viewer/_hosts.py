"""Which ``Host`` a request to the viewer may name: DNS rebinding is refused before anything else.

A page of another site can make its own name resolve to 127.0.0.1 and then talk to a viewer on
this machine as if it were that site: the browser sends ``Host: rebound.example:8765`` and an
``Origin`` of the same name, so an origin check that compares the two passes. The viewer
therefore answers only requests whose ``Host`` names one of its allowed host names, checked on
every request (pages, live streams, decisions) before the origin check.

- ``ViewerApp(store)`` allows the loopback names ``127.0.0.1``, ``localhost`` and ``::1``
  (written ``[::1]`` in a URL), with any port.
- ``ViewerApp(store, allowed_hosts=["viewer.internal", "10.0.0.5"])`` allows exactly those
  names (any port); ``"*"`` allows every name, for an application that serves the viewer on a
  public interface behind its own authentication.

Names compare without case and without a trailing dot; a ``Host`` that is missing, repeated,
or has a port that is not a number is refused. Pure: no I/O, unit-tested without a server.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agentloop.errors import ConfigurationError

__all__ = ["ANY_HOST", "LOOPBACK_NAMES", "allowed_names", "host_name"]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
"""The names a viewer answers to by default: this machine only."""
ANY_HOST = "*"
"""In ``allowed_hosts``: every host name (the application protects the viewer itself)."""


def _normal(name: str) -> str:
    return name.strip().lower().removesuffix(".")


def _checked(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError(
            f"allowed_hosts takes host names as strings, got {name!r}", field="allowed_hosts"
        )
    given = name.strip()
    if given.startswith("["):  # an IPv6 address as a URL writes it
        given = given.removeprefix("[").removesuffix("]")
    elif given.count(":") == 1:
        raise ConfigurationError(
            f"allowed_hosts takes host names without a port ({given.split(':')[0]!r}, not "
            f"{given!r}): every port of an allowed name is accepted",
            field="allowed_hosts",
        )
    return _normal(given)


def allowed_names(given: Sequence[str] | None) -> frozenset[str] | None:
    """The host names a viewer answers to (None: every name); loopback when none are given."""
    if given is None:
        return frozenset(LOOPBACK_NAMES)
    if isinstance(given, str):
        raise ConfigurationError(
            f"allowed_hosts takes a list of host names, not the string {given!r} "
            f"(write [{given!r}])",
            field="allowed_hosts",
        )
    names = [_checked(name) for name in given]
    if ANY_HOST in names:
        return None
    if not names:
        raise ConfigurationError(
            "allowed_hosts is empty: the viewer would refuse every request "
            "(leave it out for the loopback names, or give the names it is reached by)",
            field="allowed_hosts",
        )
    return frozenset(names)


def host_name(values: Iterable[str]) -> str | None:
    """The host name of a request's ``Host`` header(s); None when missing, repeated or malformed."""
    found = list(values)
    if len(found) != 1:
        return None
    host = found[0].strip()
    if host.startswith("["):  # [::1] or [::1]:8765
        address, bracket, port = host[1:].partition("]")
        if not bracket or (port and not (port.startswith(":") and port[1:].isdigit())):
            return None
        return _normal(address) or None
    name, colon, port = host.partition(":")
    if colon and not port.isdigit():
        return None
    return _normal(name) or None
