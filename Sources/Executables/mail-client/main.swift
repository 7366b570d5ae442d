import CommandLineSupport
import Foundation
import OpenSSLCrypto

// Before anything uses OpenSSL: no exit-time cleanup under threads still using it.
OpenSSLProcess.keepUntilExit()
ShutdownSignals.shared.install()

let usage = """
    usage: mail-client <command> [options]     (mail-client <command> --help for details)

    commands:
      run         simulated device: push registration, signal stream, delta sync, JSON event lines
      fleet       many simulated devices in one process (each as `run`, its lines tagged "device")
      send        deliver a message (POST /v1/deliveries with a delivery token)
      mark-read   mark a message as read
      update      change a message's flags or mailbox
      delete      destroy a message
      dump        print the local cache of a `run` state folder as JSON
    """

let commandLine = Array(CommandLine.arguments.dropFirst())
let command = commandLine.first ?? "--help"
let rest = Array(commandLine.dropFirst())

switch command {
case "run":
    await runCommand(usage: RunCommand.usage) { try await RunCommand.main(rest) }
case "fleet":
    await runCommand(usage: FleetCommand.usage) { try await FleetCommand.main(rest) }
case "send":
    await runCommand(usage: SendCommand.usage) { try await SendCommand.main(rest) }
case "mark-read", "update", "delete":
    await runCommand(usage: UpdateCommand.usage(command)) { try await UpdateCommand.main(command, rest) }
case "dump":
    await runCommand(usage: DumpCommand.usage) { try DumpCommand.main(rest) }
case "--help", "-h", "help":
    print(usage)
default:
    printError("error: unknown command '\(command)'\n\n\(usage)")
    exit(2)
}
