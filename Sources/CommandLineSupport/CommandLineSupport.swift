// CommandLineSupport: not yet implemented.
