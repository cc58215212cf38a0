/// The dispatch both command-line tools share: no command prints the usage
/// (exit 2), `--help` prints it (exit 0), `help COMMAND` prints what
/// `COMMAND --help` prints, `--version` the version, an unknown command is a
/// usage error, and a command's error becomes one line on stderr: exit 2 for
/// usage errors, 1 for failures. A store error that has a way out (a damaged
/// store, one another process holds) says it on the same line.
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

    /// Runs the command `arguments` names; its usage and errors go to `out` and `err`.
    public func run(_ arguments: [String], commands: [String: Command],
                    out: OutputSink = .standardOutput, err: OutputSink = .standardError) async -> Int32 {
        guard let command = arguments.first else {
            err.line(usage)
            return 2
        }
        if ["--help", "-h"].contains(command) || (command == "help" && arguments.count == 1) {
            out.line(usage)
            return 0
        }
        if command == "--version" {
            out.line(ToolVersion.line(name))
            return 0
        }
        if command == "help" {
            guard arguments.count == 2, commands[arguments[1]] != nil else {
                err.line("\(name) help: " + (arguments.count == 2 ? "unknown command '\(arguments[1])'" : "takes one command") + "\n" + usage)
                return 2
            }
            return await dispatch(arguments[1], ["--help"], commands: commands, out: out, err: err)
        }
        return await dispatch(command, Array(arguments.dropFirst()), commands: commands, out: out, err: err)
    }

    private func dispatch(_ command: String, _ arguments: [String], commands: [String: Command],
                          out: OutputSink, err: OutputSink) async -> Int32 {
        guard let run = commands[command] else {
            err.line("\(name): unknown command '\(command)'\n" + usage)
            return 2
        }
        do {
            return try await run(arguments)
        } catch where isUsageError(error) {
            err.line("\(name) \(command): \(error)" + (error is Arguments.UsageError ? " (see '\(name) \(command) --help')" : ""))
            return 2
        } catch {
            out.flush()
            err.line("\(name) \(command): \(error)" + (StoreErrorAdvice.nextStep(after: error).map { ". " + $0 } ?? ""))
            return 1
        }
    }
}
