"""Runs that outlive their process.

``journal`` is the plain store's step journal (what ``Agent.continue_run`` replays);
``dbos`` runs a run as a DBOS workflow (extra ``dbos``); ``temporal`` as a Temporal workflow
(extra ``temporal``). The engines are imported only by their own modules.
"""

__all__: list[str] = []  # the submodules are the API: a star import must not load an engine
