import Foundation
import StepSync

/// Progress on stderr: a line redrawn in place when stderr is a terminal,
/// plain lines every few seconds otherwise (logs, pipes, tests). Shows counts,
/// a rate and an ETA. Thread-safe (a source may report from its own thread).
public final class ProgressLine: @unchecked Sendable {
    private let lock = NSLock()
    private let sink: OutputSink
    private let interactive: Bool
    private let interval: Double
    private var last = -Double.infinity
    private let started = Date()
    private var drawn = false

    public init(_ sink: OutputSink = .standardError, plainInterval: Double = 2) {
        self.sink = sink
        interactive = sink.isTerminal
        interval = interactive ? 0.1 : plainInterval
    }

    public var elapsed: Double { Date().timeIntervalSince(started) }

    /// True when the line is redrawn in place (stderr is a terminal).
    public var isInteractive: Bool { interactive }

    /// Shows `text` if enough time passed since the last line (or `force`).
    public func update(_ text: @autoclosure () -> String, force: Bool = false) {
        lock.lock()
        defer { lock.unlock() }
        let now = elapsed
        guard force || now - last >= interval else { return }
        last = now
        if interactive {
            sink.write("\r\u{1B}[K" + text())
            drawn = true
        } else {
            sink.line(text())
        }
        sink.flush()
    }

    /// Ends an interactive line so later output starts on a fresh one.
    public func finish() {
        lock.lock()
        defer { lock.unlock() }
        if interactive && drawn { sink.write("\n"); sink.flush() }
        drawn = false
    }

    /// "12,345/67,890 (1,234/s, ETA 45s)".
    public static func counts(_ done: Int, of total: Int, elapsed: Double, unit: String = "") -> String {
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        var text = "\(Format.count(done))/\(Format.count(total))\(unit) (\(Format.count(Int(rate)))/s"
        if rate > 0 && total > done { text += ", ETA " + Format.duration(Double(total - done) / rate) }
        return text + ")"
    }
}
