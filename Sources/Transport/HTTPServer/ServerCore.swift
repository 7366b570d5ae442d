import CMicroHTTPD
import Foundation
import Locking

/// The libmicrohttpd daemon and everything its C callbacks reach through their context pointer.
///
/// Owned by `HTTPServer`, which stops the daemon before releasing it, so the unretained context
/// pointer given to libmicrohttpd stays valid for as long as callbacks can run.
final class ServerCore: Sendable {
    struct Registry: ~Copyable {
        /// Set at the start of shutdown: no new handler runs, new requests get 503.
        var draining = false
        /// Requests between handler dispatch and the request-completed callback.
        var inFlight: [ObjectIdentifier: RequestContext] = [:]
        /// Requests whose handler runs, with the instant it times out.
        var running: [ObjectIdentifier: (context: RequestContext, deadline: ContinuousClock.Instant)] = [:]
        /// Event streams whose response is queued and not yet released.
        var streams: [ObjectIdentifier: EventStream] = [:]
    }

    enum Lifecycle: Sendable, Equatable {
        case running
        case stopping
        case stopped
    }

    struct Daemon: @unchecked Sendable {  // an opaque C handle; only the lifecycle mutex hands it out
        let pointer: OpaquePointer
    }

    /// Starts answering a request, on libmicrohttpd's thread; returns the task its handler runs in, if it has one.
    typealias Dispatch = @Sendable (HTTPRequest, @escaping HTTPResponder) -> Task<Void, Never>?

    let configuration: HTTPServer.Configuration
    let dispatch: Dispatch
    let registry = LockedValue(Registry())
    let lifecycle = LockedValue(Lifecycle.running)
    /// Set once the daemon is running.
    let daemon = LockedValue<Daemon?>(nil)
    /// libmicrohttpd diagnostics printed while starting (reported when start fails).
    let startupMessages = LockedValue<[String]?>([])
    /// The heartbeat and request-timeout loops.
    let maintenanceTasks = LockedValue<[Task<Void, Never>]>([])
    /// C strings handed to libmicrohttpd (TLS PEM and priorities, bound address); freed in deinit.
    let allocations = LockedValue<[UInt]>([])  // addresses from malloc/calloc
    /// The TLS certificate's slot (``reloadTLS(certificatePath:privateKeyPath:)`` replaces what it holds), or -1.
    let tlsSlot = LockedValue<Int32>(-1)

    init(configuration: HTTPServer.Configuration, dispatch: @escaping Dispatch) {
        self.configuration = configuration
        self.dispatch = dispatch
    }

    deinit {
        for address in allocations.withLock({ $0 }) { free(UnsafeMutableRawPointer(bitPattern: address)) }
    }

    // MARK: Logging

    func logError(_ message: String) {
        startupMessages.withLock { messages in messages?.append(message) }
        if let errorLog = configuration.errorLog {
            errorLog(message)
        } else {
            FileHandle.standardError.write(Data("HTTPServer: \(message)\n".utf8))
        }
    }

    // MARK: Start

