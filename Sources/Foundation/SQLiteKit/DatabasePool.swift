import Foundation

/// A file database shared by threads: one writer connection and a set of reader connections.
///
/// Writes are serialized and run in `BEGIN IMMEDIATE` transactions; reads run concurrently in
/// snapshot (deferred) transactions on their own connections, thanks to WAL mode. An in-memory pool
/// uses a single connection for both.
///
/// `@unchecked Sendable`: `writerLock` guards `writer`; `readerLock` guards `idleReaders`.
public final class DatabasePool: @unchecked Sendable {
    /// The file path, or `:memory:`.
    public let path: String
    /// How connections are opened.
    public let configuration: DatabaseConfiguration
    private let writer: Database
    private let writerLock = NSLock()
    private var idleReaders: [Database] = []
    private let readerLock = NSLock()
    private let maximumIdleReaders: Int

    /// Opens the database at `path` (created when missing). `maximumIdleReaders` bounds the kept reader connections.
    public init(
        path: String, configuration: DatabaseConfiguration = DatabaseConfiguration(), maximumIdleReaders: Int = 8
    ) throws {
        self.path = path
        self.configuration = configuration
        self.maximumIdleReaders = maximumIdleReaders
        self.writer = try Database(path: path, configuration: configuration)
    }

    /// A private in-memory database (one connection), for tests.
    public static func inMemory(configuration: DatabaseConfiguration = DatabaseConfiguration()) throws -> DatabasePool {
        try DatabasePool(path: ":memory:", configuration: configuration)
    }

    private var isInMemory: Bool { path == ":memory:" }

    /// Runs `body` in a write transaction (`BEGIN IMMEDIATE`): committed when it returns, rolled back when it throws.
    @discardableResult
    public func write<T>(_ body: (Database) throws -> T) throws -> T {
        try writerLock.withLock {
            try writer.transaction(.immediate) { try body(writer) }
        }
    }

    /// Runs `body` on the writer connection without opening a transaction (for pragmas, `VACUUM`,
    /// or callers that group several transactions themselves).
    @discardableResult
    public func writeWithoutTransaction<T>(_ body: (Database) throws -> T) throws -> T {
        try writerLock.withLock { try body(writer) }
    }

    /// Runs `body` in a read transaction that sees one consistent snapshot.
    @discardableResult
    public func read<T>(_ body: (Database) throws -> T) throws -> T {
        if isInMemory {
            return try writerLock.withLock { try writer.transaction(.deferred) { try body(writer) } }
        }
        let reader = try checkOutReader()
        defer { checkIn(reader) }
        return try reader.transaction(.deferred) { try body(reader) }
    }

    private func checkOutReader() throws -> Database {
        if let reader = readerLock.withLock({ idleReaders.popLast() }) { return reader }
        var readerConfiguration = configuration
        readerConfiguration.walMode = false  // the writer already switched the file to WAL
        return try Database(path: path, configuration: readerConfiguration)
    }

    private func checkIn(_ reader: Database) {
        readerLock.withLock {
            if idleReaders.count < maximumIdleReaders { idleReaders.append(reader) }
        }
    }
}
