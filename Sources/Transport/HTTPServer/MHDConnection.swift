import CMicroHTTPD

/// A libmicrohttpd connection handle passed between threads.
///
/// `@unchecked Sendable`: the handle is only an address; the objects holding it (`EventStream`,
/// `RequestContext`) keep it inside their mutex and call `MHD_suspend_connection` /
/// `MHD_resume_connection` (documented as thread-safe for resume) while holding that mutex, except for
/// an `EventStream` batch wake-up, which resumes just after releasing it (see `EventStream.wakeMarked()`).
struct MHDConnection: @unchecked Sendable {
    let pointer: OpaquePointer
}
