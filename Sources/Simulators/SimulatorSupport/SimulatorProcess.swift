import CommandLineSupport
import Foundation

/// A simulator's server as its process runs it: started once, shut down once at SIGINT or SIGTERM.
package protocol SimulatorProcess: Sendable {
    /// Closes the listeners and every device stream, and waits for the work in flight.
    func shutdown() async
}

/// The life of a simulator's process, the same for apns-sim, fcm-sim and webpush-sim: `--help`, the flags of
/// `flags` also read from `environmentPrefix` variables, any other flag refused, the open-file limit raised, then
/// `start` (which builds the configuration, starts the server and returns it with the line saying where it
/// listens), serving until SIGINT or SIGTERM, and a shutdown. Bad flags exit 2 with the usage, other failures 1.
package func runSimulator(
    name: String, usage: String, environmentPrefix: String, flags: FlagTable,
    start: (Arguments) throws -> (server: any SimulatorProcess, listening: String)
) async -> Never {
    await runCommand(usage: usage) {
        let arguments = try flags.parse(Array(CommandLine.arguments.dropFirst()), environmentPrefix: environmentPrefix)
        if arguments.wantsHelp {
            print(usage)
            return
        }
        let (stopRequested, signals) = AsyncStream.makeStream(of: Int32.self)
        let sources = TerminationSignals.install { signals.yield($0) }
        ProcessResources.raiseOpenFileLimit()
        let (server, listening) = try start(arguments)
        printError("\(name) listening \(listening)")
        var iterator = stopRequested.makeAsyncIterator()
        _ = await iterator.next()
        printError("\(name): stopping")
        await server.shutdown()
        withExtendedLifetime(sources) {}
        printError("\(name): stopped")
    }
}
