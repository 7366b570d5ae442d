import CPostgres

/// A failure reported by PostgreSQL or libpq: the SQLSTATE when the server sent one, the message, and the SQL that
/// failed. Never carries a statement's parameter values.
public struct PostgresError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The five-character SQLSTATE (for example `23505`, unique violation), or `nil` when the failure is libpq's own
    /// (no connection, connection lost).
    public let sqlstate: String?
    /// The server's or libpq's message, on one line.
    public let message: String
    /// The SQL being run, when the failure belongs to a statement.
    public let sql: String?
    /// Whether the connection is unusable afterwards (lost, refused, or the server shutting down).
    public let connectionLost: Bool

    /// Creates an error from its parts.
    public init(sqlstate: String?, message: String, sql: String? = nil, connectionLost: Bool = false) {
        self.sqlstate = sqlstate
        self.message = message
        self.sql = sql
        self.connectionLost = connectionLost
    }

    /// From a failed result (or none) on `connection`.
    init(result: OpaquePointer?, connection: OpaquePointer?, sql: String?) {
        let state = result.flatMap { PQresultErrorField($0, Int32(UInt8(ascii: "C"))) }.map { String(cString: $0) }
        let text =
            result.flatMap { PQresultErrorField($0, Int32(UInt8(ascii: "M"))) }.map { String(cString: $0) }
            ?? connection.flatMap { PQerrorMessage($0) }.map { String(cString: $0) } ?? "unknown libpq failure"
        let lost = connection.map { PQstatus($0) != CONNECTION_OK } ?? true
        self.init(
            sqlstate: state, message: Self.oneLine(text), sql: sql,
            connectionLost: lost || (state.map(Self.isConnectionState) ?? false))
    }

    static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
    }

    /// Class 08 (connection exception) and the shutdown states of class 57.
    static func isConnectionState(_ state: String) -> Bool {
        state.hasPrefix("08") || state == "57P01" || state == "57P02" || state == "57P03"
    }

    /// A one-line description: SQLSTATE, message and SQL.
    public var description: String {
        var text = "PostgreSQL error \(sqlstate ?? "(no SQLSTATE)"): \(message)"
        if let sql { text += " — while running: \(sql)" }
        return text
    }

    /// `23505`: a UNIQUE or PRIMARY KEY constraint refused the write.
    public var isUniqueViolation: Bool { sqlstate == "23505" }
    /// Class 23: any integrity constraint.
    public var isConstraintViolation: Bool { sqlstate?.hasPrefix("23") ?? false }
    /// `40001` or `40P01`: the transaction lost a race (serialization failure, deadlock) and may simply be run again.
    public var isRetryable: Bool { sqlstate == "40001" || sqlstate == "40P01" }
    /// `25006`: the server is read-only (a standby, or a primary demoted since the connection was made). The
    /// connection is replaced (see ``PostgresConnection/isHealthy``), and a URL with
    /// `target_session_attrs=read-write` then reaches whichever host is the primary.
    public var isReadOnly: Bool { sqlstate == "25006" }
    /// Whether the database could not be reached, went away or cannot take writes now: try again later.
    public var isUnavailable: Bool { connectionLost || isReadOnly || sqlstate == "53300" }
}
