"""Provider adapters, the HTTP layer they share, and ``Settings``/``build_client``."""
