// HTTPClient: not yet implemented.
