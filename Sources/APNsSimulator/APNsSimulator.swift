// APNsSimulator: not yet implemented.
