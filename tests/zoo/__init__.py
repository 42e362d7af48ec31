"""A zoo of deliberately broken ledgers: each breaks the contract in exactly one way."""
