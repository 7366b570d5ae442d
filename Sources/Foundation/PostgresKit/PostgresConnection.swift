import CPostgres
import Foundation
import SQLSupport

/// One libpq connection, owned by one thread at a time (see ``PostgresPool``, which confines each connection to a
/// thread of its own so no call blocks Swift's cooperative pool).
///
/// Statements are prepared once per connection and cached by their SQL; parameters go as text (bytes as binary),
/// typed by the server from their context, so the SQL the store writes once runs here unchanged apart from its
/// `?` placeholders, which become `$1`, `$2`, ….
///
/// Round trips are what a statement costs most here (a send, a wait, a wake-up on each side), so a transaction
/// sends what needs no answer of its own with the next statement that does, in one pipeline (libpq's pipeline
/// mode): its BEGIN with its first statement, statements run with ``runDeferred(_:arguments:)`` with the next
/// query, and those left at the end with the COMMIT.
public final class PostgresConnection: SQLConnection {
    private let handle: OpaquePointer
    /// SQL → the name of its prepared statement on this connection.
    private var prepared: [String: String] = [:]
    /// Statements waiting to go out with the next one that needs an answer (inside a transaction only).
    private var queued: [Queued] = []
    /// A pipeline ended in a way libpq could not account for: the connection is not used again.
    private var pipelineFailed = false

    /// A statement in ``queued``.
    private enum Queued {
        /// Transaction control or NOTIFY: no parameters, one statement.
        case plain(String)
        /// A prepared statement with its parameters.
        case prepared(name: String, sql: String, values: [SQLValue])

        var sql: String {
            switch self {
            case .plain(let sql), .prepared(_, let sql, _): return sql
            }
        }
    }

    /// PostgreSQL's dialect.
    public var dialect: SQLDialect { .postgres }

    /// Connects to `url`: a libpq URI (`postgresql://user:password@host:port/db?…`) or a `key=value` string.
    /// Unless the URL says otherwise, connecting gives up after `connectTimeout` seconds. A server whose machine
    /// is gone sends no reset, so its connections would wait on TCP: a statement sent on one fails once it is
    /// unacknowledged for 5 s (`tcp_user_timeout`), and an idle one is noticed by keepalives within about 9 s.
    public init(url: String, connectTimeout: Int = 5, applicationName: String = "signalfetch") throws(PostgresError) {
        // Keywords before `dbname` are defaults: the expanded URL overrides them.
        let pairs: [(String, String)] = [
            ("connect_timeout", String(connectTimeout)), ("application_name", applicationName),
            ("keepalives_idle", "5"), ("keepalives_interval", "2"), ("keepalives_count", "2"),
            ("tcp_user_timeout", "5000"), ("dbname", url),
        ]
        let keys = pairs.map { strdup($0.0) }
        let values = pairs.map { strdup($0.1) }
        defer {
            keys.forEach { free($0) }
            values.forEach { free($0) }
        }
        let keyPointers = keys.map { UnsafePointer($0) } + [nil]
        let valuePointers = values.map { UnsafePointer($0) } + [nil]
        guard let connection = PQconnectdbParams(keyPointers, valuePointers, 1) else {
            throw PostgresError(sqlstate: nil, message: "out of memory", connectionLost: true)
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let error = PostgresError(result: nil, connection: connection, sql: nil)
            PQfinish(connection)
            throw PostgresError(sqlstate: nil, message: error.message, connectionLost: true)
        }
        handle = connection
        // Notices (for example "relation already exists, skipping") are not errors; keep them off stderr.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
    }

    deinit { PQfinish(handle) }

    /// Whether the connection is still up, as far as libpq knows, and its server took writes when last asked. A
    /// connection whose server answered read-only (SQLSTATE 25006) stays unhealthy: a pool replaces it.
    public var isHealthy: Bool { PQstatus(handle) == CONNECTION_OK && !foundReadOnly && !pipelineFailed }

