"""Provider twins: local servers that enforce each provider's documented rules with its own error texts."""
