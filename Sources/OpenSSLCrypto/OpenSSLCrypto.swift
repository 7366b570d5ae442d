// OpenSSLCrypto: not yet implemented.