    /// ``isHealthy``, and nothing arrived while the connection sat idle (asked without waiting). A server that
    /// was stopped, killed or failed over ends its connections with a last message and the socket's end, which
    /// libpq would read only at the next statement, failing it; a reload that changes `default_transaction_read_only`
    /// or `in_hot_standby` announces it the same way. A pool asks before handing out a connection and replaces one
    /// that heard anything, so a request is not failed on a connection lost while idle.
    public func isStillConnected() -> Bool {
        guard isHealthy else { return false }
        var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) == 0
    }

    /// Set when the server refused a write as read-only.
    private var foundReadOnly = false

    /// Whether a transaction is open (or failed and not yet rolled back).
    public var isInTransaction: Bool {
        let status = PQtransactionStatus(handle)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR
    }

    /// Runs one or more SQL statements without parameters (DDL, transaction control).
    public func execute(_ sql: String) throws(PostgresError) {
        if !queued.isEmpty { PQclear(try pipeline(take())) }
        let result = PQexec(handle, sql)
        defer { PQclear(result) }
        try check(result, sql: sql)
    }

    /// Runs one statement without parameters whose answer nobody waits for (NOTIFY): inside a transaction it goes
    /// out with the next statement or the COMMIT.
    public func executeDeferred(_ sql: String) throws(PostgresError) {
        guard isInTransaction || !queued.isEmpty else { return try execute(sql) }
        queued.append(.plain(sql))
    }

    /// Runs `sql` with `arguments` and returns the number of rows it changed (or returned).
    @discardableResult
    public func run(_ sql: String, arguments: [any SQLBindable]) throws -> Int {
        let result = try perform(sql, arguments: arguments)
        defer { PQclear(result) }
        return Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    /// Inside a transaction, `sql` goes out with the next statement that needs an answer (or the COMMIT), in the
    /// same round trip; an error in it fails that statement. Outside one it runs at once.
    public func runDeferred(_ sql: String, arguments: [any SQLBindable]) throws {
        guard isInTransaction || !queued.isEmpty else { return _ = try run(sql, arguments: arguments) }
        queued.append(.prepared(name: try statementName(sql), sql: sql, values: arguments.map(\.sqlValue)))
    }

    /// Runs a query and returns every row.
    public func query(_ sql: String, arguments: [any SQLBindable]) throws -> [Row] {
        let result = try perform(sql, arguments: arguments)
        defer { PQclear(result) }
        let columnCount = PQnfields(result)
        let columns = (0..<columnCount).map { String(cString: PQfname(result, $0)) }
        let types = (0..<columnCount).map { PQftype(result, $0) }
        return (0..<PQntuples(result)).map { row in
            Row(columns: columns, values: (0..<columnCount).map { Self.value(result, row, $0, type: types[Int($0)]) })
        }
    }

    /// The kinds of transaction the store uses.
    public enum TransactionKind: String, Sendable {
        /// READ COMMITTED, read-write: writes lock what they must (`FOR UPDATE`) and see each other's commits.
        case readWrite = "BEGIN"
        /// REPEATABLE READ, read only: every statement sees the snapshot taken at the first one.
        case repeatableReadOnly = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws. The BEGIN goes out with
    /// the first statement, and whatever is still deferred goes with the COMMIT; a body that runs nothing costs no
    /// round trip.
    public func transaction<T>(_ kind: TransactionKind = .readWrite, _ body: () throws -> T) throws -> T {
        queued = [.plain(kind.rawValue)]
        do {
            let result = try body()
            if queued.count == 1, case .plain(kind.rawValue) = queued[0] {
                queued = []
            } else {
                queued.append(.plain("COMMIT"))
                PQclear(try pipeline(take()))
            }
            return result
        } catch {
            queued = []
            if isHealthy, isInTransaction { try? execute("ROLLBACK") }
            throw error
        }
    }

    // MARK: - LISTEN/NOTIFY

    /// Subscribes this connection to notifications on `channel` (an SQL identifier).
    public func listen(_ channel: String) throws(PostgresError) {
        try execute("LISTEN \"\(channel.replacingOccurrences(of: "\"", with: "\"\""))\"")
    }

    /// One notification: its channel and payload.
    public struct Notification: Sendable, Equatable {
        /// The channel it came on.
        public var channel: String
        /// Its payload (empty when none was given).
        public var payload: String

        /// A notification on `channel` with `payload`.
        public init(channel: String, payload: String) {
            self.channel = channel
            self.payload = payload
        }
    }

    /// Waits up to `timeout` seconds for notifications and returns them (empty on timeout). Throws when the
    /// connection is lost.
    public func waitForNotifications(timeout: Double) throws(PostgresError) -> [Notification] {
        var notifications = try drainNotifications()
        guard notifications.isEmpty else { return notifications }
        var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
        guard descriptor.fd >= 0 else { throw PostgresError(result: nil, connection: handle, sql: nil) }
        let ready = poll(&descriptor, 1, Int32(max(0, min(timeout, 3600)) * 1000))
        if ready > 0 { notifications = try drainNotifications() }
        return notifications
    }

    private func drainNotifications() throws(PostgresError) -> [Notification] {
        guard PQconsumeInput(handle) == 1 else { throw PostgresError(result: nil, connection: handle, sql: nil) }
        var notifications: [Notification] = []
        while let notification = PQnotifies(handle) {
            notifications.append(
                Notification(
                    channel: String(cString: notification.pointee.relname),
                    payload: notification.pointee.extra.map { String(cString: $0) } ?? ""))
            PQfreemem(notification)
        }
        return notifications
    }

    // MARK: - Statements

    private func perform(_ sql: String, arguments: [any SQLBindable]) throws(PostgresError) -> OpaquePointer {
        let name = try statementName(sql)
        let values = arguments.map(\.sqlValue)
        guard queued.isEmpty else {
            do {
                return try pipeline(take() + [.prepared(name: name, sql: sql, values: values)])
            } catch {
                if error.sqlstate == "26000" { prepared = [:] }  // a statement is gone (DISCARD ALL): prepare again
                throw error
            }
        }
        let result = withParameters(values) { count, pointers, lengths, formats in
            PQexecPrepared(handle, name, count, pointers, lengths, formats, 0)
        }
        do {
            try check(result, sql: sql)
        } catch {
            PQclear(result)
            if error.sqlstate == "26000" { prepared[sql] = nil }  // the statement is gone (DISCARD ALL): prepare again
            throw error
        }
        return result!
    }

    private func take() -> [Queued] {
        defer { queued = [] }
        return queued
    }

    /// Sends `statements` in one pipeline and reads their results: the last one's result when every statement
    /// succeeded, else the first failure (the statements after it were skipped by the server).
    private func pipeline(_ statements: [Queued]) throws(PostgresError) -> OpaquePointer {
        guard PQenterPipelineMode(handle) == 1 else { throw PostgresError(result: nil, connection: handle, sql: nil) }
        for statement in statements {
            let sent: Int32
            switch statement {
            case .plain(let sql):
                sent = PQsendQueryParams(handle, sql, 0, nil, nil, nil, nil, 0)
            case .prepared(let name, _, let values):
                sent = withParameters(values) { count, pointers, lengths, formats in
                    PQsendQueryPrepared(handle, name, count, pointers, lengths, formats, 0)
                }
            }
            guard sent == 1 else { throw abandonPipeline(sql: statement.sql) }
        }
        guard PQpipelineSync(handle) == 1 else { throw abandonPipeline(sql: nil) }
        var failure: PostgresError?
        var last: OpaquePointer?
        for (index, statement) in statements.enumerated() {
            guard let result = PQgetResult(handle) else { throw abandonPipeline(sql: statement.sql) }
            // Each statement's results end with a null.
            while let extra = PQgetResult(handle) { PQclear(extra) }
            let status = PQresultStatus(result)
            if failure == nil, status != PGRES_PIPELINE_ABORTED {
                do {
                    try check(result, sql: statement.sql)
                } catch {
                    failure = error
                }
            }
            if index == statements.count - 1, failure == nil { last = result } else { PQclear(result) }
        }
        guard let sync = PQgetResult(handle), PQresultStatus(sync) == PGRES_PIPELINE_SYNC else {
            throw abandonPipeline(sql: nil)
        }
        PQclear(sync)
        guard PQexitPipelineMode(handle) == 1 else { throw abandonPipeline(sql: nil) }
        if let failure {
            if let last { PQclear(last) }
            throw failure
        }
        guard let last else { throw abandonPipeline(sql: nil) }
        return last
    }

    /// The pipeline's results could not be read to its end: the connection is unusable (``isHealthy`` says so).
    private func abandonPipeline(sql: String?) -> PostgresError {
        pipelineFailed = true
        let error = PostgresError(result: nil, connection: handle, sql: sql)
        return PostgresError(sqlstate: error.sqlstate, message: error.message, sql: sql, connectionLost: true)
    }

    /// Calls `body` with libpq's parameter arrays for `values`: text, except bytes, which go as binary.
    private func withParameters<R>(
        _ values: [SQLValue],
        _ body: (Int32, [UnsafePointer<CChar>?], [Int32], [Int32]) -> R
    ) -> R {
        var texts: [UnsafeMutablePointer<CChar>?] = []
        var lengths: [Int32] = []
        var formats: [Int32] = []
        texts.reserveCapacity(values.count)
        for value in values {
            switch value {
            case .null:
                texts.append(nil)
                lengths.append(0)
                formats.append(0)
            case .integer(let v): appendText(String(v), &texts, &lengths, &formats)
            case .real(let v): appendText(Self.text(of: v), &texts, &lengths, &formats)
            case .text(let v): appendText(v, &texts, &lengths, &formats)
            case .blob(let bytes):
                let copy = UnsafeMutablePointer<CChar>.allocate(capacity: max(1, bytes.count))
                for (index, byte) in bytes.enumerated() { copy[index] = CChar(bitPattern: byte) }
                texts.append(copy)
                lengths.append(Int32(bytes.count))
                formats.append(1)
            }
        }
        defer { texts.forEach { $0?.deallocate() } }
        return body(Int32(values.count), texts.map { UnsafePointer($0) }, lengths, formats)
    }

    private func appendText(
        _ text: String, _ texts: inout [UnsafeMutablePointer<CChar>?], _ lengths: inout [Int32],
        _ formats: inout [Int32]
    ) {
        let utf8 = Array(text.utf8CString)
        let copy = UnsafeMutablePointer<CChar>.allocate(capacity: utf8.count)
        copy.initialize(from: utf8, count: utf8.count)
        texts.append(copy)
        lengths.append(Int32(utf8.count - 1))
        formats.append(0)
    }

    private func statementName(_ sql: String) throws(PostgresError) -> String {
        if let name = prepared[sql] { return name }
        let name = "sf\(prepared.count + 1)"
        let result = PQprepare(handle, name, numberedPlaceholders(sql), 0, nil)
        defer { PQclear(result) }
        try check(result, sql: sql)
        prepared[sql] = name
        return name
    }

    private func check(_ result: OpaquePointer?, sql: String) throws(PostgresError) {
        let status = result.map { PQresultStatus($0) } ?? PGRES_FATAL_ERROR
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            let error = PostgresError(result: result, connection: handle, sql: sql)
            if error.isReadOnly { foundReadOnly = true }
            throw error
        }
    }

    /// A double as PostgreSQL's `float8` input reads it back exactly.
    static func text(of value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value < 0 ? "-Infinity" : "Infinity" }
        return "\(value)"
    }

    // MARK: - Values

    // Type OIDs from `pg_type` (stable across versions).
    private static let boolType: Oid = 16
    private static let byteaType: Oid = 17
    private static let integerTypes: Set<Oid> = [20, 21, 23, 26]  // int8, int2, int4, oid
    private static let floatTypes: Set<Oid> = [700, 701]
    private static let numericType: Oid = 1700

    private static func value(_ result: OpaquePointer?, _ row: Int32, _ column: Int32, type: Oid) -> SQLValue {
        if PQgetisnull(result, row, column) == 1 { return .null }
        guard let bytes = PQgetvalue(result, row, column) else { return .null }
        let text = String(cString: bytes)
        switch type {
        case boolType: return .integer(text == "t" ? 1 : 0)
        case _ where integerTypes.contains(type): return Int64(text).map(SQLValue.integer) ?? .text(text)
        case _ where floatTypes.contains(type): return Double(text).map(SQLValue.real) ?? .text(text)
        case numericType:
            if let integer = Int64(text) { return .integer(integer) }
            return Double(text).map(SQLValue.real) ?? .text(text)
        case byteaType: return .blob(hexBytes(text))
        default: return .text(text)
        }
    }

    /// `bytea`'s text output (`\x` then hex digits) as bytes.
    private static func hexBytes(_ text: String) -> [UInt8] {
        var digits = Array(text.utf8)
        if digits.count >= 2, digits[0] == UInt8(ascii: "\\"), digits[1] == UInt8(ascii: "x") {
            digits.removeFirst(2)
        }
        func nibble(_ c: UInt8) -> UInt8 {
            switch c {
            case 0x30...0x39: return c - 0x30
            case 0x61...0x66: return c - 0x61 + 10
            case 0x41...0x46: return c - 0x41 + 10
            default: return 0
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index + 1 < digits.count {
            bytes.append(nibble(digits[index]) << 4 | nibble(digits[index + 1]))
            index += 2
        }
        return bytes
    }
}
