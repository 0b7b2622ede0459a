"""Provider twins: local servers enforcing each provider's documented rules, with its own texts."""
