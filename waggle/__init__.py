"""The ``waggle`` command's entry point: the product's commands plus the local stack's (when installed)."""
