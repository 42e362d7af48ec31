"""The clause families, one module each; :class:`LedgerConformance` combines them."""
