// APNs: not yet implemented.
