"""pytest plugin: options and fixtures of the conformance suite (filled in by the suite)."""
