"""Small helpers with no knowledge of agents.

Numbers, asyncio plumbing, lazy exports, backoff and name suggestions; they import nothing of
ours but ``errors``.
"""
