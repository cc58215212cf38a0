import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A buffered writer to a file descriptor (stdout, stderr): results can be
/// millions of JSON lines, written in 64 KiB pieces. Tests run a tool in
/// their own process with sinks that keep what is written (`capturing()`).
/// Thread-safe (the signal handler writes too).
public final class OutputSink: @unchecked Sendable {
    private let fd: Int32
    private var buffer: [UInt8] = []
    private let limit: Int
    private let lock = NSLock()
    /// What a capturing sink was given (nil: the sink writes to `fd`).
    private var captured: [UInt8]?

    public static let standardOutput = OutputSink(fd: 1)
    public static let standardError = OutputSink(fd: 2, limit: 0)

    public init(fd: Int32, limit: Int = 64 << 10) {
        self.fd = fd
        self.limit = limit
        buffer.reserveCapacity(limit)
    }

    /// A sink that keeps everything written to it, for `text` (no descriptor).
    public static func capturing() -> OutputSink {
        let sink = OutputSink(fd: -1, limit: 0)
        sink.captured = []
        return sink
    }

    /// Everything written to a capturing sink so far.
    public var text: String {
        flush()
        return lock.withLock { String(decoding: captured ?? [], as: UTF8.self) }
    }

    deinit { flush() }

    public func write(_ text: String) { write(bytes: Array(text.utf8)) }

    public func line(_ text: String) { write(text + "\n") }

    public func write(bytes: [UInt8]) {
        lock.lock()
        buffer.append(contentsOf: bytes)
        let full = buffer.count >= limit
        lock.unlock()
        if full { flush() }
    }

    /// True when this descriptor is a terminal (progress then redraws one line).
    public var isTerminal: Bool { fd >= 0 && isatty(fd) == 1 }

    public func flush() {
        lock.lock()
        defer { lock.unlock() }
        if captured != nil {
            captured! += buffer
            buffer.removeAll(keepingCapacity: true)
            return
        }
        var done = 0
        while done < buffer.count {
            let n = buffer.withUnsafeBytes { Glibc_or_Darwin_write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                break // stdout closed (a pipe to `head`): nothing more can be said
            }
            done += n
        }
        buffer.removeAll(keepingCapacity: true)
    }
}

#if canImport(Glibc)
private func Glibc_or_Darwin_write(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { Glibc.write(fd, p, n) }
#else
private func Glibc_or_Darwin_write(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { Darwin.write(fd, p, n) }
#endif
