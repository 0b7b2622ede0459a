"""What to tell a person whose run failed: one paragraph, from the error's typed attributes.

``failure_paragraph`` says what failed (the provider, model and URL the command was given),
where (``phase``), whether the request had been sent (``request_sent``: True, False or
unknown), how many attempts were made, and what to try next. The hint is picked from the
error's class and attributes, never from its text: a 404 from a base URL that does not end in
``/v1`` suggests adding it, a refused connection asks whether the server runs, and so on.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from agentloop import errors as er
from agentloop._util.slots import record

__all__ = ["Target", "failure_paragraph"]


@record
class Target:
    """What the command asked for: the provider, model and base URL (None: the default)."""

    provider: str
    model: str | None = None
    base_url: str | None = None
    key_env_var: str | None = None


def failure_paragraph(error: er.AgentLoopError, target: Target) -> str:
    """One paragraph: what failed, where, whether it was sent, and what to try."""
    if error.is_cancelled():
        return "The run was cancelled; what it finished is stored with it."
    if isinstance(error, er.ModelRefused):
        said = f' It said: "{error.text.strip()}"' if error.text.strip() else ""
        return (
            f"The model refused to answer ({error.reason}).{said} A refusal is the model's "
            "decision, not a failure: nothing was retried and no other model was tried. "
            "Rephrase the task, or change what it asks for; the turns before it are kept."
        )
    if not isinstance(error, er.ProviderError):
        return (
            f"The run stopped: {type(error).__name__}: {error}. "
            "`agentloop runs show ID` shows each of its turns."
        )
    sentences = [
        f"The request to {_where(target)} failed: {type(error).__name__}: {_what(error, target)}",
        _phase(error),
        _hint(error, target),
    ]
    return " ".join(s for s in sentences if s)


def _what(error: er.ProviderError, target: Target) -> str:
    """The error's message as one sentence; a failed connection said in words, not a repr."""
    if error.phase == er.FailurePhase.CONNECT:
        host = urlsplit(target.base_url).netloc if target.base_url else ""
        return f"nothing answered at {host or 'the provider'} (the connection failed)."
    return str(error).rstrip().rstrip(".") + "."


def _where(target: Target) -> str:
    model = f" model {target.model}" if target.model else ""
    url = f" at {target.base_url}" if target.base_url else ""
    return f"{target.provider}{model}{url}"


def _phase(error: er.ProviderError) -> str:
    phase = f"in the {error.phase} phase" if error.phase is not None else "in an unknown phase"
    sent = {
        True: "after the request was sent",
        False: "before the request was sent",
        None: "and it is unknown whether the request was sent",
    }[error.request_sent]
    tries = f", after {error.attempts} attempts" if error.attempts > 1 else ""
    return f"It failed {phase}, {sent}{tries}."


def _hint(error: er.ProviderError, target: Target) -> str:
    for kind, hint in _HINTS:
        if isinstance(error, kind):
            return hint(error, target)
    return "Run again with --debug for the traceback."


def _not_found(error: er.ProviderError, target: Target) -> str:
    """Per provider: where its API lives under the base URL, and where its models are listed."""
    url = (target.base_url or "").rstrip("/")
    path = urlsplit(url).path
    if target.provider == "anthropic":  # the client appends /v1/messages itself
        if url and path.endswith("/v1"):
            return f"agentloop adds /v1/messages itself: try --base-url {url[:-3]}."
        models = f"{url}/v1/models" if url else ""
    elif target.provider == "gemini":  # the base URL carries the API version
        if url and "/v1" not in path:
            return f"Gemini's API root carries its version: try --base-url {url}/v1beta."
        models = f"{url}/models" if url else ""
    else:  # OpenAI-compatible: the provider's own message already says why /v1
        if url and error.status_code == 404 and "/v1" not in path:
            return f"Try --base-url {url}/v1."
        models = f"{url}/models" if url else ""
    listing = f" (GET {models} lists what it serves)" if models else ""
    return f"Check the model name given with --model{listing}."


def _auth(error: er.ProviderError, target: Target) -> str:
    where = f" ({target.key_env_var})" if target.key_env_var else ""
    return f"Check the API key{where}: it is missing, mistyped or has no access to this model."


def _unavailable(error: er.ProviderError, target: Target) -> str:
    if error.phase == er.FailurePhase.CONNECT:
        return f"Is the server running, and is {target.base_url or 'the URL'} right?"
    return "The server failed; try again later, or another model."


def _fixed(text: str) -> Callable[[er.ProviderError, Target], str]:
    return lambda error, target: text


def _redirect(error: er.ProviderError, target: Target) -> str:
    host = error.redirect_host or "another host"
    return f"The server redirects to {host} (never followed): give the final URL as --base-url."


def _rate_limited(error: er.ProviderError, target: Target) -> str:
    wait = f" (the server asked for {error.retry_after:g}s)" if error.retry_after else ""
    return f"Wait and try again{wait}, or use a model with a higher limit."


_HINTS: tuple[tuple[type[er.ProviderError], Callable[[er.ProviderError, Target], str]], ...] = (
    (er.ModelNotFound, _not_found),
    (er.AuthError, _auth),
    (er.InsufficientCredits, _fixed("Add credits to the account, or use another provider.")),
    (er.UnexpectedRedirect, _redirect),
    (er.RateLimitEscalation, _rate_limited),
    (er.RateLimited, _rate_limited),
    (er.ProviderUnreachable, _fixed("Check the URL's host name, the proxy and TLS settings.")),
    (er.ProviderUnavailable, _unavailable),
    (
        er.ProviderTimeout,
        _fixed("The server did not answer in time; try again, or a smaller model."),
    ),
    (er.ContextLengthExceeded, _fixed("The conversation is too long for this model's context.")),
    (er.BadRequestError, _fixed("The server rejected the request; its message above says why.")),
    (
        er.ResponseInvalid,
        _fixed("The reply could not be read: is the server OpenAI-compatible? --debug shows more."),
    ),
    (er.StreamError, _fixed("The stream broke off mid-reply; try again.")),
)
