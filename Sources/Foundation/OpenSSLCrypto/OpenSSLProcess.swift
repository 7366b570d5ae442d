import COpenSSL

/// How this process holds libcrypto.
public enum OpenSSLProcess {
    /// Keeps libcrypto's global state until the process is gone. By default OpenSSL frees it in an `atexit` handler,
    /// and a thread still inside an OpenSSL call while `exit` runs (a store's worker, a TLS connection closing) then
    /// finds its locks freed under it and crashes the exiting process. Call first in `main`, before any other use of
    /// OpenSSL: the choice is made on the library's first initialisation.
    public static func keepUntilExit() {
        _ = OPENSSL_init_crypto(UInt64(OPENSSL_INIT_NO_ATEXIT), nil)
    }
}
