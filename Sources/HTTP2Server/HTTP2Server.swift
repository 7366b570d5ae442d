// HTTP2Server: not yet implemented.
