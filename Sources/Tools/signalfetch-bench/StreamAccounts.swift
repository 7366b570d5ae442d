import Foundation
import MailboxStore
import OpenSSLCrypto

/// Accounts with a signed-in session each, made straight in a store for the held-stream benches: ten thousand
/// sign-ins through the API would cost ten thousand scrypt hashes at the production parameters, minutes of CPU that
/// measure nothing the bench is about. The accounts are real rows (their mailboxes, a password hashed at the test
/// parameters) and the sessions are those `POST /v1/session` makes: a random token whose SHA-256 is stored.
enum StreamAccounts {
    /// Creates `count` accounts `PREFIX00000`, `PREFIX00001`, … (password `password-USERNAME`) in the store at
    /// `path`, one session each, and prints `USERNAME TOKEN` per line in that order.
    static func seed(path: String, prefix: String, count: Int) async throws {
        guard count > 0, count <= 1_000_000 else { throw BenchError("--count must be between 1 and 1,000,000") }
        var configuration = MailboxStore.Configuration()
        configuration.passwordParameters = .testing
        let store = try MailboxStore(path: path, configuration: configuration)
        let width = max(5, String(count - 1).count)
        let names = (0..<count).map { index in
            let digits = String(index)
            return prefix + String(repeating: "0", count: width - digits.count) + digits
        }
        var tokens = [String](repeating: "", count: count)
        // The writer batches concurrent writes into one transaction: a few dozen in flight keep it busy.
        let inFlight = 64
        try await withThrowingTaskGroup(of: (Int, String).self) { group in
            var next = 0
            func start() {
                let index = next
                next += 1
                group.addTask {
                    let account = try await store.createAccount(
                        username: names[index], password: "password-\(names[index])")
                    let token = SecureRandom.base64URL(32)
                    _ = try await store.createSession(
                        accountID: account.id, tokenHash: SHA256.hash(token), deviceName: "bench stream")
                    return (index, token)
                }
            }
            while next < min(inFlight, count) { start() }
            while let (index, token) = try await group.next() {
                tokens[index] = token
                if next < count { start() }
            }
        }
        var output = ""
        output.reserveCapacity(count * 60)
        for (name, token) in zip(names, tokens) { output += "\(name) \(token)\n" }
        FileHandle.standardOutput.write(Data(output.utf8))
    }
}
