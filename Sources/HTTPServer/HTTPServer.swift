// HTTPServer: not yet implemented.
