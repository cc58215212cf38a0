/// The dispatch both command-line tools share: no command prints the usage
/// (exit 2), `--help` prints it (exit 0), an unknown command is a usage error,
/// and a command's error becomes one line on stderr: exit 2 for usage errors,
/// 1 for failures.
public struct CommandLineTool {
    public typealias Command = ([String]) async throws -> Int32

    public let name: String
    public let usage: String
    /// Which errors are the user's mistake in the arguments (exit 2).
    public let isUsageError: (Error) -> Bool

    public init(name: String, usage: String, isUsageError: @escaping (Error) -> Bool = { $0 is Arguments.UsageError }) {
        self.name = name
        self.usage = usage
        self.isUsageError = isUsageError
    }

    public func run(_ arguments: [String], commands: [String: Command]) async -> Int32 {
        let out = OutputSink.standardOutput, err = OutputSink.standardError
        guard let command = arguments.first else {
            err.line(usage)
            return 2
        }
        if ["--help", "-h", "help"].contains(command) {
            out.line(usage)
            return 0
        }
        guard let run = commands[command] else {
            err.line("\(name): unknown command '\(command)'\n" + usage)
            return 2
        }
        do {
            return try await run(Array(arguments.dropFirst()))
        } catch where isUsageError(error) {
            err.line("\(name) \(command): \(error)" + (error is Arguments.UsageError ? " (see '\(name) \(command) --help')" : ""))
            return 2
        } catch {
            out.flush()
            err.line("\(name) \(command): \(error)")
            return 1
        }
    }
}
