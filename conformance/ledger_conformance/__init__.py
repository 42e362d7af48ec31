"""The decision-ledger conformance suite (C1-C9, H1-H5) for any ledger."""