    /// Starts the daemon and returns the bound port.
    func start() throws(HTTPServer.StartError) -> UInt16 {
        let config = configuration
        // epoll: each wake-up costs the ready connections only, not every open one. Draining never calls
        // `MHD_quiesce_daemon`, which under epoll races libmicrohttpd's own threads to remove the listening socket
        // from their epoll sets (the loser aborts the process, "Failed to remove listen FD from epoll set", still in
        // 0.9.75); the accept policy closes new connections instead, and `MHD_stop_daemon` ends the threads.
        var flags =
            MHD_USE_EPOLL_INTERNAL_THREAD.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
            | MHD_USE_ERROR_LOG.rawValue | MHD_USE_ITC.rawValue
        Self.raiseFileLimit(toFit: config.connectionLimit)
        let address = try resolve(host: config.host, port: config.port)
        if address.family == AF_INET6 { flags |= MHD_USE_IPv6.rawValue }
        let context = Unmanaged.passUnretained(self).toOpaque()
        let logger = calloc(1, MemoryLayout<sfmhd_logger>.size)!
        logger.storeBytes(of: sfmhd_logger(callback: mhdLogMessage, context: context), as: sfmhd_logger.self)
        allocations.withLock { $0.append(UInt(bitPattern: logger)) }

        var options: [MHD_OptionItem] = [
            // The logger must come first, or earlier option errors go to the default logger.
            MHD_OptionItem(option: .EXTERNAL_LOGGER, value: sfmhd_logger_trampoline(), ptr_value: logger),
            MHD_OptionItem(option: .SOCK_ADDR, value: 0, ptr_value: address.pointer),
            MHD_OptionItem(option: .CONNECTION_LIMIT, value: max(1, config.connectionLimit), ptr_value: nil),
            MHD_OptionItem(
                option: .CONNECTION_TIMEOUT, value: max(0, config.idleTimeoutSeconds), ptr_value: nil),
            MHD_OptionItem(
                option: .CONNECTION_MEMORY_LIMIT, value: max(4096, config.connectionMemoryLimit),
                ptr_value: nil),
            MHD_OptionItem(
                option: .NOTIFY_COMPLETED, value: unsafeBitCast(mhdRequestCompleted, to: Int.self),
                ptr_value: context),
            MHD_OptionItem(
                option: .URI_LOG_CALLBACK, value: unsafeBitCast(mhdURILog, to: Int.self),
                ptr_value: context),
            MHD_OptionItem(option: .STRICT_FOR_CLIENT, value: 1, ptr_value: nil),
        ]
        if config.threadCount > 1 {
            options.append(MHD_OptionItem(option: .THREAD_POOL_SIZE, value: config.threadCount, ptr_value: nil))
        }
        if let tls = config.tls {
            flags |= MHD_USE_TLS.rawValue
            // The certificate through a callback, not libmicrohttpd's copy: a renewed one is served without a restart.
            let slot = sfmhd_tls_slot_open()
            guard slot >= 0 else { throw .startFailed("no TLS certificate slot is free") }
            tlsSlot.withLock { $0 = slot }
            do {
                try Self.setCertificate(slot: slot, certificatePath: tls.certificatePath, keyPath: tls.privateKeyPath)
            } catch {
                closeTLSSlot()
                throw error
            }
            options.append(MHD_OptionItem(option: .HTTPS_CERT_CALLBACK, value: 0, ptr_value: sfmhd_tls_callback()))
            options.append(
                MHD_OptionItem(option: .HTTPS_PRIORITIES, value: 0, ptr_value: keep(tls.gnuTLSPriorities)))
        }
        options.append(MHD_OptionItem(option: .END, value: 0, ptr_value: nil))

        let started = options.withUnsafeBufferPointer { buffer in
            sfmhd_start_daemon(flags, config.port, mhdAcceptPolicy, context, mhdAccess, context, buffer.baseAddress)
        }
        let messages = startupMessages.withLock { messages in
            defer { messages = nil }
            return messages ?? []
        }
        guard let started else {
            closeTLSSlot()
            let reason =
                messages.isEmpty ? "libmicrohttpd could not start the daemon" : messages.joined(separator: "; ")
            throw .startFailed(reason.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        daemon.withLock { $0 = Daemon(pointer: started) }
        startMaintenance()
        let port = sfmhd_daemon_bind_port(started)
        sfmhd_tls_slot_bind(tlsSlot.withLock { $0 }, port)
        return port
    }

    /// Serves the certificate chain and key in these files to every new TLS connection; connections open keep theirs.
    /// A file that cannot be read or used (not PEM, the key not the certificate's) leaves the one served as it was.
    func reloadTLS(certificatePath: String, privateKeyPath: String) throws(HTTPServer.StartError) {
        let slot = tlsSlot.withLock { $0 }
        guard slot >= 0 else { throw .startFailed("this server does not serve TLS") }
        try Self.setCertificate(slot: slot, certificatePath: certificatePath, keyPath: privateKeyPath)
    }

    private static func setCertificate(
        slot: Int32, certificatePath: String, keyPath: String
    ) throws(HTTPServer.StartError) {
        let certificate = try readPEM(certificatePath)
        let key = try readPEM(keyPath)
        var error = [CChar](repeating: 0, count: 256)
        let status = certificate.withUnsafeBytes { chain in
            key.withUnsafeBytes { key in
                sfmhd_tls_slot_set(
                    slot, chain.baseAddress?.assumingMemoryBound(to: CChar.self), chain.count,
                    key.baseAddress?.assumingMemoryBound(to: CChar.self), key.count, &error, error.count)
            }
        }
        guard status == 0 else {
            let reason = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw .startFailed("unusable TLS certificate \(certificatePath) with key \(keyPath): \(reason)")
        }
    }

    /// Gives the certificate's slot back (once the daemon has stopped, or never started).
    private func closeTLSSlot() {
        let slot = tlsSlot.withLock { slot in
            defer { slot = -1 }
            return slot
        }
        if slot >= 0 { sfmhd_tls_slot_close(slot) }
    }

    /// Raises the soft open-file limit (often 1024) towards the hard limit so `connectionLimit`
    /// connections fit; never lowers it.
    private static func raiseFileLimit(toFit connections: Int) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        let wanted = rlim_t(max(0, connections) + 256)
        guard limit.rlim_cur < wanted else { return }
        limit.rlim_cur = min(wanted, limit.rlim_max)
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    /// A C copy of `text` that lives as long as the daemon (freed in deinit).
    private func keep(_ text: String) -> UnsafeMutableRawPointer {
        let pointer = UnsafeMutableRawPointer(strdup(text)!)
        allocations.withLock { $0.append(UInt(bitPattern: pointer)) }
        return pointer
    }

    private static func readPEM(_ path: String) throws(HTTPServer.StartError) -> Data {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .unreadableFile(path: path, reason: (error as NSError).localizedDescription)
        }
        guard !data.isEmpty, !data.contains(0) else { throw .unreadableFile(path: path, reason: "not a PEM file") }
        return data
    }

    private func resolve(
        host: String, port: UInt16
    ) throws(HTTPServer.StartError) -> (
        pointer: UnsafeMutableRawPointer, family: Int32
    ) {
        // Prefer IPv4 so `localhost` binds where IPv4 clients connect; fall back to IPv6 literals.
        let lookup = host.isEmpty ? "0.0.0.0" : host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        var result: UnsafeMutablePointer<addrinfo>?
        for family in [AF_INET, AF_INET6] where result == nil {
            var hints = addrinfo()
            hints.ai_family = family
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            hints.ai_flags = AI_PASSIVE
            if getaddrinfo(lookup, nil, &hints, &result) != 0 { result = nil }
        }
        guard let first = result, let address = first.pointee.ai_addr else { throw .invalidHost(host) }
        defer { freeaddrinfo(result) }
        let storage = calloc(1, MemoryLayout<sockaddr_storage>.size)!
        storage.copyMemory(from: address, byteCount: Int(first.pointee.ai_addrlen))
        let family = Int32(address.pointee.sa_family)
        if family == AF_INET6 {
            storage.assumingMemoryBound(to: sockaddr_in6.self).pointee.sin6_port = port.bigEndian
        } else {
            storage.assumingMemoryBound(to: sockaddr_in.self).pointee.sin_port = port.bigEndian
        }
        allocations.withLock { $0.append(UInt(bitPattern: storage)) }
        return (storage, family)
    }

    // MARK: Requests

    var isDraining: Bool { registry.withLock { $0.draining } }

    /// Registers a request whose handler is about to run; `false` while shutting down.
    func beginHandler(_ context: RequestContext) -> Bool {
        let deadline = ContinuousClock.now + configuration.requestTimeout
        return registry.withLock { registry in
            guard !registry.draining else { return false }
            registry.inFlight[ObjectIdentifier(context)] = context
            registry.running[ObjectIdentifier(context)] = (context, deadline)
            return true
        }
    }

    func endRequest(_ context: RequestContext) {
        registry.withLock { registry in
            registry.inFlight.removeValue(forKey: ObjectIdentifier(context))
            registry.running.removeValue(forKey: ObjectIdentifier(context))
        }
    }

    /// Starts the handler (inline, or in a task); thrown errors become responses. The timeout loop answers
    /// handlers that outlive `requestTimeout`.
    func run(_ request: HTTPRequest, for context: RequestContext) {
        let (method, path) = (request.method, request.path)
        let task = dispatch(request) { [self] result in
            deliver(response(to: result, method: method, path: path), to: context)
        }
        if let task { context.state.withLock { $0.handlerTask = task } }
    }

    private func deliver(_ response: HTTPResponse, to context: RequestContext) {
        _ = registry.withLock { $0.running.removeValue(forKey: ObjectIdentifier(context)) }
        if !context.complete(with: response) { response.eventStream?.terminate() }
    }

    /// Answers (with 503 `timeout`) and cancels every handler past its deadline.
    private func expireHandlers() {
        let now = ContinuousClock.now
        let expired = registry.withLock { registry -> [RequestContext] in
            let late = registry.running.values.filter { $0.deadline <= now }.map(\.context)
            for context in late { registry.running.removeValue(forKey: ObjectIdentifier(context)) }
            return late
        }
        guard !expired.isEmpty else { return }
        let response = HTTPError(.serviceUnavailable, code: "timeout", message: "The request took too long to process.")
            .response
        for context in expired where context.complete(with: response) {
            context.state.withLock { $0.handlerTask }?.cancel()
            logError("a handler exceeded the request timeout of \(configuration.requestTimeout)")
        }
    }

    private func response(
        to result: Result<HTTPResponse, any Error>, method: HTTPMethod, path: String
    ) -> HTTPResponse {
        switch result {
        case .success(let response):
            return response
        case .failure(let error as HTTPError):
            return error.response
        case .failure(let error):
            logError("handler for \(method) \(path) failed: \(type(of: error))")
            return HTTPError.internalError.response
        }
    }

    // MARK: Event streams

    /// Records a stream whose response was queued; closes it at once while shutting down.
    func register(_ stream: EventStream) {
        let draining = registry.withLock { registry -> Bool in
            registry.streams[ObjectIdentifier(stream)] = stream
            return registry.draining
        }
        if draining { stream.close() }
    }

    func unregister(_ stream: EventStream) {
        _ = registry.withLock { $0.streams.removeValue(forKey: ObjectIdentifier(stream)) }
    }

    var eventStreamCount: Int { registry.withLock { $0.streams.count } }

    private func startMaintenance() {
        let interval = configuration.eventStreamHeartbeat
        let heartbeat = Task { [weak self] in
            while !Task.isCancelled {
                do { try await Task.sleep(for: interval) } catch { return }
                guard let self else { return }
                let streams = self.registry.withLock { Array($0.streams.values) }
                for stream in streams { stream.sendComment("keep-alive") }
            }
        }
        let tick = max(.milliseconds(10), min(.milliseconds(250), configuration.requestTimeout / 4))
        let timeouts = Task { [weak self] in
            while !Task.isCancelled {
                do { try await Task.sleep(for: tick) } catch { return }
                guard let self else { return }
                self.expireHandlers()
            }
        }
        maintenanceTasks.withLock { $0 = [heartbeat, timeouts] }
    }

    // MARK: Shutdown

    /// Claims the shutdown; `false` if another caller already did.
    func beginShutdown() -> Bool {
        lifecycle.withLock { state in
            guard state == .running else { return false }
            state = .stopping
            return true
        }
    }

    /// Stops accepting connections (the accept policy closes them) and refuses new requests; closes every event
    /// stream.
    func quiesce() {
        let streams = registry.withLock { registry in
            registry.draining = true
            return Array(registry.streams.values)
        }
        for stream in streams { stream.close() }
    }

    var inFlightCount: Int { registry.withLock { $0.inFlight.count } }

    /// Answers every still-running handler with 503 so its connection resumes.
    func abandonInFlight() {
        let (contexts, streams) = registry.withLock { (Array($0.inFlight.values), Array($0.streams.values)) }
        let response = HTTPError(.serviceUnavailable, code: "shuttingDown", message: "The server is shutting down.")
            .response
        for context in contexts where context.complete(with: response) {
            context.state.withLock { $0.handlerTask }?.cancel()
        }
        for stream in streams { stream.close() }
    }

    /// Stops the daemon (every connection must have been resumed) and releases its resources.
    func stopDaemon() {
        for task in maintenanceTasks.withLock({ tasks in
            defer { tasks = [] }
            return tasks
        }) {
            task.cancel()
        }
        if let daemon = daemon.withLock({ state -> Daemon? in
            defer { state = nil }
            return state
        }) {
            MHD_stop_daemon(daemon.pointer)
        }
        closeTLSSlot()
        for stream in registry.withLock({ Array($0.streams.values) }) { stream.terminate() }
        lifecycle.withLock { $0 = .stopped }
    }
}
