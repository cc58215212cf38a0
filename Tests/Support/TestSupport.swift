// Helpers shared by the test targets: temporary directories, a seeded
// generator, file bytes, and child processes for the kill tests.
import Foundation
import StepLog
@_exported import StepSync
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A fresh directory under the system temporary directory, removed on deinit.
public final class TemporaryDirectory {
    public let path: String

    public init(_ label: String = "steplog", in parent: String? = nil) {
        var template = Array(((parent ?? NSTemporaryDirectory()) + "/\(label)-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    public func sub(_ name: String) -> String { path + "/" + name }

    /// Writes `bytes` to `name` in this directory and returns the file's path.
    @discardableResult
    public func write(_ name: String, _ bytes: [UInt8]) throws -> String {
        let file = sub(name)
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        return file
    }

    /// Writes `text` (UTF-8) to `name` in this directory and returns the file's path.
    @discardableResult
    public func write(_ name: String, _ text: String) throws -> String { try write(name, Array(text.utf8)) }
}

/// A deterministic generator: tests replay the same history every run.
public typealias SeededGenerator = SplitMix64

public func readFile(_ path: String) -> [UInt8] { Array(FileManager.default.contents(atPath: path) ?? Data()) }

public func writeFile(_ path: String, _ bytes: [UInt8]) {
    precondition(FileManager.default.createFile(atPath: path, contents: Data(bytes)), "cannot write \(path)")
}

/// Every file of a store directory by name, with its bytes: equal before and
/// after means nothing was written. Its LOCK names the last writer's pid, so
/// it is left out unless `includingLock` (a read-only tool must not touch it).
public func storeFiles(_ directory: String, includingLock: Bool = false) throws -> [String: [UInt8]] {
    var result: [String: [UInt8]] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: directory) where includingLock || name != "LOCK" {
        result[name] = readFile(directory + "/" + name)
    }
    return result
}

/// Path of an executable built alongside the test bundle (`swift build` puts
/// products and the test bundle in one folder).
public func builtProduct(_ name: String) -> String {
    let candidates = [
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path,
        Bundle.main.bundleURL.deletingLastPathComponent().path,
        Bundle.main.bundlePath,
    ]
    for dir in candidates where FileManager.default.isExecutableFile(atPath: dir + "/" + name) { return dir + "/" + name }
    fatalError("\(name) not found next to the test bundle (looked in \(candidates))")
}

/// A child process whose stdout is read line by line. Spawned with
/// posix_spawn so this code owns exactly two descriptors (the read end of the
/// pipe, closed on deinit): tests run in parallel, and a descriptor closed
/// twice would close another test's file.
public final class ChildProcess {
    public let pid: pid_t
    private let output: Int32
    private var buffer: [UInt8] = []
    private var exitStatus: Int32?

    /// Starts `executable`. Its stdout is read with `readLine`; stderr goes to
    /// /dev/null, or into the same pipe with `mergeStandardError`.
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                mergeStandardError: Bool = false) throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw StepLogError.io(operation: "pipe", path: executable, errno: errno) }
        // Close-on-exec, so that children other tests spawn meanwhile do not
        // inherit this pipe (the child's own dup2 onto stdout clears the flag).
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addclose(&actions, fds[0])
        posix_spawn_file_actions_addclose(&actions, fds[1])
        if mergeStandardError {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        } else {
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let env = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { argv.forEach { free($0) }; env.forEach { free($0) } }
        var child: pid_t = 0
        let result = posix_spawn(&child, executable, &actions, nil, argv, env)
        close(fds[1])
        guard result == 0 else {
            close(fds[0])
            throw StepLogError.io(operation: "spawn", path: executable, errno: result)
        }
        pid = child
        output = fds[0]
    }

    deinit {
        if exitStatus == nil { _ = Glibc_or_Darwin_kill(pid, SIGKILL); _ = wait() }
        close(output)
    }

    /// The next line of output, or nil at end of output.
    public func readLine() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: 10) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = chunk.withUnsafeMutableBytes { read(output, $0.baseAddress, 4096) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                if buffer.isEmpty { return nil }
                defer { buffer.removeAll() }
                return String(decoding: buffer, as: UTF8.self)
            }
            buffer += chunk[0..<n]
        }
    }

    public func kill(_ signal: Int32 = SIGKILL) { _ = Glibc_or_Darwin_kill(pid, signal) }

    /// Waits for the child; returns its exit code, or 128 + signal when killed.
    @discardableResult
    public func wait() -> Int32 {
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let code = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        exitStatus = code
        return code
    }
}

#if canImport(Glibc)
private func Glibc_or_Darwin_kill(_ pid: Int32, _ signal: Int32) -> Int32 { Glibc.kill(pid, signal) }
#else
private func Glibc_or_Darwin_kill(_ pid: Int32, _ signal: Int32) -> Int32 { Darwin.kill(pid, signal) }
#endif

/// Runs a program to completion; returns its exit code and output lines.
public func runProgram(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                       mergeStandardError: Bool = false) throws -> (code: Int32, lines: [String]) {
    let child = try ChildProcess(executable, arguments, environment: environment, mergeStandardError: mergeStandardError)
    var lines: [String] = []
    while let line = child.readLine() { lines.append(line) }
    return (child.wait(), lines)
}
