import Foundation
import ToolSupport

/// The API token `stepsync upload` sends: read from `--token-file PATH` or
/// the `STEPSYNC_TOKEN` environment variable, never from a bare command-line
/// argument (other users of the machine can read those with `ps`). Its text
/// never appears in a message: errors name where it came from, not what it is.
enum UploadToken {
    /// The token, or nil when neither source gives one (a `--single-user`
    /// server needs none). `--token-file` wins over the environment.
    static func resolve(file: String?, environment: [String: String], warn: (String) -> Void = { _ in }) throws -> String? {
        if let file {
            if let mode = (try? FileManager.default.attributesOfItem(atPath: file))?[.posixPermissions] as? Int, mode & 0o077 != 0 {
                warn("--token-file \(file) can be read by other users (mode \(String(mode & 0o777, radix: 8))); chmod 600 it")
            }
            let data: Data
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: file))
            } catch {
                throw Arguments.UsageError("--token-file \(file): cannot read it (\((error as NSError).localizedFailureReason ?? "no such file or not readable"))")
            }
            return try check(String(decoding: data, as: UTF8.self), from: "--token-file \(file)")
        }
        if let text = environment["STEPSYNC_TOKEN"] {
            return try check(text, from: "STEPSYNC_TOKEN")
        }
        return nil
    }

    /// Trims surrounding whitespace (a file written by `echo` ends in a
    /// newline) and accepts only what can go in an HTTP header unchanged.
    private static func check(_ text: String, from source: String) throws -> String {
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty else { throw Arguments.UsageError("\(source): the token is empty") }
        guard token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw Arguments.UsageError("\(source): the token holds a space, a control or a non-ASCII character (one token, one line)")
        }
        return token
    }
}
