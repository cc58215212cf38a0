import StepLog

/// The version every command-line tool prints for `--version` (stepsync,
/// steplog, stepbench; the API server prints the same number, a test keeps
/// them equal), with the storage format it writes.
public enum ToolVersion {
    public static let number = "1.0.0"

    /// "stepsync 1.0.0 (StepLog format 3)".
    public static func line(_ tool: String) -> String {
        "\(tool) \(number) (StepLog format \(FormatConstants.formatVersion))"
    }
}
